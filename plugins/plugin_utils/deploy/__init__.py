# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy: plan, run folder, steps and gates. Stage 5; the doors are service.py (lock, prepare,
step, finish), called by the deploy actions, and agent_step.py (one worker's part of a step, behind a
Transport the deploy_agent action implements).

plan.py (pure: what happens to every allocation, in which order), run_state.py (pure reducer),
run.py (the run folder), stage.py and layers.py (what ships), pin.py, view.py (what the operator reads,
--diff), progress.py, gate.py (health gates), remote.py and rsync.py (calling the worker agent), lock.py,
adopt.py, certs.py, jobspec_deploy.py.
"""

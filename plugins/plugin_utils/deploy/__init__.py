# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy: the plan, the run folder, the steps and their gates.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

The doors are service.py (lock, prepare, step, finish), called by the deploy actions, and agent_step.py (one
worker's part of a step, behind a Transport the deploy_agent action implements).

plan.py (pure: what happens to every allocation, in which order), run_state.py (pure reducer),
run.py (the run folder, the step driver, RunContext), callbacks.py (what a step calls back: StepCallbacks),
stage.py (what ships), pin.py, view.py (what the operator reads, --diff), progress.py (progress records), gate.py
(health gates, over the health package), remote.py and rsync.py (calling the worker agent), adopt.py, certs.py
(the leaves of certs/ as the stage's overlays). The deploy lock is bucket/locks.py; job specs' environments,
worker order and layers are jobspec/.
"""

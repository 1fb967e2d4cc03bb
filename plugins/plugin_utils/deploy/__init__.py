# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy: the plan, the run folder, the steps and their gates.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

The doors are service.py (lock, prepare, step, finish), called by the deploy actions, and agent_step.py (one
worker's part of a step, behind a Transport the deploy_agent action implements).

plan.py (pure: what happens to every allocation, in which order; the door of reconcile.py, which
decides each allocation's action, schedule.py, which turns the decisions into waves, batches and steps,
scope.py, the plan's inputs, and records.py, the typed plan with to_json/from_json), run_state.py (pure
reducer), run.py (the run folder, the step driver, RunContext), callbacks.py (what a step calls back:
StepCallbacks), stage.py (what ships), pin.py (plan hash, pins), view.py (what the operator reads, --diff),
progress.py (progress records), gate.py (health gates, over the health package), remote.py and rsync.py
(calling the worker agent), adopt.py, certs.py (the leaves of certs/ as the stage's overlays). The deploy lock
is bucket/locks.py; job specs' environments, worker order and layers are jobspec/.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"AgentCall": "agent_step", "apply": "agent_step", "run_rsync": "agent_step",
         "Reader": "progress", "mark": "progress", "progress_path": "progress",
         "call_agent": "remote", "parse_output": "remote", "read_state": "remote", "step_request": "remote",
         "SliceError": "slices", "slice_of": "slices",
         "FinishRequest": "service", "PlanRequest": "service", "finish": "service", "lock": "service",
         "prepare": "service", "step": "service", "unlock": "service",
         "Verdict": "view", "done_line": "view", "host_diff": "view", "plan_summary": "view", "progress_line": "view",
         "step_line": "view", "verdict_table": "view", "workers_line": "view"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

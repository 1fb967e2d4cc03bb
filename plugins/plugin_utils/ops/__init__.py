# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ops: the day-2 verbs over a built bucket.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

status.py, cat.py, gc.py, health_check.py, run_command.py, facts.py, scaffold.py (job_create),
job_target.py (maand.core.job's make target: the deploy_job action), logs.py (with log_lines.py: the bucket
logs and the deploy records), job_logs.py (the tail of a job's own logs/ on its workers),
extra_vars.py and preflight.py (a playbook's checks before it touches a worker: maand.core.preflight),
state_move.py (maand.core.state: a bucket's state between data/ and PostgreSQL).
report.py: what every verb reports (lines, JSON document, counts, outcome) for the stdout callback,
-e maand_format=json and the run's custom stats (AWX).

Each verb's module is its door (ops/<verb>.py); the actions call nothing else of ops/.
"""

from __future__ import annotations

from ..doors import lazy

# The door: the verb modules (ops.<verb>.<name>), imported when first used (None: the module itself).
_DOOR = {"cat": None, "cert_metrics": None, "extra_vars": None, "facts": None, "gc": None,
         "health_check": None, "info": None, "job_logs": None, "job_target": None, "logs": None, "preflight": None, "report": None,
         "run_command": None,
         "scaffold": None, "state_move": None, "status": None, "worker_sync": None}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bucket: the workspace files read into the model, and the state store.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

model.py (load_bucket: maand.conf, workers.json, bucket.conf, the jobs, disabled.json), readers.py (one
reader per format), schemas.py, units.py (resources, versions, architectures), problems.py (the
error report), naming.py, job_checks.py (per-job checks of the manifest), content.py (content hashing
of job trees), storage.py (the state store seam: store() picks the bucket folder or PostgreSQL; the
data/ folder, atomic writes), locks.py (the bucket lock and the deploy lock, in either store), runlog.py
(maand's bucket logs: logs/<worker>.log, logs/maand.log, logs/runs/<run_id>/, kv or json lines),
state_pg.py (the PostgreSQL state store, its side of both locks and the deploy lock's holder process),
connect.py (first contact: what a failed SSH connection to a worker means and what to do).

The door: model.py (load_bucket and the model's records); storage.py for what every stage persists;
locks.py for the locks; runlog.py for the bucket logs.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"target_problem": "job_checks", "WORKERS_FILE": "model", "Bucket": "model", "load_maand_conf": "model",
         "group_name": "naming", "Report": "problems", "did_you_mean": "problems", "redact": "state_pg",
         "LockBusy": "locks", "DeployInProgress": "locks", "StateStoreError": "storage",
         "store": "storage", "atomic_write": "storage",
         "JOB_NAME": "model", "HOST_NAME": "model", "JOBS_DIR": "model",
         "RunLog": "runlog", "LogCommand": "runlog", "summarize": "runlog", "parse_line": "runlog",
         "ssh_hint": "connect", "ssh_result_words": "connect", "ssh_hints_for": "connect", "deploy_needs": "connect",
         "lacking_message": "connect"}  # the names build accepts (catalog_schema)
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

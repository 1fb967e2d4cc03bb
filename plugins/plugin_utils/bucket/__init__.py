# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a bucket: the workspace files into the model (stage 1).

model.py (load_bucket: maand.conf, workers.json, bucket.conf, the jobs, disabled.json), readers.py (one
reader per format), schemas.py, units.py (resources, versions, architectures), problems.py (the
error report), naming.py, jobspec.py (the Maelstrom job-spec model), job_checks.py (per-job checks of
the manifest), content.py (content hashing of job trees), storage.py (the state store seam: store() picks the
bucket folder or PostgreSQL; the data/ folder, atomic writes, the bucket lock), state_pg.py (the
PostgreSQL state store and its deploy lock holder).

The door: model.py (load_bucket and the model's records); storage.py for what every stage persists.
"""

from __future__ import annotations

import importlib

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"target_problem": "job_checks", "WORKERS_FILE": "model", "Bucket": "model", "load_maand_conf": "model",
         "group_name": "naming", "Report": "problems", "did_you_mean": "problems", "redact": "state_pg",
         "LockBusy": "storage", "StateStoreError": "storage",
         "JOB_NAME": "model", "HOST_NAME": "model", "JOBS_DIR": "model"}  # the names build accepts (catalog_schema)
__all__ = sorted(_DOOR)


def __getattr__(name):
    if name not in _DOOR:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = globals()[name] = getattr(importlib.import_module("." + _DOOR[name], __name__), name)
    return value


def __dir__():
    return sorted(set(globals()) | set(_DOOR))

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ops: the day-2 verbs over a built bucket.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

status.py, cat.py, gc.py, health_check.py, run_command.py, facts.py, scaffold.py (job_create),
extra_vars.py, state_move.py (maand.core.state: a bucket's state between data/ and PostgreSQL).

Each verb's module is its door (ops/<verb>.py); the actions call nothing else of ops/.
"""

from __future__ import annotations

import importlib

# The door: the verb modules (ops.<verb>.<name>), imported when first used.
_DOOR = {"cat": "cat", "cert_metrics": "cert_metrics", "extra_vars": "extra_vars", "facts": "facts", "gc": "gc",
         "health_check": "health_check", "info": "info", "logs": "logs", "run_command": "run_command",
         "scaffold": "scaffold", "state_move": "state_move", "status": "status", "worker_sync": "worker_sync"}
__all__ = sorted(_DOOR)


def __getattr__(name):
    if name not in _DOOR:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = globals()[name] = importlib.import_module("." + name, __name__)
    return value


def __dir__():
    return sorted(set(globals()) | set(_DOOR))

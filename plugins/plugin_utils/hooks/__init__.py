# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hooks: job commands, run on the controller as maand runs them.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

commands.py (which commands an event runs), run.py (one process per allocation), points.py (where
build, deploy and job_command run them), runtime_api.py (maand's runtime API on localhost).

The door: points.py (where build, deploy and job_command run job commands).
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"HookError": "commands", "jobs_with": "commands", "targets": "commands", "HookFailed": "points",
         "batch_env": "commands", "stop_env": "commands",
         "built_session": "points", "cli": "points", "job_control_target": "points", "post_build": "points",
         "session": "points", "DEFAULT_TAIL": "run", "DEFAULT_TIMEOUT": "run", "run_event": "run"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

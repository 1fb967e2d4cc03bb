# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adapter: the Ansible side of the core (only plugins/ import it).

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

action_base.py is the action plugins' base class (argument spec, bucket path, controller-only
settings, the agent round trip); controller.py builds what the deploy's door (deploy/service.py) needs
of Ansible (hostvars -> the workers' connection settings and addresses, Display -> the screen, the
registered deploy_state results -> worker states); extra_vars.py checks the run's maand_* extra vars;
support.py holds the small helpers actions share (integer extra vars, ssh args, hosts_from_hostvars).
fork_memory.py keeps the controller's full collections from copying its heap into every fork (the inventory
installs it).
report.py puts a verb's report (ops/report.py) into its task result and its custom stats; verb_view.py
and deploy_watch.py are the stdout callback maand.core.deploy's parts for every verb and for a deploy's
steps (the make line, Ctrl-C).

The door for plugins: action_base.py (MaandAction, ControllerAction) and controller.py.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"ControllerAction": "action_base", "MaandAction": "action_base", "connections": "controller", "deploy_controller": "controller",
         "python_of": "controller", "run_pid": "controller", "show": "controller",
         "worker_state": "controller", "deploy_extra_vars": "extra_vars", "role_option_errors": "extra_vars",
         "warn_unknown_extra_vars": "extra_vars",
         "spec_for": "specs", "int_var": "support", "warn_stale": "support", "publish": "report", "say": "report", "output_format": "report",
         "say_lines": "report", "VerbView": "verb_view", "DeployWatch": "deploy_watch",
         "fork_memory": None}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

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

The door for plugins: action_base.py (MaandAction, ControllerAction) and controller.py.
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: "A playbook's checks before it touches a worker: extra vars, inventory, workers"
version_added: 1.0.0
description:
  - "The first task of every maand.core playbook; runs on the controller (no connection). One task for every
    check (each task of a play costs a round of Ansible's strategy and a fork). It was C(maand.core.extra_vars)."
  - "Compares the extra vars of the run (C(-e)) whose names start with C(maand_) with the names the playbook
    reads, and names every other one with a \"did you mean\" from the known names: Ansible ignores an extra var
    nobody reads, so a typo (C(-e maand_job_worker=10.0.0.1) for C(maand_job_workers)) would change what a run
    does without a word."
  - "The run is refused (the task fails, before any worker is touched) on any such var, also one that another
    maand.core playbook reads. C(-e maand_allow_unknown_vars=true) makes them warnings instead: for an AWX workflow
    that passes one set of extra vars to every node."
author:
  - maand.core developers (@maand-sh)
options:
  known:
    description:
      - The C(maand_) extra vars the playbook reads.
      - Default, the list kept for O(playbook) in C(plugins/plugin_utils/ops/extra_vars.py) (for C(maand.core.deploy),
        the options of the deploy role).
      - C(maand_allow_unknown_vars) is always known.
    type: list
    elements: str
  inventory:
    description:
      - "Also check that the C(maand.core.workspace) inventory loaded (it sets C(maand_workspace_ok) and
        C(maand_inventory_errors) on C(all)): Ansible only warns when an inventory source fails, then skips a play
        with no hosts and exits 0. The error lists the workspace's errors, or says that no inventory was given, or
        how to see why it did not load."
    type: bool
    default: false
  workers:
    description:
      - "Also (and implies O(inventory)) check that the bucket has workers (C(maand_workers) or
        C(maand_removed_workers)), and that the SSH key maand.conf names exists: without it every worker answers
        C(Permission denied (publickey)) and the run reads as a fleet that is down."
    type: bool
    default: false
  playbook:
    description: The playbook's name, for the messages.
    type: str
    required: true
  refuse:
    description:
      - Fail the task (the run) on an unknown name instead of warning.
      - C(-e maand_allow_unknown_vars=true) makes it a warning whatever this says.
    type: bool
    default: true
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.controller,
                                 maand.core.private]
"""

EXAMPLES = r"""
- name: Check the extra vars
  maand.core.preflight:
    playbook: maand.core.info

- name: Check the extra vars, the workspace inventory, the workers and the SSH key
  maand.core.preflight:
    playbook: maand.core.deploy
    workers: true
"""

RETURN = r"""
unknown:
  description: One message per unknown C(maand_) extra var.
  returned: always
  type: list
  elements: str
"""

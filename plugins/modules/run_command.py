# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_command
short_description: Choose the workers of maand's run_command and report each worker's output
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened) for the C(maand.core.run_command) playbook.
  - With O(step=select) it checks the command and returns the chosen workers, the play's hosts narrowed to
    O(workers) and to the workers holding any of O(labels). An unknown worker or label is refused with the
    known names and a "did you mean".
  - With O(step=report) it prints, for every chosen worker, a header with its exit status, then its stdout
    and stderr, and fails naming each worker where the command failed or could not run (an unreachable
    worker comes with the fix).
author:
  - maand.core developers (@maand-sh)
options:
  step:
    description: V(select) or V(report).
    type: str
    required: true
    choices: [select, report]
  cmd:
    description: The shell command (C(maand_cmd)).
    type: raw
  workers:
    description: Only these workers (their workers.json C(host)), a list or a comma-separated string.
    type: raw
  labels:
    description: Only the workers holding any of these labels, a list or a comma-separated string.
    type: raw
  catalog_workers:
    description: Every worker of the bucket (the C(maand_workers) group); names are checked against them.
    type: list
    elements: str
    default: []
  hosts:
    description: The play's hosts (select step) or the chosen workers (report step).
    type: list
    elements: str
    default: []
  answers:
    description:
      - Report step. The registered result of the command on each chosen worker, by inventory host name.
      - A chosen host missing here did not run the command.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: Nothing runs in check mode; the select step still checks the names.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.controller,
                                 maand.core.private]
"""

EXAMPLES = r"""
- name: Choose the workers
  maand.core.run_command:
    step: select
    cmd: uptime
    labels: web
    catalog_workers: "{{ groups['maand_workers'] }}"
    hosts: "{{ ansible_play_hosts_all }}"
  register: chosen
"""

RETURN = r"""
hosts:
  description: The chosen workers (select step).
  returned: success
  type: list
  elements: str
lines:
  description: The printed report (report step).
  returned: success
  type: list
  elements: str
problems:
  description: One line per worker where the command failed or could not run (report step).
  returned: success
  type: list
  elements: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_command
short_description: Choose the workers, command and batches of maand's run_command; report each batch
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened) for the C(maand.core.run_command) playbook.
  - With O(step=select) it checks the extra vars and returns the command (O(cmd), else the bucket's
    C(workspace/command.sh), maand's default; refused when there is neither), the chosen workers (the play's
    hosts narrowed to O(workers) and to the workers holding any of O(labels); an unknown worker or label is
    refused with the known names and a "did you mean") and their batches of O(batch) workers.
  - With O(step=report) it prints, for every worker of the batch O(hosts), a header with its exit status, then
    its stdout and stderr, and fails naming each worker where the command failed or could not run (an
    unreachable worker comes with the fix) and the workers of the later batches, which are not run.
  - With O(step=health) it judges the C(maand.core.health_check) result O(health) of the check that ran after
    the batch O(hosts), and fails naming what was unhealthy and the workers of the later batches.
author:
  - maand.core developers (@maand-sh)
options:
  step:
    description: V(select), V(report) or V(health).
    type: str
    required: true
    choices: [select, report, health]
  cmd:
    description: The shell command (C(maand_cmd)); empty runs the bucket's C(workspace/command.sh) (select step).
    type: raw
  label:
    description: How the report names the command (the select step's RV(label)).
    type: str
    default: ""
  bucket:
    description: "The bucket folder, where C(workspace/command.sh) is read (select step) and where the report step
      appends each worker's run to the bucket logs (C(logs/<worker>.log), C(logs/runs/<run_id>/), as maand does,
      with C(maand=run_command), C(phase=run_command), C(action=ssh), in maand.conf's C(log_format))."
    type: path
  run_id:
    description: The run's id in the bucket logs (report step; the select step's RV(run_id)).
    type: str
    default: ""
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
    description: The play's hosts (select step) or the workers of the current batch (report and health steps).
    type: list
    elements: str
    default: []
  chosen:
    description: Every chosen worker, in order (report and health steps; the select step's RV(hosts)).
    type: list
    elements: str
    default: []
  batch:
    description:
      - How many workers run the command at a time (C(maand_batch), maand's C(-c)), a whole number, at least 1.
      - Not given, every chosen worker is in one batch.
    type: raw
  health_check_delay:
    description: Whole seconds between a batch and its health check (C(maand_health_check_delay); maand waits 10).
    type: raw
    default: 10
  answers:
    description:
      - Report step. The registered result of the command on each worker of the batch, by inventory host name.
      - A host of the batch missing here did not run the command.
    type: dict
    default: {}
  health:
    description: Health step. The registered result of C(maand.core.health_check) after the batch.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: Nothing runs in check mode; the select step still checks the names, the batch size and the command.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.controller,
                                 maand.core.private]
"""

EXAMPLES = r"""
- name: Choose the workers
  maand.core.run_command:
    step: select
    bucket: "{{ maand_bucket_dir }}"
    cmd: uptime
    labels: web
    batch: 1
    catalog_workers: "{{ groups['maand_workers'] }}"
    hosts: "{{ ansible_play_hosts_all }}"
  register: chosen
"""

RETURN = r"""
run_id:
  description: The select step's run id for the bucket logs (a UUID, as maand's), which every batch's report uses.
  returned: select step
  type: str
hosts:
  description: The chosen workers, in order (select step).
  returned: success
  type: list
  elements: str
script:
  description: The script each worker runs (select step).
  returned: success
  type: str
label:
  description: How the report names the command, C(`uptime`) or C(workspace/command.sh) (select step).
  returned: success
  type: str
batches:
  description: The chosen workers cut into batches (select step).
  returned: success
  type: list
  elements: list
lines:
  description: The printed report (report step).
  returned: success
  type: list
  elements: str
problems:
  description: One line per worker where the command failed or could not run, and one naming the workers of the
    later batches when there are any (report step).
  returned: success
  type: list
  elements: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: status
short_description: "Print the fleet's status table: job x worker x state x deployed version x running"
version_added: 1.0.0
description:
  - "The last task of the C(maand.core.status) playbook. Joins the catalog's allocations (C(data/catalog.json))
    with the answers of C(maand.core.status_worker) (one per worker) and prints one table - job, worker,
    catalog state (active, disabled, removed), catalog version, deployed version, running (from C(make status),
    C(n/a) for a job_control job, C(unreachable) when the worker did not answer), last deploy (UTC) - and a summary
    line; or the same as JSON."
  - "Fails (after printing) when a worker was unreachable or did not answer."
author:
  - maand.core developers (@maand-sh)
options:
  answers:
    description: "Inventory host name -> the registered result of C(maand.core.status_worker) on it (an unreachable
      host's result has C(unreachable: true))."
    type: dict
    required: true
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket,
                                 maand.core.controller, maand.core.output, maand.core.scope.jobs]
"""

EXAMPLES = r"""
- name: Print the status table
  maand.core.status:
    bucket: "{{ maand_bucket_dir }}"
    answers: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '_maand_status'))) }}"
    format: table
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
status:
  description: "The table as data: rows (job, worker, state, version, deployed_version, running, unreachable, status,
    last_deploy, note), unreachable and failed workers, summary."
  returned: always
  type: dict
"""

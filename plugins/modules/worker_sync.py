# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: worker_sync
short_description: Refuse a job verb on workers whose worker.json is out of sync with the catalog
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened) for the C(maand.core.job) playbook, before
    any target runs (maand's C(ValidateBucketUpdateSeq) before C(maand job)).
  - "From the deploy state every worker of the play reported (C(maand.core.deploy_state)), it judges the workers
    the verb would run on: the active allocations of O(job) on O(hosts), narrowed to O(workers). One is stale
    when its C(/opt/worker/<bucket_id>/worker.json) is missing, names another bucket id or worker id, or has an
    older C(update_seq) than the bucket's last deploy (the highest the workers report), or when its C(jobs.json)
    does not list O(job) as enabled."
  - Fails naming each stale worker, what is stale (maand's C(bucket id mismatch), C(worker id mismatch),
    C(update_seq mismatch)) and the fix (deploy first).
author:
  - maand.core developers (@maand-sh)
options:
  job:
    description: The job the verb runs.
    type: str
    required: true
  workers:
    description: Only these workers (C(maand_job_workers)); by default all the job's active allocations.
    type: list
    elements: str
    default: []
  answers:
    description: The registered C(maand.core.deploy_state) result of each worker of the play, by inventory host name.
    type: dict
    required: true
  verb:
    description: How the error names the refused command.
    type: str
    default: maand.core.job
extends_documentation_fragment: [maand.core.bucket, maand.core.scope, maand.core.attributes,
                                 maand.core.attributes.read_only, maand.core.controller, maand.core.private]
"""

EXAMPLES = r"""
- name: Refuse workers out of sync with the catalog
  maand.core.worker_sync:
    bucket: "{{ maand_bucket_dir }}"
    hosts: "{{ ansible_play_hosts_all }}"
    job: api
    answers: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '_state'))) }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
hosts:
  description: The workers the verb runs on (the job's active allocations among the chosen workers).
  returned: success
  type: list
  elements: str
stale:
  description: Each stale worker and why.
  returned: success
  type: list
  elements: dict
  sample: [{"worker": "10.0.0.2", "reason": "update_seq mismatch (its worker.json has update_seq 3, the bucket's last deploy wrote 4)"}]
"""

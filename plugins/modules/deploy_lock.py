# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_lock
short_description: "Take or release a bucket's deploy lock"
version_added: 1.0.0
description:
  - "Runs on the controller (no connection). Used by the C(maand.core.deploy) role; run it once, delegated to localhost."
  - "C(state=present) writes C(<bucket>/data/deploy.lock) naming the ansible-playbook process (pid, start time, host).
    A lock whose owner is alive makes the task fail (the deploy refuses to start); a lock whose owner is gone is stale
    and is taken over."
  - "The lock lives as long as the playbook run: it is released by C(state=absent) (the role's finish step) or becomes stale when the process exits."
  - "With a PostgreSQL state store (C(state_url) in C(maand.conf) or C(MAAND_STATE_URL)) the lock is a session advisory
    lock in the store, shared by every controller of the bucket: a holder process keeps the session for the whole
    playbook run and ends with it, so a controller that dies frees the lock."
  - "In check mode it only verifies that the lock is free."
author:
  - maand.core developers (@maand-sh)
options:
  state:
    description: C(present) takes the lock, C(absent) releases it if this run holds it.
    type: str
    choices: [present, absent]
    default: present
  adopt_bucket_id:
    description:
      - With O(state=present), after taking the lock, set the catalog's C(bucket_id) to this id (a bucket tree
        the workers already hold under C(/opt/worker/), after C(data/catalog.json) was lost or rebuilt). Returned as
        RV(bucket_id). In check mode the catalog is not written.
    type: str
    default: ""
  wait:
    description:
      - With O(state=present), seconds to wait while another deploy holds the lock before refusing (C(maand_lock_wait)).
    type: float
    default: 0
  run_key:
    description:
      - "A sliced run's key (C(maand_run_key)): the slices of one run share it. The slice that takes the lock plans
        the whole fleet, the others join it as hands and work their own hosts (docs/awx.md, section 6). Empty, and
        no O(workflow_id), the run is not sliced."
    type: str
    default: ""
  workflow_id:
    description:
      - "AWX's C(awx_workflow_job_id): the run key of a sliced AWX job (C(awx-workflow-<id>)) when O(run_key) is empty."
    type: str
    default: ""
  job_id:
    description:
      - "AWX's C(awx_job_id): this slice's member name on the board (C(awx-job-<id>)); empty, the controller's host
        and pid."
    type: str
    default: ""
  inventory_hosts:
    description:
      - "Every host of this job's inventory (C(groups['all'])). A run keyed by O(workflow_id) alone is a slice only
        when its inventory lacks some worker of the catalog (AWX hands a slice only its hosts): a job of an AWX
        workflow whose inventory holds the whole fleet (a C(--limit) included) deploys as an unsliced run.
        Not given: the run is a slice whenever it has a key."
    type: list
    elements: str
  slice_wait:
    description:
      - Seconds the planning slice waits for the other slices to claim the catalog's workers (C(maand_slice_wait));
        the workers still unclaimed are not deployed, and a dead slice's workers are given up after as long.
    type: float
    default: 120
attributes:
  check_mode:
    support: full
    details: Checks whether the lock could be taken and leaves it untouched.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.controller, maand.core.deploy_role, maand.core.private]
"""

EXAMPLES = r"""
- name: Take the deploy lock
  maand.core.deploy_lock:
    bucket: "{{ maand_bucket_dir }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
slice:
  description: A sliced run, this slice's part (run_key, member, wait, and its role, planner or hand).
  returned: with O(run_key) or O(workflow_id), not in check mode
  type: dict
taken:
  description: Whether this call created the lock file.
  returned: state=present
  type: bool
pid:
  description: The pid recorded as the owner (the ansible-playbook process).
  returned: always
  type: int
bucket_id:
  description: The adopted bucket id (only with O(adopt_bucket_id)).
  returned: when adopt_bucket_id is set
  type: str
"""

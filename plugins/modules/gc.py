# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gc
short_description: Plan and commit maand's gc of a bucket (the controller side)
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened) for the C(maand.core.gc) playbook.
  - With O(step=plan) it reads C(data/catalog.json), C(data/kv.json) and each worker's listing of
    C(/opt/worker/<bucket_id>/jobs/) (registered by C(maand.core.deploy_state)) and prints what gc deletes,
    namely the job folders that removed allocations left on workers (with their C(data/) and C(logs/)), the
    catalog rows of removed allocations, jobs and workers that a deploy cleaned, the KV namespaces of
    jobs, allocations and workers that are gone, and, as maand's gc, KV keys deleted more than O(retain_days) days ago
    (history within 7 versions of a key is kept).
  - It also plans, for each departed worker of the play (the catalog's C(departed) list, namely workers that left
    C(workers.json), kept by the build until gc has cleaned them, and the hosts of O(departed)), the deletion
    of its whole C(/opt/worker/<bucket_id>) folder, C(data/) and C(logs/) included, and the drop of its
    C(departed) row. A departed worker that still holds allocation rows waits for a deploy; one that cannot
    be read, or that holds deploy records of jobs no deploy stopped, is a problem (the run fails).
  - Nothing that belongs to an active or disabled allocation, or to a worker of C(workers.json), is ever planned.
  - With O(step=targets) it only checks O(departed) and O(forget) against the catalog and returns them.
  - With O(step=commit) it re-reads the catalog and the KV under the bucket lock and deletes only what
    the shown plan listed and still holds; a removed allocation whose folder could not be deleted keeps
    its row. It fails, listing them, when a worker could not be read or a deletion failed.
author:
  - maand.core developers (@maand-sh)
options:
  step:
    description: V(targets), V(plan) or V(commit).
    type: str
    required: true
    choices: [targets, plan, commit]
  departed:
    description:
      - More departed workers to clean (C(-e maand_departed=h1,h2)), beside the catalog's C(departed) list, as
        a comma-separated string or a list of host addresses. A worker of C(workers.json) is refused.
      - Each must be a host of the play (the playbook adds them to C(maand_departed_workers)).
    type: raw
  forget:
    description:
      - Departed workers whose C(departed) row is dropped without contacting them and without deleting anything
        on them (C(-e maand_departed_forget=h1)), for machines gone for good. Each must be in the catalog's
        C(departed) list and hold no allocation row.
    type: raw
  hosts:
    description: The workers of the play (their listings and deletion results are read from hostvars).
    type: list
    elements: str
    default: []
  retain_days:
    description:
      - Keep deleted KV keys (and history beyond 7 versions) whose latest version is younger than N days
        (default 0, as maand's C(--retain-days)).
    type: raw
  plan:
    description: The plan the plan step returned (commit step).
    type: dict
  states:
    description:
      - The C(maand.core.deploy_state) result of each worker, by inventory host name (plan and commit steps).
      - A host missing here, or whose result failed or was unreachable, is listed as not reachable.
    type: dict
    default: {}
  deleted:
    description:
      - The C(maand.core.gc_worker) result of each worker, by inventory host name (commit step).
      - A planned host missing here, skipped or unreachable deleted nothing.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: The plan step prints the plan; the commit step deletes nothing.
  diff_mode:
    support: none
    details: The plan step always prints the plan, with or without C(--diff).
extends_documentation_fragment: [maand.core.attributes, maand.core.bucket, maand.core.controller, maand.core.private]
notes:
  - The playbook C(maand.core.gc) takes the bucket's deploy lock first, so gc never runs beside a deploy.
"""

EXAMPLES = r"""
- name: Plan the gc of a bucket
  maand.core.gc:
    bucket: /srv/bucket
    step: plan
    hosts: "{{ ansible_play_hosts_all }}"
    states: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'listing'))) }}"
    retain_days: 7
  register: gc_plan
"""

RETURN = r"""
plan:
  description: The plan (plan step) or what was deleted (commit step).
  returned: success
  type: dict
delete:
  description: The plan step's job folders to delete, per worker.
  returned: success
  type: dict
  sample: {"10.0.0.1": ["old_api"]}
trees:
  description: The plan step's departed workers whose whole C(/opt/worker/<bucket_id>) goes.
  returned: success
  type: list
  elements: str
  sample: ["10.0.0.9"]
departed:
  description: The targets step's checked O(departed) hosts.
  returned: success
  type: list
  elements: str
forget:
  description: The targets step's checked O(forget) hosts.
  returned: success
  type: list
  elements: str
lines:
  description: The printed lines.
  returned: success
  type: list
  elements: str
problems:
  description: Unreadable workers and failed deletions (commit step).
  returned: success
  type: list
  elements: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: build
short_description: Validate a maand bucket and write its catalog
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened).
  - Reads the bucket's workspace, places every job on the workers whose labels hold all its selectors
    (narrowed by the job's RFC 31 C(constraints), C(hardware) minimums and C(placement) block, see docs/placement.md),
    validates reservations against manifest bounds and worker capacity, ports, allocation counts and
    command demands, and reports B(every) problem at once, each naming maand's error kind, the file,
    the field and a fix.
  - On success writes C(<bucket>/data/catalog.json) atomically under the bucket lock and prints the
    allocation table. Nothing is written when there is any error.
  - The catalog records a fingerprint of every input (C(inputs)), so the C(maand.core.workspace) inventory
    and deploy refuse a catalog whose workspace changed since it was built.
  - The catalog's C(bucket_id) is never replaced silently; a copy is kept in C(data/bucket_id). See the
    O(new_bucket_id) option.
  - In check mode it validates and reports what would change in the catalog, writing nothing.
  - After a successful build (not in check mode) it runs the C(post_build) job commands of every job
    registering one, in deployment_seq order, on the controller (see docs/hooks.md); a failing command
    fails the build (the catalog stays written, as in maand). C(maand_hook_timeout) (default 600 s)
    bounds each command.
author:
  - maand.core developers (@maand-sh)
options:
  table_limit:
    description: Print at most this many allocation rows (0 prints all).
    type: int
    default: 200
  new_bucket_id:
    description:
      - Mint a new C(bucket_id) when C(data/catalog.json) is unreadable, not valid JSON or not a valid
        catalog (without it, that is an error naming the file and the fix), or when the catalog is
        missing and C(data/bucket_id) records the id of an earlier build (without it, that id is kept,
        with a warning).
      - Workers that hold the old id's tree are refused by deploy until they are cleaned.
      - When not set, the extra variable C(maand_new_bucket_id) is used (default false).
    type: bool
  strict:
    description:
      - Make every build warning about something maand.core does not honour yet (C(_prometheus/) assembly,
        unknown keys, ...) an error.
      - When not set, the extra variable C(maand_strict) is used (default false).
    type: bool
  purge_job_kv:
    description:
      - Also mark deleted the keys job commands wrote (C(vars/job/<job>), C(secrets/job/<job>)) of every job
        whose allocations are all removed or that left the workspace, as C(maand build --purge-job-kv).
      - A job with no allocation at all, or only disabled ones, keeps them; without this option they stay.
      - When not set, the extra variable C(maand_purge_job_kv) is used (default false).
    type: bool
  allow_remove_all:
    description:
      - A job still in the workspace that had allocations and that this build places on no worker (every one of
        its allocations would be removed, after a selector typo, a label dropped or its workers gone) is an error
        (C(ErrRemoveAll)) unless this is true; then it is a warning and the next deploy removes them.
      - To retire a job, delete its folder instead; that needs no option.
      - When not set, the extra variable C(maand_allow_remove_all) is used (default false).
    type: bool
attributes:
  check_mode:
    support: full
    details: Validates and shows the catalog changes without writing.
  diff_mode:
    support: full
    details: Shows the catalog before and after.
extends_documentation_fragment: [maand.core.attributes, maand.core.bucket.cwd, maand.core.controller]
requirements:
  - jsonschema (controller)
notes:
  - The catalog format is documented in docs/contract.md; its JSON Schema is in
    plugins/plugin_utils/catalog/catalog_schema.py and every reader checks it.
"""

EXAMPLES = r"""
- name: Build the catalog of the bucket in /srv/bucket
  maand.core.build:
    bucket: /srv/bucket
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
bucket_id:
  description: The bucket's stable UUID.
  returned: success
  type: str
catalog_path:
  description: Absolute path of the catalog file.
  returned: success
  type: str
allocations:
  description: Number of allocations in the catalog (active, disabled and removed).
  returned: success
  type: int
table:
  description: The allocation table, one line per allocation (job, worker, state, zone, memory, cpu, seq).
  returned: success
  type: list
  elements: str
changes:
  description: What this build changes in the catalog, one line per change.
  returned: success
  type: list
  elements: str
written:
  description: Whether the catalog file was written (false in check mode and when nothing changed).
  returned: success
  type: bool
explanations:
  description: >-
    For every job that got fewer active allocations than it asked for (placement.count or min_allocations_count):
    its summary line and the rejected workers with every rule that rejects them (at most 20; the
    maand.core.explain playbook shows all).
  returned: when the bucket was read (not when the lock is busy)
  type: dict
errors:
  description: Every problem found, with kind, file, field, message and fix.
  returned: failure
  type: list
  elements: dict
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_apply
short_description: "Apply one planned deploy operation on a worker"
version_added: 1.0.0
description:
  - "Internal step of the C(maand.core.deploy) role. Runs one operation from the plan on the worker over the existing
    SSH connection: write worker.json/jobs.json (C(meta)), run a Makefile target and promote (C(run), C(stop)), write
    the promoted state (C(promote)), stop and delete a removed job's files except C(data/) and C(logs/) (C(remove)),
    or clean a worker that left workers.json (C(purge))."
  - "Make targets run in C(/opt/worker/<bucket_id>/jobs/<job>) with C(CURRENT_VERSION) and C(NEW_VERSION) in the
    environment. A failing target reports its output tail; a missing target or Makefile is reported as such."
  - "An operation whose rsync failed in the same step is skipped."
author:
  - maand.core developers (@maand-sh)
options:
  bucket_id:
    description: The bucket id.
    type: str
    required: true
  op:
    description: One operation of a plan step (from M(maand.core.deploy_plan)).
    type: dict
    required: true
  kind:
    description: Override the operation kind (the role uses C(promote)).
    type: str
    choices: [meta, run, stop, remove, purge, promote]
  timeout:
    description: Seconds a Makefile target may run.
    type: int
    default: 600
  tail:
    description: Lines of output reported when a target fails.
    type: int
    default: 20
attributes:
  check_mode:
    support: none
    description: Not supported; in check mode the task is skipped (the role plans in check mode instead).
  diff_mode:
    support: none
    description: Reports the steps run, not a diff.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller; the work is done on the worker over its SSH connection.
notes:
  - An action plugin; see docs/deploy.md for the deploy design.
"""

EXAMPLES = r"""
- name: Apply
  maand.core.deploy_apply:
    bucket_id: "{{ deploy_plan_result.plan.bucket_id }}"
    op: "{{ item }}"
  loop: "{{ deploy_step.ops[inventory_hostname] | default([]) }}"
"""

RETURN = r"""
output_tail:
  description: Last lines of the Makefile target's output.
  returned: when a target ran
  type: list
  elements: str
"""

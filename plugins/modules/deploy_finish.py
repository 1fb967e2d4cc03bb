# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_finish
short_description: "Finish a deploy: catalog cleanup, unlock, report"
version_added: 1.0.0
description:
  - "Internal last step of the C(maand.core.deploy) role, run once on the controller."
  - "Drops from C(data/catalog.json) the removed allocations whose cleanup succeeded (and removed workers assumed
    dead), then removed workers and jobs that hold no rows any more; releases the deploy lock; fails listing every
    problem of the run (unreachable workers, failed targets, failed health gates, jobs not deployed because an earlier
    wave failed)."
  - "Reads the run state from the run folder; fails when any step of the plan did not complete (a crashed or
    interrupted controller step), so a run can never end green after a failure. A clean run's folder is removed."
author:
  - maand.core developers (@maand-sh)
options:
  plan:
    description: The plan.
    type: dict
    required: true
  run_dir:
    description: The run folder (C(data/.deploy-run/<run_id>)); empty in check mode. Its state decides the outcome.
    type: str
    default: ""
  release:
    description: Release the deploy lock.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Reports the outcome without cleaning state or releasing the lock.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.controller, maand.core.deploy_role, maand.core.private]
"""

EXAMPLES = r"""
- name: Finish
  maand.core.deploy_finish:
    bucket: "{{ maand_bucket_dir }}"
    plan: "{{ deploy_plan_result.plan }}"
    run_dir: "{{ deploy_plan_result.run_dir }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
pruned:
  description: Allocations (job@worker) dropped from the catalog.
  returned: always
  type: list
  elements: str
summary:
  description: Count of allocations per action.
  returned: always
  type: str
"""

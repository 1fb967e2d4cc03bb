# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_job
short_description: "Run a Makefile target of a deployed job on a worker"
version_added: 1.0.0
description:
  - "Used by the C(maand.core.deploy) role and the C(maand.core.job) playbook."
  - "Runs C(make <target>) in C(/opt/worker/<bucket_id>/jobs/<job>) with C(CURRENT_VERSION)=C(NEW_VERSION)=the job's
    version, and, when the host has C(maand_bucket_dir), the allocation environment the deploy gives make targets
    (C(ALLOCATION_ID), C(ALLOCATION_IP), C(ALLOCATION_INDEX), C(JOB), the job's ports as C(API_HTTP_PORT)...)."
  - "Does not change the deploy state. C(status) never reports a change."
author:
  - maand.core developers (@maand-sh)
options:
  job:
    description: The job.
    type: str
    required: true
  target:
    description:
      - The Makefile target, C(start), C(stop), C(restart), C(reload), C(status) or any other target the job's
        Makefile defines, such as C(migrate). A name that is not safe (letters, digits, C(_), C(.), C(-), not
        starting with C(-) or C(.)) is refused, so it can never be a make option.
    type: str
    required: true
  version:
    description: The job version passed as CURRENT_VERSION and NEW_VERSION.
    type: str
    default: 0.0.0
  run_id:
    description:
      - "The run the target belongs to in the bucket logs (C(logs/<worker>.log), C(logs/runs/<run_id>/), as maand
        writes them with C(maand=job), C(phase=job_control)); the playbook passes the one its job_control task chose,
        so every worker's lines share it. Empty, a run of its own."
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Reports the C(make) target it would run without running it (C(status) still runs).
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket.id,
                                 maand.core.command_limits, maand.core.controller.remote, maand.core.private]
notes:
  - An action plugin; see docs/deploy.md for the deploy design.
"""

EXAMPLES = r"""
- name: Restart api
  maand.core.deploy_job:
    bucket_id: "{{ maand_bucket_id }}"
    job: api
    target: restart
"""

RETURN = r"""
output:
  description: Last lines of the target's output.
  returned: success
  type: list
  elements: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: status_worker
short_description: "What one worker holds of its maand jobs (read-only)"
version_added: 1.0.0
description:
  - "Internal task of the C(maand.core.status) playbook."
  - "One round trip to the worker agent (C(/opt/worker/.maand/agent-<sha12>.py), installed on first contact):
    for every allocation of the worker in the catalog, the version and time of its promoted deploy record
    (C(/opt/worker/<bucket_id>/deploy/<job>.json)) and the exit code of C(make status) in its job folder
    (0 means running), with the allocation's environment as the deploy gives it."
  - "A job with C(job_control) commands is not asked (its status is not its Makefile's)."
  - "Changes nothing on the worker."
author:
  - maand.core developers (@maand-sh)
options:
  jobs:
    description: Only these jobs (default all of the worker's allocations).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds C(make status) may run.
    type: int
    default: 60
  slots:
    description: How many C(make status) run side by side on the worker.
    type: int
    default: 4
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.controller.remote,
                                 maand.core.private]
notes:
  - Needs the host variables of the C(maand.core.workspace) inventory (C(maand_bucket_dir), C(maand_bucket_id),
    C(maand_allocations)).
"""

EXAMPLES = r"""
- name: Ask every worker once
  maand.core.status_worker:
    jobs: [api]
  register: _maand_status
  ignore_unreachable: true
"""

RETURN = r"""
jobs:
  description: "Per job of the worker: version and deployed_at (epoch seconds) of the promoted record, pending,
    running (true, false, or null when unknown), note, output_tail (last lines of make status)."
  returned: success
  type: dict
  sample: {"api": {"version": "1.0.0", "deployed_at": 1795000000, "pending": false, "running": true, "note": null}}
host:
  description: The worker.
  returned: success
  type: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: explain
short_description: Explain why maand jobs are or are not placed on each worker
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only; never writes the catalog.
  - Computes the placement exactly as C(maand.core.build) would (selectors, RFC 31 constraints, hardware,
    the placement block, disabled.json, the previous catalog for sticky choices) and, for one job, lists every
    worker with placed or not and B(every) rule that rejects it, not only the first, with numbers.
  - "Without O(job), prints one summary line per job, such as C(api: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled)."
  - Works on a bucket whose validation fails (for example a worker over capacity), as long as workers.json loads;
    the build errors are shown first.
  - See C(docs/placement.md) in the collection.
author:
  - maand.core developers (@maand-sh)
options:
  job:
    description: The job to explain. Omit it for a summary line per job.
    type: str
  workers:
    description: Only explain these workers (their workers.json C(host)).
    type: list
    elements: str
  show:
    description: Which workers to list for O(job).
    type: str
    default: all
    choices: [all, placed, rejected]
  limit:
    description: List at most this many workers (0 lists all).
    type: int
    default: 0
  deprecated_vars:
    description:
      - Names of old extra vars of the C(maand.core.explain) playbook that the user passed (C(job), C(worker),
        C(show), C(limit)); each gets a deprecation warning naming its C(maand_) replacement
        (C(maand_job), C(maand_job_workers), C(maand_show), C(maand_limit)). Other names are ignored.
      - The playbook fills it in; there is no reason to set it in a task of your own.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller]
notes:
  - "Rules reported for a worker: missing selector labels, each failing RFC 31 sub-expression with its JSON path,
    hardware shortfalls (C(mem 2048 MB < 3072 MB)), the with / scale_with / avoid jobs, capacity exhausted
    (count jobs, with numbers), disabled in disabled.json, and not chosen by count (with the winners)."
  - In the summary a worker rejected by two rules counts under both; C(N/M) is active allocations / workers.
"""

EXAMPLES = r"""
- name: Why is api placed where it is
  maand.core.explain:
    bucket: /srv/bucket
    job: api

- name: Only the rejected workers, at most 50
  maand.core.explain:
    bucket: /srv/bucket
    job: api
    show: rejected
    limit: 50

- name: One worker
  maand.core.explain:
    bucket: /srv/bucket
    job: api
    workers: [10.0.0.7]

- name: A summary line per job
  maand.core.explain:
    bucket: /srv/bucket
"""

RETURN = r"""
summary:
  description: One line per job (without O(job)), or the job's line.
  returned: success
  type: list
  elements: str
  sample: ["api: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled"]
explanation:
  description: The text printed for O(job) (summary, rules, then every listed worker and its reasons).
  returned: when job is given
  type: list
  elements: str
workers:
  description: Per listed worker, its status and every reason.
  returned: when job is given
  type: list
  elements: dict
  contains:
    worker:
      description: The worker's host.
      type: str
    position:
      description: Its position in workers.json.
      type: int
    status:
      description: C(placed), C(placed, disabled) or C(not placed).
      type: str
    reasons:
      description: Every rule that rejects the worker (or notes on a placed one, such as the strategy's choice).
      type: list
      elements: str
build_ok:
  description: Whether the build would succeed.
  returned: always
  type: bool
build_errors:
  description: The build's errors (kind, file, field, message, fix); placement is explained regardless.
  returned: always
  type: list
  elements: dict
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: schedule_order
short_description: Order jobs as Maelstrom's scheduler starts them (priority, then longest estimate first)
version_added: 1.0.0
author: maand.core developers
description:
  - >-
    Sorts jobs the way Maelstrom's broker pops its queue (seed 004, C(crates/maelstrom-broker/src/scheduler_task/scheduler.rs)
    and C(crates/maelstrom-util/src/duration.rs)) - higher C(priority) first; within one priority, jobs without an
    estimate first of all, then the longest C(estimated_duration) first (longest processing time first).
  - >-
    Jobs that compare equal keep their input order.
  - >-
    C(priority) defaults to 0 and must be an integer from -128 to 127; C(estimated_duration) is seconds (a number >= 0)
    or null/absent for no estimate. Anything else is an error naming the job and the field.
options:
  _input:
    description: The jobs, dicts with optional C(priority) and C(estimated_duration) (other keys are kept).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Start order of one worker's jobs
  ansible.builtin.debug:
    msg: "{{ jobs | maand.core.schedule_order | map(attribute='name') }}"
  vars:
    jobs:
      - {name: web, estimated_duration: 2}
      - {name: db, estimated_duration: 8}
      - {name: cache}
      - {name: api, priority: 1, estimated_duration: 1}
# -> [api, cache, db, web]
"""

RETURN = r"""
_value:
  description: The same job dicts, in start order.
  type: list
  elements: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.plugin_utils import jobspec


def schedule_order(jobs):
    """``jobs`` in Maelstrom's start order (see DOCUMENTATION)."""
    if not isinstance(jobs, list):
        raise AnsibleFilterError(f"maand.core.schedule_order: the input must be a list of jobs, not {type(jobs).__name__}")
    queued = [_queued(i, job) for i, job in enumerate(jobs)]
    return [jobs[int(q.name)] for q in jobspec.schedule_order(queued)]


def _queued(index, job):
    if not isinstance(job, Mapping):
        raise AnsibleFilterError(f"maand.core.schedule_order: job [{index}] must be a dict, not {type(job).__name__}")
    label = f"job [{index}]" + (f" ({job['name']})" if "name" in job else "")
    priority = job.get("priority")
    priority = 0 if priority is None else priority
    if not _is_int(priority) or not jobspec.PRIORITY_MIN <= priority <= jobspec.PRIORITY_MAX:
        raise AnsibleFilterError(f"maand.core.schedule_order: {label}: priority must be an integer from "
                                 f"{jobspec.PRIORITY_MIN} to {jobspec.PRIORITY_MAX}, not {priority!r}")
    estimate = job.get("estimated_duration")
    if estimate is not None and (not (_is_int(estimate) or isinstance(estimate, float)) or estimate < 0):
        raise AnsibleFilterError(f"maand.core.schedule_order: {label}: estimated_duration must be seconds >= 0 "
                                 f"or null, not {estimate!r}")
    return jobspec.QueuedJob(str(index), priority, None if estimate is None else float(estimate))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class FilterModule:
    def filters(self):
        return {"schedule_order": schedule_order}

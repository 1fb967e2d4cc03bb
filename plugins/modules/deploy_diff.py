# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_diff
short_description: "Show the content diff of a deploy's changed files on one worker (--diff)"
version_added: 1.0.0
description:
  - "Reads, in one SSH round trip, the promoted copy (C(/opt/worker/<bucket_id>/history/<job>/current), else the
    job folder) of the files the plan changes on this worker and returns their unified diffs against what the
    deploy ships, as the template and copy modules do with C(--diff)."
  - "Bounded: at most 10 files per job and 120 diff lines per file; binary files and files over 256 KiB are
    named only; secret-bearing template outputs and private keys are never read or shown."
  - "Read-only (the agent runs from stdin; nothing is written on the worker); never fails the play: a worker it
    cannot read gets a warning."
author:
  - maand.core developers (@maand-sh)
options:
  host:
    description: The worker (the task is delegated to it).
    type: str
    required: true
  content_diff:
    description: The C(content_diff) the C(maand.core.deploy_plan) task returned (docs/deploy.md, Pinned plans).
    type: dict
    required: true
attributes:
  check_mode:
    support: full
    details: Read-only, so check mode shows the same diff.
  diff_mode:
    support: full
    details: The diff is the result.
extends_documentation_fragment: [maand.core.attributes, maand.core.bucket.id, maand.core.controller.remote,
                                 maand.core.deploy_role, maand.core.private]
"""

EXAMPLES = r"""
- name: Show the content diff
  maand.core.deploy_diff:
    bucket_id: "{{ deploy_plan_result.plan.bucket_id }}"
    host: "{{ item }}"
    content_diff: "{{ deploy_plan_result.content_diff }}"
  loop: "{{ deploy_plan_result.content_diff.hosts if ansible_diff_mode | bool else [] }}"
  run_once: true
  delegate_to: "{{ item }}"
"""

RETURN = r"""
diff:
  description: One C(prepared) unified diff per changed file, and a note per file not shown.
  returned: when the plan changes files on this worker
  type: list
  elements: dict
files:
  description: The number of files diffed on this worker.
  returned: always
  type: int
"""

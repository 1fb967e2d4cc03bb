# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # What a run covers (specs: PLAY_HOSTS and JOBS_FILTER in plugins/plugin_utils/adapter/specs.py).
    # maand.core.scope: the play's hosts.
    DOCUMENTATION = r"""
options:
  hosts:
    description: The hosts of this run (the play's hosts, after C(--limit)); workers outside them are out of scope.
    type: list
    elements: str
    required: true
"""

    # maand.core.scope.jobs: a job filter.
    JOBS = r"""
options:
  jobs:
    description: Only these jobs (a list or a comma-separated string); by default every job.
    type: raw
    default: []
"""

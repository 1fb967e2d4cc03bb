# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_gate
short_description: "Collect a deploy step's results and run its health gates"
version_added: 1.0.0
description:
  - "Internal step of the C(maand.core.deploy) role, run once per step on the controller."
  - "Reads the registered rsync/apply/promote results of every host, marks jobs whose operations failed, runs the
    tcp/http health probes of the jobs in the step (all checks on all hosts of the batch, retried C(wait.attempts)
    times C(wait.interval_seconds) apart), and returns which allocations to promote and which jobs are blocked (a
    failed job, and every job of a later wave once a wave had a failure)."
  - "Fails (the role ignores it so the run goes on for other jobs) when this step produced a new failure."
author:
  - maand.core developers (@maand-sh)
options:
  step:
    description: The plan step.
    type: dict
    required: true
  job_waves:
    description: Job name -> deployment_seq.
    type: dict
    default: {}
  previous:
    description: The previous step's result (accumulated failures).
    type: raw
  hosts:
    description: Hosts of the play.
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    support: full
    description: It only reads step results and probes health checks, so check mode behaves the same.
  diff_mode:
    support: none
    description: Reports failures, not a diff.
extends_documentation_fragment:
  - maand.core.controller
notes:
  - An action plugin; see docs/deploy.md for the deploy design.
"""

EXAMPLES = r"""
- name: Gate
  maand.core.deploy_gate:
    step: "{{ deploy_step }}"
    previous: "{{ deploy_gate_result | default({}) }}"
    hosts: "{{ ansible_play_hosts_all }}"
  register: deploy_gate_result
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
blocked:
  description: Jobs that must not run further in this deploy.
  returned: always
  type: list
  elements: str
promote:
  description: Host -> promote operations for allocations that passed their gate.
  returned: always
  type: dict
"""

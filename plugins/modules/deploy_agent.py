# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_agent
short_description: "Run one deploy step on one worker"
version_added: 1.0.0
description:
  - "Private: internal to the C(maand.core.deploy) role; its options and results may change in any
    release without notice. Do not call it from your own playbooks or roles."
  - "Internal task of the C(maand.core.deploy) role."
  - "Reads the worker's request for the step from the run folder, runs one C(rsync) for all of the worker's jobs
    that changed (over Ansible's own SSH connection: same ControlPath; C(data/), C(logs/), C(bin/) excluded,
    C(--delete), C(--checksum)), then one round trip to the worker agent (C(/opt/worker/.maand/agent-<sha12>.py)):
    pending promotions, then the operations. Writes the answer to C(<run_dir>/results/<step>/<host>.json)."
  - "Never fails for a job's failure, nor when the worker is unreachable: the host stays in the play and the next
    C(maand.core.deploy_step) counts the failure."
author:
  - maand.core developers (@maand-sh)
options:
  run_dir:
    description: The run folder.
    type: path
    required: true
  bucket:
    description: The bucket directory (job trees are synced from it).
    type: path
    required: true
  step:
    description: The step index, or C(final).
    type: raw
    required: true
  host:
    description: The inventory name of the worker (the delegated host in a looped task).
    type: str
    required: true
  timeout:
    description: Seconds a Makefile target (and an rsync) may run.
    type: int
    default: 600
  tail:
    description: Lines of a failing target's output to report.
    type: int
    default: 20
  verify_host:
    description: Check the worker's SSH host key in rsync.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    description: The role runs no step in check mode.
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller; the work is done on the worker over its SSH connection.
notes:
  - An action plugin; needs the C(ssh) connection plugin and C(rsync) on both sides.
"""

EXAMPLES = r"""
- name: Step 1 - sync and apply
  maand.core.deploy_agent:
    run_dir: "{{ deploy_plan_result.run_dir }}"
    bucket: "{{ maand_bucket_dir }}"
    step: 1
    host: "{{ inventory_hostname }}"
  when: inventory_hostname in deploy_step_result.hosts
"""

RETURN = r"""
ops:
  description: Ids of the operations reported by the agent.
  returned: when the agent answered
  type: list
  elements: str
"""

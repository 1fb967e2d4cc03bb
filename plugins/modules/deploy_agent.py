# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_agent
short_description: "Run one deploy step on one worker"
version_added: 1.0.0
description:
  - "Internal task of the C(maand.core.deploy) role."
  - "Reads the worker's request for the step from the run folder, runs one C(rsync) for all of the worker's jobs
    that changed (over Ansible's own SSH connection: same ControlPath; C(data/), C(logs/), C(bin/) excluded,
    C(--delete), C(--checksum)) and the worker agent (C(/opt/worker/.maand/agent-<sha12>.py)): pending
    promotions, then the operations. The agent is that rsync's remote command (it runs rsync's receiver, then the
    step), so the files and the step cost one SSH session; the step request travels on its stdin before rsync's
    stream. With nothing to sync, or when that rsync fails, the agent is called apart (one more session).
    Writes the answer to C(<run_dir>/results/<step>/<host>.json)."
  - "Never fails for a job's failure, nor when the worker is unreachable: the host stays in the play and the next
    C(maand.core.deploy_step) counts the failure."
author:
  - maand.core developers (@maand-sh)
options:
  host:
    description: The inventory name of the worker (the delegated host in a looped task).
    type: str
    required: true
  verify_host:
    description: Check the worker's SSH host key in rsync.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    details: The role runs no step in check mode.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.command_limits, maand.core.controller.remote, maand.core.deploy_role,
                                 maand.core.deploy_role.step, maand.core.private]
notes:
  - Needs the C(ssh) connection plugin and C(rsync) on both sides.
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

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: job_command
short_description: Run a maand job command (event cli) on the controller
version_added: 1.0.0
description:
  - maand's C(maand job_command) / C(maand jobcommand). Runs on the controller (an action plugin; no
    connection is opened).
  - Runs the job command O(command) of O(job), or of every job that registers it for the C(cli) event
    (in deployment_seq order), once per active allocation, with maand's environment variables and
    runtime API on localhost (see docs/hooks.md). Scripts are C(workspace/jobs/<job>/_modules/<command>.py)
    (C(.ts)/C(.js) need bun on the controller).
  - KV writes of the command are saved to C(data/kv.json) as they happen.
  - Fails when the command is not registered for C(cli) on the job, or when any allocation's run
    fails (its exit status, O(timeout) or refused KV writes, with the last O(tail) lines of its output).
author:
  - maand.core developers (@maand-sh)
options:
  command:
    description: The command name, as in the manifest (C(command_<name>)); the C(command_) prefix may be left out.
    type: str
    required: true
  job:
    description: The job; empty runs the command on every job that registers it for C(cli).
    type: str
    default: ""
  concurrency:
    description: How many allocations of a job run at the same time.
    type: int
    default: 1
  event:
    description:
      - C(cli) (the default) runs O(command). C(job_control) is what C(maand.core.job) uses for maand's
        C(maand job <target>). When O(job) registers C(job_control) commands they run with C(TARGET=<target>)
        on its active allocations (of O(workers), when given) instead of the Makefile, and RV(handled) is true.
    type: str
    default: cli
    choices: [cli, job_control]
  target:
    description: With O(event=job_control), the target (start, stop, restart, reload, status).
    type: str
    default: ""
  workers:
    description: With O(event=job_control), only the allocations on these workers.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: none
    details: Job commands have effects of their own; in check mode nothing runs.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.command_limits, maand.core.controller]
notes:
  - Connection settings for the C(maand) module's C(run_ssh) come from the inventory's hosts
    (C(ansible_host), C(ansible_port), C(ansible_user), C(ansible_ssh_private_key_file), ssh args).
"""

EXAMPLES = r"""
- name: Run command_migrate of job api
  maand.core.job_command:
    bucket: /srv/bucket
    command: command_migrate
    job: api
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
jobs:
  description: The jobs the command ran on.
  returned: always
  type: list
  elements: str
handled:
  description: With O(event=job_control), whether the job has job_control commands (and they ran instead of make).
  returned: always
  type: bool
run_id:
  description: With O(event=job_control), the run id of these lines in the bucket logs (C(logs/runs/<run_id>/)),
    which the make targets of C(maand.core.job) share.
  returned: with O(event=job_control), when not in check mode
  type: str
"""

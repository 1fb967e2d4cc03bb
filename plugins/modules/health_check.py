# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: health_check
short_description: Check that the workers answer on their SSH port and that every job's allocations are healthy
version_added: 1.1.0
description:
  - Runs on the controller (an action plugin). Read-only. maand's C(maand health_check).
  - First a TCP dial to the SSH port of each worker in O(hosts) (C(ansible_port), default 22).
  - Then, for every active allocation of every job (or of O(jobs)) on those workers, the job's manifest
    C(health_check.checks) probes, C(tcp) and C(http) from the controller and C(ssh) (its C(command) run
    on the worker over SSH with the run's connection settings, exit 0 means healthy), then, on the
    allocations whose probes passed, the job's C(health_check) job commands on the controller.
  - An C(https) probe verifies the server's certificate against the bucket CA (C(secrets/ca.crt)) and the
    system CAs, unless the check sets C(insecure) to C(true).
  - A job with neither probes nor commands is skipped, as maand does; that is not a failure.
  - One line per check, for example C(ok api 10.0.0.1 http :30000/health 12 ms) or
    C(FAILED api 10.0.0.1 tcp :30001 connection refused), then a summary. The task fails when any
    check failed.
  - With O(wait), what is not healthy yet is tried again until healthy, each job within its own
    C(wait.attempts) and C(wait.interval_seconds) (default 30 times, 1 second apart), or within
    O(wait_seconds) in all when that is above 0; the same wait loop as the deploy's health gates.
  - With O(wait), it fails fast as the deploy's health gates do; maand waits out its budget. While a job's
    checks fail on a worker, its C(make status) is asked there through the worker agent (as
    C(maand.core.status) asks it, at most once a second); when it says twice in a row that the job is not
    running, that job is no longer waited for on that worker (the other jobs and workers are). The failure
    names the job, the worker and C(make status)'s last line, and shows the tail of C(make status) and of
    the job's newest log. A job_control job, or one without a C(status) target, keeps its whole budget.
  - An unknown job name fails with the bucket's jobs and a "did you mean"; nothing is checked.
  - O(timeout) and O(tail) apply to the C(health_check) job commands.
author:
  - maand.core developers (@maand-sh)
options:
  wait:
    description: Retry what is not healthy until it is, or until the retry budget is spent.
    type: bool
    default: false
  wait_seconds:
    description: With O(wait), the time budget for all retries in seconds; 0 uses each job's own attempts.
    type: float
    default: 0
  workers_check:
    description: Dial each worker's SSH port first.
    type: bool
    default: true
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket,
                                 maand.core.command_limits, maand.core.controller, maand.core.scope,
                                 maand.core.scope.jobs]
notes:
  - The playbook C(maand.core.health_check) runs this module with C(-e maand_jobs=a,b), C(-e maand_wait=true)
    and C(-e maand_wait_seconds=N); the playbook C(maand.core.job) runs it after a target with
    C(-e maand_health_check=true).
"""

EXAMPLES = r"""
- name: Every job on every worker of the play
  maand.core.health_check:
    bucket: "{{ maand_bucket_dir }}"
    hosts: "{{ ansible_play_hosts_all }}"

- name: Wait up to two minutes for api and web
  maand.core.health_check:
    bucket: /srv/bucket
    hosts: [10.0.0.1, 10.0.0.2]
    jobs: api,web
    wait: true
    wait_seconds: 120
"""

RETURN = r"""
lines:
  description: The printed lines, one per check, then the skipped jobs.
  returned: always
  type: list
  elements: str
  sample: ["ok     api              10.0.0.1        http :30000/health             12 ms"]
summary:
  description: The summary line.
  returned: always
  type: str
  sample: "health_check: 4 ok, 1 failed; 2 job(s) checked; unhealthy jobs: api"
checks:
  description: One dict per check (job, worker, check, ok, ms, reason); job is C((worker)) for the SSH port.
  returned: always
  type: list
  elements: dict
skipped_jobs:
  description: Jobs with no probes and no health_check commands.
  returned: always
  type: list
  elements: str
rounds:
  description: How many rounds of checks ran (more than 1 only with O(wait)).
  returned: always
  type: int
not_running:
  description: The allocations O(wait) stopped waiting for because C(make status) said twice in a row that the
    job is not running (fail fast), with why.
  returned: when the checks ran
  type: list
  elements: dict
  sample: [{"job": "api", "worker": "10.0.0.1", "why": "job api is not running: `make status` said so 2 times in a
    row, 1.0 s apart (api not running)"}]
notes:
  description: What the failure says of those jobs, as a failed health gate says it (the workers, the attempts it
    stopped at, the tail of C(make status) and of the job's newest log).
  returned: when the checks ran
  type: list
  elements: str
healthy:
  description: Whether everything checked was healthy (also when a task's C(failed_when) hides the failure;
    C(maand.core.run_command) reads it after each batch).
  returned: when the checks ran
  type: bool
"""

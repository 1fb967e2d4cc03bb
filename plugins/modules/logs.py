# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: logs
short_description: Show a maand bucket's logs with maand's filters, or its past deploy runs (maand logs show)
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only.
  - "Every deploy that reaches its finish (not C(--check), not a deploy refused before its plan) leaves a deploy
    record in the bucket's state store (C(data/deploys/<run>.json), or the PostgreSQL store's
    C(maand_deploy_records)): the run id, who ran it from which controller, start, end and duration, the plan
    hash, update_seq, the options, the outcome and its problems, and per allocation the action, the result, the
    tree hash shipped, the versions and the gate and make-target seconds. The store keeps the newest 50."
  - Without O(run), one line per kept run (newest last); with O(run), that run in full.
  - A job, worker or run no kept record knows fails with the known names and a "did you mean".
  - "The bucket logs, as maand writes them: C(logs/<worker_ip>.log) (every command aimed at a worker),
    C(logs/maand.log) (job-level events, C(worker=-)) and C(logs/runs/<run_id>/) (one run), written by deploy
    (make targets through the agent, rsync, hooks, C(deploy_skip) and C(reconcile_skip_stop)), run_command, job,
    job_command, health_check and build: C(command_begin), one C(stream=stdout|stderr msg=...) line per output line,
    C(command_end) with C(exit) and C(duration_ms), in maand.conf's C(log_format) (C(kv), the default, or C(json))."
  - "They are shown instead of the runs when O(format) is C(raw) (the lines as stored) or C(human) (maand's grouped
    view: one block per command), or when O(phase), O(event) or O(tail) is given (then C(json) gives the parsed
    lines). O(workers), O(jobs) and O(run) filter them as maand's C(--worker), C(--job) and C(--run) (a prefix
    matches; O(run) reads C(logs/runs/<run>/), C(last) the newest). A symlink in C(logs/) is refused, never followed."
author:
  - maand.core developers (@maand-sh)
options:
  run:
    description: The run to show in full; its id, a unique prefix of it, or C(last).
    type: str
    default: ""
  jobs:
    description: Only these jobs (the list keeps the runs that planned a change for them; a run shows their rows).
    type: list
    elements: str
    default: []
  workers:
    description: Only these workers (as O(jobs)).
    type: list
    elements: str
    default: []
  limit:
    description: The list shows the newest this many runs; C(0) shows every kept run.
    type: int
    default: 20
  format:
    description:
      - C(table) (the runs, for people) or C(json) (for scripts); C(raw) or C(human) show the bucket logs. Empty,
        C(table) for the runs and C(raw) for the bucket logs. The playbook's C(-e maand_format).
    type: str
    default: ""
    choices: ["", table, json, raw, human]
  phase:
    description: Only the log lines of this phase (C(reconcile), C(rsync), C(rollout), C(job_command),
      C(run_command), C(job_control)); shows the bucket logs.
    type: str
    default: ""
  event:
    description: Only the log lines of this event (C(command_begin), C(command_end), C(deploy_skip),
      C(reconcile_skip_stop)); shows the bucket logs.
    type: str
    default: ""
  tail:
    description: The last this many matching lines (C(human) - command blocks); C(0) all. Shows the bucket logs.
    type: int
    default: 0
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller]
notes:
  - "The playbook C(maand.core.logs) runs this module with C(-e maand_run=RUN), C(-e maand_jobs=a,b),
    C(-e maand_workers=10.0.0.1), C(-e maand_limit=N), C(-e maand_format=json), C(-e maand_phase=rollout),
    C(-e maand_event=command_end) and C(-e maand_tail=N)."
  - maand keeps every line of every command under C(logs/); these records keep what each deploy did, not the
    output of its make targets (a failed target's output tail is in the deploy's own output and problems).
seealso:
  - module: maand.core.info
  - module: maand.core.cat
"""

EXAMPLES = r"""
- name: The make targets the last deploy ran on one worker, grouped as maand's logs show --format human
  maand.core.logs:
    bucket: /srv/bucket
    run: last
    workers: [10.0.0.1]
    phase: rollout
    format: human

- name: The last 20 command_end lines of job api
  maand.core.logs:
    bucket: /srv/bucket
    jobs: [api]
    event: command_end
    tail: 20

- name: The past deploy runs
  maand.core.logs:
    bucket: /srv/bucket

- name: The last run, as JSON
  maand.core.logs:
    bucket: /srv/bucket
    run: last
    format: json
  register: last_deploy
"""

RETURN = r"""
lines:
  description: With the bucket logs, the matching lines, each parsed into its fields (ts, level, event, run,
    maand, seq, worker, job, phase, action, cmd, stream, exit, duration_ms, reason, msg, ...; all strings).
  returned: success, showing the bucket logs
  type: list
  elements: dict
runs:
  description: Without O(run), the listed runs (each record without its allocation rows).
  returned: success and O(run) is empty
  type: list
  elements: dict
run:
  description: "With O(run), the stored record: run_id, bucket_id, outcome (ok, failed), started, finished, seconds,
    user, controller, pid, plan_hash, update_seq, previous_update_seq, options, summary, counts, problems,
    allocations (job, worker, alloc_id, state, action, result, hash, from_version, to_version, gate_seconds,
    seconds, batch, wave, reason) and rollout (the allocations' rollout states after the run)."
  returned: success and O(run) is set
  type: dict
"""

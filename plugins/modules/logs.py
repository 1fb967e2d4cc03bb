# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: logs
short_description: List past deploy runs of a maand bucket, or show one (maand logs show)
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
  format:  # description, type and default: maand.core.output
    choices: [table, json]
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller, maand.core.output]
notes:
  - "The playbook C(maand.core.logs) runs this module with C(-e maand_run=RUN), C(-e maand_jobs=a,b),
    C(-e maand_workers=10.0.0.1), C(-e maand_limit=N) and C(-e maand_format=json)."
  - maand keeps every line of every command under C(logs/); these records keep what each deploy did, not the
    output of its make targets (a failed target's output tail is in the deploy's own output and problems).
seealso:
  - module: maand.core.info
  - module: maand.core.cat
"""

EXAMPLES = r"""
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

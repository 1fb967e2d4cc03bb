# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_plan
short_description: "Compute the deploy plan of a maand bucket"
version_added: 1.0.0
description:
  - "Runs on the controller. Reads C(<bucket>/data/catalog.json), hashes every job tree file by file, and combines
    that with the worker states registered by M(maand.core.deploy_state) to decide, for every allocation, start,
    restart, reload, sync, skip, stop, remove or purge, and why."
  - "Renders every C(.tpl) (Go text/template, maand's functions and namespace rules) and C(.j2) (Jinja2, same context)
    of a job for each active allocation in memory, over C(data/kv.json), and hashes the output: an allocation whose
    rendered tree did not change is skipped untouched; one that did says C(template output changed: config.json).
    A missing key or a namespace the job may not read refuses the deploy, naming job, file, line, column, key and
    workers. Template sources, C(vars.toml), C(_modules/) and C(_prometheus/) are never shipped. Outside check mode
    the allocations that sync are staged under C(<bucket>/data/.deploy-stage/<host>/<job>) (removed by
    M(maand.core.deploy_finish)). Make targets get C(ALLOCATION_ID), C(ALLOCATION_IP), C(ALLOCATION_INDEX), C(JOB),
    C(CURRENT_VERSION), C(NEW_VERSION) and the job's ports (C(api_http_port) -> C(API_HTTP_PORT))."
  - "Refuses (fails, changing nothing, releasing the deploy lock) on bad options, unknown jobs, invalid health checks,
    a workspace that changed since the last build, or C(sync_only) when a start would be needed."
  - "Expands the environment of every job spec (docs/jobspec.md) against the controller's environment; an unknown
    variable refuses the deploy naming job, file and variable. Only salted digests of the values enter the plan,
    so a changed value restarts or reloads the job (C(environment changed: KEY))."
  - "In diff mode the plan is returned as a prepared diff (printed by C(--diff)); otherwise its lines are printed. In
    check mode C(changed) tells whether the deploy would change anything."
author:
  - maand.core developers (@maand-sh)
options:
  jobs:
    description: Job filter, a list or a comma-separated string. A dict (the inventory's job records) means all jobs.
    type: raw
  force:
    description: Redo the lifecycle of unchanged active allocations.
    type: bool
    default: false
  sync_only:
    description: Rsync and promote without lifecycle; refuse when a start is needed.
    type: bool
    default: false
  state_var:
    description: Name of the registered M(maand.core.deploy_state) result on each host.
    type: str
    default: deploy_state_read
  adopt_bucket_id:
    description:
      - A bucket id found on the workers (another tree under C(/opt/worker/)) that this deploy may take over.
        Without it a deploy refuses to run on a worker that holds another bucket id's tree.
    type: str
    default: ""
  slots:
    description:
      - How many make targets of different jobs a worker runs side by side in one step (C(maand_worker_slots)).
        C(0) means the worker's C(cores) from C(workers.json), else 2. Each wave step's targets on a worker start
        in Maelstrom's order (priority, then longest estimate first; see docs/jobspec.md).
    type: int
    default: 0
  rollback:
    description:
      - Jobs to roll back (C(maand_rollback)); a list or a comma-separated string. Each active allocation gets the
        previous tree and record its worker kept, through the job's batches and gate; refused when a worker has
        no previous version. After a failed deploy of the job, the workers where it failed get their promoted
        tree back and the workers that never got the new version are left alone.
    type: raw
  promote:
    description:
      - Jobs with C(canary) in their manifest whose held allocations this deploy rolls out (C(maand_promote));
        a list or a comma-separated string. Refused for a job without C(canary).
    type: raw
  target:
    description:
      - A rolling restart (C(maand_rolling_target), which C(maand.core.job) sets), one of C(start), C(restart),
        C(reload); empty for a deploy. Every active allocation of the jobs in scope runs C(make <target>) on its
        promoted tree (no files shipped), through the job's upgrade batches and health gate; nothing else changes.
    type: str
    default: ""
  target_workers:
    description:
      - With O(target), only these workers (C(maand_rolling_workers); a list or a comma-separated string); the job's
        other allocations are left alone.
    type: raw
  slice:
    description:
      - "A sliced run, as the lock task returned it (RV(maand.core.deploy_lock#module:slice)): the planner waits for
        the other slices' workers and plans the whole fleet; a hand takes the planner's plan and stages its own
        workers' trees (docs/awx.md, section 6)."
    type: dict
  plan_hash:
    description:
      - A plan hash (C(maand_plan), at least 12 hex digits). The task fails, before any worker is touched, when the
        computed plan's hash does not start with it, naming what changed when the check run's summary is known.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Computes the plan and reports it as the changes a deploy would make.
  diff_mode:
    support: full
    details: Returns the plan lines as the diff.
extends_documentation_fragment: [maand.core.attributes, maand.core.bucket, maand.core.controller,
                                 maand.core.deploy_role, maand.core.scope, maand.core.private]
"""

EXAMPLES = r"""
- name: Compute the deploy plan
  maand.core.deploy_plan:
    bucket: "{{ maand_bucket_dir }}"
    hosts: "{{ ansible_play_hosts_all }}"
  register: deploy_plan_result
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
build_warnings:
  description:
    - The warnings of the build that wrote the catalog (its C(build_warnings)), one C(build warning:) line each,
      printed under the plan; a deploy is where they take effect.
  returned: when the last build had warnings
  type: list
  elements: str
plan:
  description: The plan (rows, steps, failures, prune, lines); see docs/deploy.md.
  returned: always
  type: dict
run_dir:
  description: The run folder (C(data/.deploy-run/<run_id>)) holding the plan, the run state and the agents' results; empty in check mode.
  returned: always
  type: str
plan_hash:
  description: The sha256 of the plan's semantic content (actions, content hashes, versions, batches, gates).
  returned: always
  type: str
content_diff:
  description:
    - With C(--diff), per worker the changed files to read there and what the deploy ships at each (no
      secret-bearing file), for C(maand.core.deploy_diff); C(hosts) lists the workers with something to show.
  returned: always
  type: dict
segments:
  description: The steps as the role runs them, each C(wide) (agent task on every host) or C(narrow) (one looped task), then the final promote pass.
  returned: always
  type: list
  elements: dict
segment_groups:
  description:
    - RV(segments) grouped as the role includes them, C({kind, segments}). Consecutive narrow steps form one group,
      included once (run_once) so that idle hosts cost nothing; each wide step is a group of its own.
  returned: always
  type: list
  elements: dict
"""

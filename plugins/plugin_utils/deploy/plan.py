# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy plan: what a deploy does to every allocation, and in which order (pure Python, no I/O).

Inputs are plain data: the catalog (`data/catalog.json`), the content of every job tree hashed on
the controller (deploy/stage.py), and what each worker reported about its promoted state
(`/opt/worker/<bucket_id>/deploy/<job>.json`, one read per host). The output is a ``Plan``
(deploy/records.py), whose JSON is plan.json (docs/contract.md):

- `rows`: one per allocation in scope: the action (start, restart, reload, sync, skip, stop, remove,
  purge, unreachable) and why;
- `steps`: the ordered execution schedule. Step 0 reconciles (worker metadata, stop disabled,
  remove removed, purge workers that left workers.json); then one step per rolling batch, waves in
  `deployment_seq` order, batches of different jobs in the same wave run side by side;
- `errors`: reasons to refuse the whole deploy before touching anything (bad options, sync_only
  that would need a start);
- `failures`: allocations that cannot be deployed this run (their worker is unreachable, or their
  job's health_check cannot run): the run goes on for the others and fails at the end, naming them;
- `prune`: catalog rows a successful run may drop without touching a worker.

The pipeline, as Nomad's scheduler (reconcile, then schedule):

1. deploy/reconcile.py decides each allocation's action and reason (``reconcile`` -> ``ReconcileResult``);
2. deploy/schedule.py turns the decisions into waves, batches and steps (``schedule`` -> ``Schedule``);
3. ``build`` assembles the ``Plan`` (rows with their batch, the rendered lines); ``compute_plan`` is its
   JSON (tests/data/deploy_plan/golden.json keeps it unchanged).

The stages after it each return a new ``Plan`` and edit none (deploy/service.prepare runs them in this
order): ``pin.stamp`` (plan_hash and the wave picture), ``pin.check_pin`` (-e maand_plan),
``pre_deploy.attach`` (the pre_deploy record), ``with_job_specs`` (worker order, slots, run fields).
At run time ``rerendered`` gives the run's plan with what pre_deploy hooks changed (deploy/run.before_step).
"""

from __future__ import annotations

import copy
import dataclasses

from .. import jobspec
from . import drain
from . import reconcile
from . import schedule
from .records import ABSENT, ACTIONS, PRE_DEPLOY, STATE_FORMAT, ZERO_VERSION, Failure, Op, Plan, PlanError, PlanRow
from .records import Prune, Step
from .reconcile import lifecycle_action
from .schedule import START_GATES, batches
from .scope import ENV_PREFIX, HOOK_EVENTS, HOOK_ONLY_GATE, POLICIES, allocation_env, allocation_indexes
from .scope import catalog_allocation_env, current_versions, failed_attempt, foreign_buckets, hook_events
from .scope import parse_jobs_filter, parse_promote, parse_rollback, port_env, promoted, seen_update_seq
from .scope import state_record, worker_id, worker_positions

__all__ = [
    "ABSENT", "ACTIONS", "ENV_PREFIX", "HOOK_EVENTS", "HOOK_ONLY_GATE", "POLICIES", "START_GATES", "STATE_FORMAT",
    "ZERO_VERSION", "Failure", "Op", "Plan", "PlanError", "PlanRow", "Prune", "Step", "allocation_env",
    "allocation_indexes", "batches", "block_after_failures", "build", "catalog_allocation_env", "compute_plan",
    "current_versions", "failed_attempt", "foreign_buckets", "hook_events", "lifecycle_action", "parse_jobs_filter",
    "parse_promote", "parse_rollback", "port_env", "promoted", "prune_catalog", "render_plan", "rerendered",
    "seen_update_seq", "state_record", "with_job_specs", "worker_id", "worker_positions",
]


# --- the plan -------------------------------------------------------------------------------------

def build(catalog, content, states, hosts, options=None):
    """The deploy plan, a records.Plan.

    catalog: the catalog dict (docs/contract.md).
    content: {job: {"hash": hex, "files": {rel: hex}, "origins": {rel: origin}}} for every non-removed
        job in scope (deploy/stage.compute); a job may map to {"error": msg} when its tree could not be
        read. A job with templates or overlays has "allocations": {host: the same shape, or {"error": msg}}
        (its messages, once per failure, come in options["stage_errors"] and refuse the deploy).
    states: {host: {"reachable": bool, "error": str, "worker": dict|None, "jobs": dict|None,
        "deployed": {job: record}, "trees": [job names with a folder under jobs/]}}.
    hosts: the hosts this run targets (after --limit); allocations elsewhere are out of scope.
    options: {"jobs": filter value, "force": bool, "sync_only": bool, "stage_errors": [str], "rollback",
        "promote", "adopt_bucket_id", "adopted": {(job, host): maand's version}, "rollout_orders": {job: str}}.
    """
    options = options or {}
    decided = reconcile.reconcile(catalog, content, states, hosts, options)
    jobs = {j["name"]: j for j in catalog.get("jobs", [])}
    scheduled = schedule.schedule(decided, jobs, options.get("rollout_orders"))
    scheduled.notes += drain.plan_notes(jobs, scheduled.steps)  # before_allocation_stopped, shutdown_delay
    return assemble(decided, scheduled)


def compute_plan(catalog, content, states, hosts, options=None):
    """build()'s plan as JSON (plan.json's shape)."""
    return build(catalog, content, states, hosts, options).to_json()


def assemble(decided, scheduled):
    """The Plan of a reconcile.ReconcileResult and its schedule.Schedule: the rows with their batch labels,
    no steps when the deploy is refused, the lines --check prints (notes last)."""
    rows = list(decided.rows)
    index = {(r.job, r.worker): i for i, r in enumerate(rows)}
    for key, label in scheduled.batches.items():
        rows[index[key]] = rows[index[key]].but(batch=label)
    refused = bool(decided.errors)
    plan = Plan(decided.bucket_id, decided.update_seq, decided.seen_seq, decided.options, rows,
                [] if refused else list(scheduled.steps), list(decided.errors), list(decided.failures),
                list(decided.prune), sorted(decided.dead_workers), decided.job_waves,
                bool(scheduled.steps) and not refused)
    notes = decided.notes + scheduled.notes
    return plan.replace(lines=render_plan(plan) + ["note: " + note for note in notes])


def render_plan(plan):
    """Human-readable plan lines (what --check --diff prints) of a records.Plan."""
    errors = plan.errors
    work = plan.has_work or bool(plan.prune)
    verdict = ("refused, nothing will be changed (%d error%s, listed after the plan)"
               % (len(errors), "" if len(errors) == 1 else "s")) if errors else \
        "changes required" if work else "no changes required"
    head = "deploy plan for bucket %s: %s" % (plan.bucket_id, verdict)
    if plan.update_seq != plan.previous_update_seq and not errors:
        head += " (update_seq %d -> %d)" % (plan.previous_update_seq, plan.update_seq)
    lines = [head] + _options_lines(plan.options) + _row_lines(plan.rows)
    if plan.prune:
        lines.append("catalog: %d removed allocation row(s) leave data/catalog.json after cleanup" % len(plan.prune))
    lines.extend("FAILED: %s" % f.msg for f in plan.failures)
    lines.extend("ERROR: %s" % e for e in errors)
    return lines


def _options_lines(opts):
    flags = [k for k in ("force", "sync_only") if getattr(opts, k)]
    if opts.rollback:
        flags.append("rollback=%s" % ",".join(opts.rollback))
    if opts.promote:
        flags.append("promote=%s" % ",".join(opts.promote))
    if not (opts.jobs or flags):
        return []
    return ["options: jobs=%s%s" % (",".join(opts.jobs) if opts.jobs else "all", "".join(" %s" % f for f in flags))]


def _row_lines(rows):
    """The rows by wave (removed and disabled ones first, under "reconcile"); a job whose rows all skip for
    the same reason on several workers is one line."""
    by_wave = {}
    for row in rows:
        key = "reconcile" if row.action in ("stop", "remove", "purge") or row.state != "active" else row.wave
        by_wave.setdefault(key, []).append(row)
    lines = []
    for key in (["reconcile"] if "reconcile" in by_wave else []) + sorted(k for k in by_wave if k != "reconcile"):
        lines.append("reconcile (removed / disabled):" if key == "reconcile" else "wave %s (deployment_seq):" % key)
        by_job = {}
        for row in by_wave[key]:
            by_job.setdefault(row.job, []).append(row)
        for row in by_wave[key]:
            group = by_job.get(row.job)
            if (group and len(group) > 1 and row.job is not None
                    and all(r.action == "skip" and r.reason == group[0].reason for r in group)):
                lines.append("  %-16s %-16s %-11s %s" % (row.job, "(%d workers)" % len(group), "skip", row.reason))
                by_job[row.job] = None
            elif group is not None:
                extra = "  [%s]" % row.batch if row.batch and row.action not in ("skip", "hold") else ""
                lines.append("  %-16s %-16s %-11s %s%s" % (row.job or "*", row.worker, row.action, row.reason, extra))
    return lines


# --- a stage of building the run's plan: the job specs --------------------------------------------------

def with_job_specs(plan, specs, workers, history, override=0):
    """The plan with each wave step's ops ordered per worker in Maelstrom's order (jobspec.worker_order: priority,
    then longest estimate), every op marked with its worker's slots (jobspec.slots_for) and its job spec's run
    fields (jobspec.op_spec), and the "worker order" lines. A new plan; specs: {job: spec}, workers: {host:
    catalog worker}, history: data/job_history.json, override: maand_worker_slots."""
    lines, steps = [], []
    for step in plan.steps:
        ops = dict(step.ops)
        for host, host_ops in sorted(step.ops.items()):
            slots = jobspec.slots_for(workers.get(host), override)
            if step.wave is not None:
                host_ops, line = _worker_order(host_ops, specs, history, slots)
                if line:
                    lines.append("  step %d on %s: %s" % (step.index, host, line))
            ops[host] = [op.but(slots=slots, **_run_fields(specs, op.job)) for op in host_ops]
        steps.append(dataclasses.replace(step, ops=ops))
    return plan.replace(steps=steps, lines=plan.lines + ([jobspec.WORKER_ORDER] + lines if lines else []))


def _worker_order(ops, specs, history, slots):
    """jobspec.worker_order over records.Op: (the ops reordered, the text of their "worker order" line or None)."""
    by_id = {op.id: op for op in ops}
    order, line = jobspec.worker_order([{"id": op.id, "job": op.job, "host": op.host, "target": op.target}
                                        for op in ops], specs, history, slots)
    return [by_id[i] for i in order], line


def _run_fields(specs, job):
    fields = jobspec.op_spec(specs.get(job) or {})
    return {"spec": fields} if fields else {}


# --- at run time: what pre_deploy hooks changed ------------------------------------------------------

def rerendered(plan, changes):
    """The run's plan (JSON, as plan.json holds it) with what pre_deploy hooks changed at run time
    (deploy/pre_deploy.apply: [records.Rerender]): each allocation's run op ships the new files (sync, from
    the tree staged again) and records their hash, its row names the changed paths, and the pre_deploy
    record holds what is rendered now (the same change is not applied twice). A new plan; plan is not edited."""
    if not changes:
        return plan
    new = copy.deepcopy(plan)
    by_op = {c.op_id: c for c in changes}
    for step in new.get("steps") or []:
        for host, ops in (step.get("ops") or {}).items():
            for op in ops:
                change = by_op.get(op.get("id"))
                if change is None or op.get("kind") != "run" or op.get("revert_of") is not None or host != change.host:
                    continue
                op["record"] = dict(op.get("record") or {}, hash=change.hash, files=dict(change.files))
                op["sync"] = True
                if change.src is not None:
                    op["src"] = change.src
    rendered = new[PRE_DEPLOY]["rendered"]
    by_alloc = {(c.job, c.host): c for c in changes}
    for c in changes:
        rendered[c.job][c.host] = c.hash
    for row in new.get("rows") or []:
        change = by_alloc.get((row.get("job"), row.get("worker")))
        if change is not None:
            if "hash" in row:
                row["hash"] = change.hash
            row["paths"] = sorted(set(row.get("paths") or []) | set(change.paths))
    return new


# --- results bookkeeping (used by the run state and the finish action) -------------------------------------

def block_after_failures(failed_jobs, job_waves, step_wave, last_in_wave, blocked):
    """Jobs that must not run further: every failed job, and, once a wave that had a failure is
    over, every job of a later wave."""
    blocked = set(blocked) | set(failed_jobs)
    if step_wave is not None and last_in_wave:
        if any(job_waves.get(j, 0) == step_wave for j in failed_jobs):
            blocked |= {j for j, w in job_waves.items() if w > step_wave}
    return sorted(blocked)


def prune_catalog(catalog, cleaned, dead_workers=()):
    """The catalog after a deploy cleaned removed allocations.

    cleaned: [{"job", "worker"}] allocation rows whose cleanup succeeded (or that had nothing to
    clean); dead_workers: removed workers assumed dead (all their rows go). Only rows in state
    "removed" (or on a removed worker) are ever dropped. Afterwards, removed workers and removed jobs
    that no longer hold any allocation row are dropped too. Returns a new dict; the input is kept.
    """
    dead = set(dead_workers)
    removed_workers = {w["host"] for w in catalog.get("workers", []) if w.get("removed")}
    drop = {(c["job"], c["worker"]) for c in cleaned}
    allocations = []
    for a in catalog.get("allocations", []):
        key = (a.get("job"), a.get("worker"))
        removable = a.get("state") == "removed" or a.get("worker") in removed_workers
        if removable and (key in drop or (a.get("worker") in dead and a.get("worker") in removed_workers)):
            continue
        allocations.append(a)
    holding_workers = {a["worker"] for a in allocations}
    holding_jobs = {a["job"] for a in allocations}
    new = dict(catalog)
    new["allocations"] = allocations
    new["workers"] = [w for w in catalog.get("workers", []) if not w.get("removed") or w["host"] in holding_workers]
    new["jobs"] = [j for j in catalog.get("jobs", []) if not j.get("removed") or j["name"] in holding_jobs]
    return new

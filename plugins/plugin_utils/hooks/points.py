# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where job commands run in build, deploy and the job_command playbook, in maand's order
(maand-sh/maand deploy/execute.go, job_deploy.go, rollout.go, batch_hooks.go, allocations.go,
build/, jobcommand/execute.go). No Ansible imports.

* build: ``post_build`` after the catalog is written, jobs in deployment_seq order; a failure
  fails the build (the catalog stays written, as maand's build commit does).
* deploy, at the start of each job's wave (deploy/pre_deploy: after the earlier waves' gates and
  post_deploy, before the wave's first step): ``pre_deploy`` of each job of the wave in scope, one
  allocation at a time, the job rendered again after it; a failing job is left out of this deploy
  with the later waves, and the deploy fails.
* deploy, per rolling batch (the batch's health gate, deploy/plan.py adds one for every job with
  hooks): ``job_control`` instead of the Makefile lifecycle (the job's whole rollout is one
  batch, its ops only sync files; NEW_/UPDATED_ALLOCATIONS), else ``after_allocation_started``
  with the batch variables; then the manifest probes, then the ``health_check`` command on the
  job's active allocations, then on the job's last batch ``post_deploy``. Any failure fails the
  gate: no promotion, the job fails, the deploy never ends green.
* deploy, reconcile: ``after_allocation_stopped`` after each stop of a disabled or removed
  allocation (DEPLOY_PHASE=stop).
* deploy, before the agents of a step (maand.core's own event, deploy/drain.py): ``before_allocation_stopped``
  for each restart or reload batch (the batch variables of its gate) and before each stop of a disabled or
  removed allocation (DEPLOY_PHASE=stop); a failure leaves that batch untouched and fails the job.
* ``maand.core.job_command``: a ``cli`` command on one job or on every job that registers it.

KV writes of hooks are saved to data/kv.json at once, so templates rendered later see them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any, Callable, Iterable, Iterator, Mapping

from . import run, commands
from ..bucket import storage
from ..catalog import catalog
from .runtime_api import RuntimeAPI
from ..errors import MaandError

JOB_COMMAND_FAILED = "ErrJobCommandFailed"  # maand bucket/errors.go: a job command that failed
GATE_EVENTS = ("job_control", "after_allocation_started", "health_check", "post_deploy")


class HookFailed(MaandError):
    """A hook run that failed (the message names job, command, event, worker and output tail)."""


# --- the run's context ----------------------------------------------------------------------------

@contextlib.contextmanager
def session(bucket_dir: str, cat: Mapping[str, Any], hosts: Mapping[str, Mapping[str, Any]] | None = None,
            timeout: int = run.DEFAULT_TIMEOUT, tail: int = run.DEFAULT_TAIL,
            current_versions: Mapping[tuple[str, str], str] | None = None,
            log: Callable[[str], None] = lambda msg: None) -> Iterator[run.Context]:
    """The runtime API and a private staging folder for the hooks of one task. hosts: {host: {address,
    port, user, key, options, sudo}} for the maand module's run_ssh (built on the Ansible side:
    adapter/support.hosts_from_hostvars)."""
    storage.ensure_data_dir(bucket_dir)
    stage = tempfile.mkdtemp(prefix=".hooks-", dir=os.path.join(bucket_dir, "data"))
    try:
        hosts_file = run.write_hosts_file(os.path.join(stage, "hosts.json"), hosts) if hosts else ""
        with RuntimeAPI(bucket_dir, cat) as api:
            if api.notice:
                log(api.notice)
            yield run.Context(bucket_dir, cat, api, stage, hosts_file, timeout, tail,
                              current_versions or {}, log)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def built_session(bucket_dir: str, connections: Callable[[], Mapping[str, Mapping[str, Any]]],
                  timeout: int = run.DEFAULT_TIMEOUT, tail: int = run.DEFAULT_TAIL,
                  log: Callable[[str], None] = lambda msg: None, allow_stale: bool = False) -> Iterator[run.Context]:
    """session() over the bucket's built catalog (build.catalog.CatalogError when it is missing, or stale unless
    `allow_stale`: the job verb's job_control, catalog/freshness.py) and the workers' connection settings
    (connections(), read once the catalog is good): the maand.core.job_command task's job commands."""
    cat = catalog.read_built(bucket_dir, allow_stale=allow_stale)
    with session(bucket_dir, cat, connections(), timeout, tail, log=log) as ctx:
        yield ctx


def any_job_has(cat: Mapping[str, Any], events: Iterable[str], jobs: Iterable[str] | None = None) -> bool:
    wanted = None if jobs is None else set(jobs)
    return any(commands.jobs_with(cat, e) and (wanted is None or wanted & set(commands.jobs_with(cat, e)))
               for e in events)


# --- build and cli --------------------------------------------------------------------------------

def post_build(ctx: run.Context) -> list[str]:
    """post_build of every job registering it, deployment_seq order; failures (all jobs run), each headed
    by maand's error kind: "ErrJobCommandFailed: post_build: job <job> command <command> ..."."""
    failures = []
    for job in commands.jobs_with(ctx.catalog, "post_build"):
        failures += ["%s: post_build: %s" % (JOB_COMMAND_FAILED, failure)
                     for failure in run.run_event(ctx, job, "post_build").failures()]
    return failures


def cli(ctx: run.Context, command: str, job: str | None, concurrency: int = 1) -> tuple[list[str], list[str]]:
    """maand job_command: (jobs run, failures). A job that does not register the command for cli
    is maand's NotFoundError."""
    if job:
        commands.job_entry(ctx.catalog, job)
        if command not in commands.commands_for(ctx.catalog, job, "cli"):
            registered = list(commands.commands_for(ctx.catalog, job, "cli"))
            raise HookFailed('job "%s" command "%s" is not registered for event "cli" (its cli commands: %s); add '
                             '"cli" to commands.%s.executed_on in the job\'s manifest.json and rebuild'
                             % (job, command, ", ".join(registered) or "none", command))
        jobs = [job]
    else:
        jobs = commands.jobs_with(ctx.catalog, "cli", command)
        if not jobs:
            known = sorted({c for j in commands.jobs_with(ctx.catalog, "cli")
                            for c in commands.commands_for(ctx.catalog, j, "cli")})
            raise HookFailed('command "%s" is not registered for event "cli" by any job (cli commands: %s)'
                             % (command, ", ".join(known) or "none"))
    failures = []
    for name in jobs:
        failures += run.run_event(ctx, name, "cli", concurrency=concurrency, command_names=[command]).failures()
    return jobs, failures


# --- deploy ---------------------------------------------------------------------------------------

def pre_deploy(ctx: run.Context, jobs: Iterable[str]) -> dict[str, list[str]]:
    """pre_deploy of the given jobs in deployment_seq order: {failed job: messages}."""
    order = {j: i for i, j in enumerate(commands.jobs_with(ctx.catalog, "pre_deploy"))}
    failed = {}
    for job in sorted((j for j in jobs if j in order), key=order.get):
        problems = run.run_event(ctx, job, "pre_deploy").failures()
        if problems:
            failed[job] = problems
    return failed


# maand docs/reference/cli/health-check.md, Parallelism: "Within a job: concurrency 1" (its commands and
# allocations one at a time), in deploy gates as in maand.core.health_check.
HEALTH_CHECK_CONCURRENCY = 1


def gate_hooks(cat: Mapping[str, Any], job: str) -> list[str]:
    """The gate events job registers (the planner gives such a job a gate on every batch)."""
    return [e for e in GATE_EVENTS if commands.has_event(cat, job, e)]


def run_gate_hooks(ctx: run.Context, gate: Mapping[str, Any], probes: Callable[[Mapping[str, Any]], list[str]]) -> list[str]:
    """One batch's gate with its hooks, in maand's order; the problems ([] = passed)."""
    job, info = gate["job"], gate.get("hooks") or {}
    # the batch's allocations (the last start batch's gate probes every start, its hooks run for the batch)
    hosts = list(info.get("batch_hosts") or gate.get("hosts") or [])
    if info.get("job_control"):
        env = commands.job_control_env(info.get("new") or [], info.get("updated") or [])
        targets = commands.targets(ctx.catalog, job)
        problems = run.run_event(ctx, job, "job_control", targets, env, concurrency=max(1, len(targets))).failures()
    else:
        env = commands.batch_env(job, hosts, int(info.get("batch_index") or 0), int(info.get("batch_count") or 1),
                                 info.get("phase") or "new", info.get("order") or hosts, info.get("order_source") or "default")
        targets = commands.targets(ctx.catalog, job, workers=hosts)
        problems = run.run_event(ctx, job, "after_allocation_started", targets, env,
                                 concurrency=max(1, len(targets))).failures()
    if problems or info.get("health") is False:  # a start batch before the last: maand checks health after all
        return problems
    if gate.get("checks"):
        problems = probes(gate)
        if problems:
            return problems
    problems = run.run_event(ctx, job, "health_check", concurrency=HEALTH_CHECK_CONCURRENCY).failures()
    if problems or not info.get("last"):
        return problems
    return run.run_event(ctx, job, "post_deploy").failures()


def after_stops(ctx: run.Context, ok_ops: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """after_allocation_stopped for every stopped allocation of the reconcile step: [(job, message)]."""
    out = []
    for op in ok_ops:
        if op.get("target") != "stop" or not op.get("job"):
            continue
        if not commands.has_event(ctx.catalog, op["job"], "after_allocation_stopped"):
            continue
        env = commands.stop_env(op["job"], op["host"])
        targets = commands.targets(ctx.catalog, op["job"], workers=[op["host"]])
        if not targets:  # a removed allocation: no longer in the catalog's live rows
            targets = [commands.Target(op["job"], op["host"], str((op.get("env") or {}).get("ALLOCATION_ID") or ""),
                                       0, True)]
        for msg in run.run_event(ctx, op["job"], "after_allocation_stopped", targets, env).failures():
            out.append((op["job"], msg))
    return out


def before_stops(ctx: run.Context, job: str, hosts: list[str], env: Mapping[str, str],
                 alloc_ids: Mapping[str, str] | None = None) -> list[str]:
    """before_allocation_stopped of job on hosts (one batch, all at once) with the batch variables env:
    the failures ([] = drained). A removed allocation (no longer a live row of the catalog) runs with its
    alloc_ids entry, DISABLED=1, as after_stops does."""
    targets = commands.targets(ctx.catalog, job, workers=hosts)
    found = {t.worker for t in targets}
    targets += [commands.Target(job, h, str((alloc_ids or {}).get(h) or ""), 0, True) for h in hosts if h not in found]
    return run.run_event(ctx, job, "before_allocation_stopped", targets, env,
                         concurrency=max(1, len(targets))).failures()


def plan_versions(plan: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """{(job, worker): version running before this deploy} from the plan's rows (CURRENT_VERSION)."""
    return {(r["job"], r["worker"]): str(r.get("from_version") or "") for r in plan.get("rows") or [] if r.get("job")}


def hooked_stops(cat: Mapping[str, Any], ok_ops: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The stops among the reconcile step's ok ops whose job registers after_allocation_stopped (after_stops
    runs their hooks; none: no hook session is needed)."""
    return [o for o in ok_ops if o.get("target") == "stop" and o.get("job")
            and commands.has_event(cat, o["job"], "after_allocation_stopped")]


def rollout_orders(bucket_dir: str, jobs: Iterable[str]) -> dict[str, str]:
    """{job: rollout_order} hooks put in maand/job/<job> (pre_deploy or cli); the next build resets it to
    the catalog order (maand/job/<job> workers, as maand's build syncs it), which is no override."""
    from ..kv import store  # late: only the deploy plan needs it

    try:
        kv_store = store.KVStore.load(bucket_dir)
    except store.KVStoreError:
        return {}
    out = {}
    for job in jobs:
        value = kv_store.get("maand/job/%s" % job, store.ROLLOUT_ORDER_KEY)
        if value and value != kv_store.get("maand/job/%s" % job, "workers"):
            out[job] = value
    return out


def job_control_target(ctx: run.Context, job: str, target: str,
                       workers: Iterable[str] | None = None) -> tuple[bool, list[str]]:
    """maand job start|stop|restart|reload|status for a job with job_control commands (maand
    jobcontrol/commands.go): the commands run with TARGET=<target> on the job's active allocations
    (those of workers, when given), all at once. (handled, failures); not handled without commands."""
    if not commands.has_event(ctx.catalog, job, "job_control"):
        return False, []
    chosen = commands.targets(ctx.catalog, job)
    if workers:
        wanted = set(workers)
        chosen = [t for t in chosen if t.worker in wanted]
    if not chosen:
        return True, []
    outcome = run.run_event(ctx, job, "job_control", chosen, {"TARGET": target}, concurrency=len(chosen))
    return True, outcome.failures()

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy's front door (no Ansible imports): what the deploy actions orchestrate.

* ``lock`` / ``unlock``: the bucket's deploy lock (and a takeover's bucket_id adoption).
* ``prepare``: read the catalog (refusing a missing or stale one), filter the jobs, stack job-spec layers
  and render the allocations in memory (jobs with ``pre_deploy`` hooks from the KV before them), expand the job specs' environments,
  adopt maand's versions, plan, check the pinned plan hash, attach job specs, stage the trees that sync and
  create the run folder (data/.deploy-run/<id>) with its segments.
* ``step``: fold the previous step of the run (results, health gates, hooks), run the ``pre_deploy`` hooks
  due at this step's wave (deploy/pre_deploy: the jobs rendered again after them), write this step's agent
  requests (one worker's part of a step: deploy/agent_step.py).
* ``finish``: fold the run, drop the cleaned removed rows from the catalog and their jobs' KV keys
  (catalog/prune.py, under the bucket lock), remove the staged trees, keep the run's deploy record
  (deploy/record.py), release the deploy lock, report.

The Ansible side (adapter/controller.py) passes in what the deploy needs of the controller as a
``Controller``: the workers' connection settings, the operator's screen, the hook budgets; and the
workers' deploy states as data. Results are records whose ``as_result()`` is the task's return value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
from typing import Any, Callable, Mapping

from .. import jobspec
from ..bucket import RunLog, locks
from ..catalog import catalog, fingerprint, maand_db, prune
from .. import hooks
from ..hooks import commands, points
from . import adopt, certs
from . import pin, plan, pre_deploy
from . import progress, record
from .callbacks import StepCallbacks
from . import rsync, run, slices, stage
from . import view
from ..errors import MaandError

# Providers of generated files added to allocation trees (e.g. certificates): each is called once per
# plan as provider(bucket_dir, catalog) and returns a function (job, host) -> [deploy/stage.Overlay];
# their files are hashed with the allocation, shipped, and named in the plan ("certs changed: ...").
OVERLAY_PROVIDERS = (certs.overlay_provider,)  # certs/<name>.crt, .key (0600), ca.crt
WIDE_FACTOR_ENV = "MAAND_DEPLOY_WIDE_FACTOR"  # a test-only knob, so that a 3-host fleet exercises narrow steps


def _quiet(*args, **kwargs):
    """The default screen: says nothing."""
    del args, kwargs


@dataclasses.dataclass
class Controller:
    """What the deploy needs of the controller's side (built by adapter/controller.py from Ansible's
    variables and settings; tests build it by hand).

    connections(hosts=None): {host: {address, port, user, key, options, sudo}} of hosts (None: every
    known host), for hooks, ssh probes and status tails; addresses(): {host: address} the probes dial;
    show(msg, color=None, stderr=False): a line on the screen; warn(msg): a warning; watched: whether
    the maand.core.deploy stdout callback shows the run (it reads the progress file instead)."""

    connections: Callable[..., dict] = lambda hosts=None: {}
    addresses: Callable[[], Mapping[str, str]] = dict
    show: Callable[..., None] = _quiet
    warn: Callable[[str], None] = _quiet
    watched: bool = False
    hook_timeout: int = hooks.DEFAULT_TIMEOUT
    output_tail: int = hooks.DEFAULT_TAIL
    python_of: Callable[[str], str] = lambda host: "python3"  # the worker's python (gates' `make status`)


@dataclasses.dataclass
class PlanRequest:
    """One deploy's options (the deploy_plan task's arguments) and the workers' deploy states as read
    by deploy_state ({host: state}; an unreadable worker is {reachable: False, error})."""

    bucket: str
    hosts: list
    states: Mapping[str, Any]
    jobs: Any = None
    force: bool = False
    sync_only: bool = False
    adopt_bucket_id: str = ""
    slots: int = 0
    rollback: Any = None
    promote: Any = None  # maand_promote: jobs whose canary-held allocations roll out
    target: str = ""  # maand_rolling_target: make this target on the jobs' promoted trees, in their batches and gate
    target_workers: Any = None  # maand_rolling_workers: only these workers (maand.core.job's maand_job_workers)
    plan_hash: str = ""
    check_mode: bool = False
    diff: bool = False
    run_pid: int = 0  # the process holding the deploy lock (ansible-playbook)
    slice: dict | None = None  # a sliced run: this slice's part as deploy_lock decided it (deploy/slices.py)


@dataclasses.dataclass
class Prepared:
    """prepare()'s outcome: a refusal (failed, msg, the plan when one was computed) or the plan and its run."""

    bucket: str
    msg: str
    failed: bool = False
    plan: dict | None = None
    changed: bool = False
    run_dir: str = ""
    segments: list = dataclasses.field(default_factory=list)
    summary: str = ""
    plan_hash: str = ""
    content_diff: dict = dataclasses.field(default_factory=lambda: {"hosts": []})
    diff: dict | None = None
    build_warnings: list = dataclasses.field(default_factory=list)  # the catalog's, repeated under the plan

    def as_result(self):
        if self.failed:
            out = {"failed": True, "changed": False, "msg": self.msg}
            if self.plan is not None:
                out["plan"] = self.plan
            return out
        out = {"changed": self.changed, "plan": self.plan, "bucket": self.bucket, "msg": self.msg,
               "run_dir": self.run_dir, "segments": self.segments,
               "segment_groups": run.segment_groups(self.segments), "summary": self.summary,
               "plan_hash": self.plan_hash, "content_diff": self.content_diff}
        if self.build_warnings:
            out["build_warnings"] = self.build_warnings
        if self.diff is not None:
            out["diff"] = self.diff
        return out


# --- the deploy lock ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Locking:
    """lock()'s or unlock()'s outcome for the run pid; lock: the lock file (None: no bucket folder, the result
    is only the refusal)."""

    pid: int
    lock: str | None
    msg: str = ""
    failed: bool = False
    changed: bool = False
    taken: bool | None = None  # lock(): whether the run holds the lock (check mode: whether it is free)
    released: bool | None = None  # unlock()
    bucket_id: str | None = None  # lock() adopting maand's bucket_id
    warnings: list = dataclasses.field(default_factory=list)
    slice: dict | None = None  # a sliced run: this slice's part (deploy/slices.Slice, its role decided)

    def as_result(self):
        if self.lock is None:
            return {"failed": True, "msg": self.msg}
        out = {"changed": self.changed, "pid": self.pid, "lock": self.lock}
        if self.slice is not None:
            out["slice"] = self.slice
        for name in ("taken", "released", "bucket_id"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["msg"] = self.msg
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.failed:
            out["failed"] = True
        return out


def _no_bucket(bucket, pid):
    return Locking(pid, None, "bucket folder %s does not exist (maand_bucket_dir)" % bucket, failed=True)


def lock(bucket, pid, adopt_bucket_id="", check_mode=False, wait=0.0, slc=None, inventory_hosts=None) -> Locking:
    """Take the deploy lock for the run pid (check mode: only check that it is free), waiting up to `wait`
    seconds for another deploy's (maand_lock_wait); a takeover adopts maand's bucket_id: taken, msg, and
    bucket_id/changed when adopting. slc (deploy/slices.Slice, not in check mode): a slice of a sliced run, which
    becomes the run's planner when it takes the lock and one of its hands when a run of its key holds it, unless
    inventory_hosts (the job's inventory) shows a workflow job that is no slice (slices.whole_fleet)."""
    if not os.path.isdir(bucket):
        return _no_bucket(bucket, pid)
    if slc is not None and slc.from_workflow and inventory_hosts is not None:
        with contextlib.suppress(MaandError, OSError):  # no catalog: the slice's own checks name it
            if slices.whole_fleet(slc, inventory_hosts, [w["host"] for w in catalog.read_catalog(bucket)["workers"]]):
                slc = None
    if slc is not None and not check_mode:
        return _lock_slice(bucket, pid, slc, wait)
    out = Locking(pid, locks.lock_path(bucket))
    try:
        out.taken, out.msg = locks.acquire(bucket, pid, check_only=bool(check_mode), wait=wait)
        if out.msg.startswith("took over"):  # a deploy that was killed or crashed: say so
            out.warnings = ["%s: the previous deploy did not finish; this run redoes what it left undone" % out.msg]
        if adopt_bucket_id:
            out.bucket_id, out.changed = adopt.adopt(bucket, adopt_bucket_id, write=not check_mode)
            if out.changed:
                out.msg += "; data/catalog.json adopts bucket_id %s" % out.bucket_id
    except locks.DeployLocked as exc:
        out.failed, out.msg = True, "deploy refused: %s" % exc
    except (adopt.AdoptError, catalog.CatalogError) as exc:
        if not check_mode:
            locks.release(bucket, pid)
        out.failed, out.msg = True, "deploy refused: %s" % exc
    except OSError as exc:
        out.failed, out.msg = True, "cannot use the deploy lock in %s/data: %s" % (bucket, exc)
    return out


def _lock_slice(bucket, pid, slc, wait):
    """lock() for a slice: the planner (the lock taken, the run entry written) or a hand (the lock held by a live
    run of the slice's key), its member token taken either way; a lock held by another deploy refuses as always."""
    out = Locking(pid, locks.lock_path(bucket))
    brd = slices.board(bucket, slc)
    try:
        try:
            out.taken, out.msg = locks.acquire(bucket, pid)
        except locks.DeployLocked as exc:
            try:
                slc = slices.join(brd, slc, False, pid, locks.process_start(pid), checkout=bucket)
            except slices.SharedCheckout:  # a reason of its own, not "the lock is held": refused below
                raise
            except slices.SliceError:
                out.taken, out.msg = locks.acquire(bucket, pid, wait=wait)  # not our run: wait or refuse
            else:
                out.taken, out.msg = False, "joined run key %s as a hand (%s)" % (slc.run_key, exc)
        if out.taken:
            slc = slices.join(brd, slc, True, pid, locks.process_start(pid), checkout=bucket)
            out.msg += "; the planner of run key %s" % slc.run_key
        out.slice = slc.to_json()
    except locks.DeployLocked as exc:
        out.failed, out.msg = True, "deploy refused: %s" % exc
    except (MaandError, OSError) as exc:  # the store's errors and the board's
        if out.taken:
            locks.release(bucket, pid)
        out.failed, out.taken, out.msg = True, False, "deploy refused (sliced run %s): %s" % (slc.run_key, exc)
    return out


def unlock(bucket, pid, check_mode=False) -> Locking:
    """Release the deploy lock of the run pid (check mode: untouched)."""
    if not os.path.isdir(bucket):
        return _no_bucket(bucket, pid)
    out = Locking(pid, locks.lock_path(bucket))
    if check_mode:
        out.msg = "check mode: lock untouched"
        return out
    try:
        out.released = locks.release(bucket, pid)
    except OSError as exc:
        out.failed, out.msg = True, "cannot use the deploy lock in %s/data: %s" % (bucket, exc)
        return out
    out.msg = "deploy lock released" if out.released else "lock not held by this run"
    return out


# --- prepare: catalog -> plan -> run folder -----------------------------------------------------------

def _with_environments(cat, content, bucket, check_mode=False):
    """Expand every job spec's environment against the controller's environment and fold its
    digests into the job's content (a changed value restarts the job); errors name job and variable."""
    errors = []
    digest_key = stage.env_key_loader(bucket, check_mode)
    for name, spec in sorted(jobspec.specs_of(cat).items()):
        if name not in content:
            continue
        try:
            env = jobspec.expand(name, spec, os.environ.get)
        except jobspec.EnvError as exc:
            errors.append(str(exc))
            continue
        try:
            content[name] = _with_env(content[name], cat["bucket_id"], name, env, digest_key)
        except (OSError, MaandError) as exc:  # kv.SecretError: the key file is missing or unreadable
            errors.append("job %s: the environment digests need the bucket's KV key: %s" % (name, exc))
    return errors


def _with_env(entry, bucket_id, name, env, digest_key):
    """with_env on a job's content and on each of its rendered allocations (their origins kept)."""
    if entry.get("error"):
        return entry
    out = dict(entry, **jobspec.with_env(entry, bucket_id, name, env, digest_key))
    if entry.get("allocations"):
        out["allocations"] = {host: a if a.get("error") else dict(a, **jobspec.with_env(a, bucket_id, name, env,
                                                                                        digest_key))
                              for host, a in entry["allocations"].items()}
    return out


class _Refused(MaandError):
    """prepare() stops: msg, and the plan when one was computed."""

    def __init__(self, msg, the_plan=None):
        super().__init__(msg)
        self.msg, self.plan = msg, the_plan


def _read_catalog(bucket, allow_stale=False):
    """The built catalog of the bucket, refusing a missing, unreadable or stale one; allow_stale: a rolling
    target of maand.core.job, which ships nothing and runs on the last built catalog (catalog/freshness.py; the
    inventory gave the warning)."""
    try:
        cat = catalog.read_catalog(bucket)
    except catalog.CatalogError as exc:
        raise _Refused("%s: %s" % (bucket, exc)) from None
    if cat is None:
        raise _Refused("%s/data/catalog.json does not exist: run `ansible-playbook -i %s/maand.yml "
                       "maand.core.build` first" % (bucket, bucket))
    try:  # the inventory refuses a stale catalog too, but preview: true or a cached inventory gets past it
        changed = fingerprint.stale(bucket, cat)
    except OSError as exc:
        raise _Refused("%s: cannot read the workspace to compare it with the catalog: %s" % (bucket, exc)) from None
    if changed and not allow_stale:
        raise _Refused("ErrStaleCatalog: %s/data/catalog.json: workspace changed since the last build "
                       "(%s); nothing was changed (fix: run ansible-playbook maand.core.build -e maand_bucket=%s)"
                       % (bucket, ", ".join(changed[:10]), bucket))
    return cat


def _hooked(cat, in_scope):
    """The jobs in scope with pre_deploy hooks, in the order maand runs them (deployment_seq, name): they run at
    their wave (deploy/pre_deploy), so the plan renders them first with the KV as it is."""
    scope = set(in_scope)
    return [j for j in commands.jobs_with(cat, "pre_deploy") if j in scope]


def _refuse_on(errors):
    if errors:
        raise _Refused("deploy refused, nothing was changed:\n  " + "\n  ".join(errors))


def render(bucket, cat, jobs, hosts, versions, update_seq, check_mode=False, pending=()):
    """Every job tree read once, every active allocation's templates rendered and hashed in memory (job specs'
    layers stacked under the job trees: data/.jobspec-layers/<job>, a temp folder in check mode). pending: jobs
    whose pre_deploy runs later (a missing KV key reads as ""). Raises jobspec.LayerError, OSError."""
    with jobspec.stacked(bucket, cat, jobs, check_mode) as stacked:
        return stage.compute(bucket, stacked, jobs, hosts, versions, update_seq,
                             [provider(bucket, cat) for provider in OVERLAY_PROVIDERS], pending=pending)


def _stage_jobs(req, cat, in_scope, hooked):
    try:
        return render(req.bucket, cat, in_scope, req.hosts, plan.current_versions(req.states),
                      plan.seen_update_seq(req.states, cat), req.check_mode, hooked)
    except (jobspec.LayerError, OSError) as exc:
        raise _Refused("deploy refused, nothing was changed:\n  %s" % exc) from None


def _with_pre_deploy(req, cat, the_plan, hooked, staging):
    """The plan with what the run needs to run the pre_deploy hooks at their waves (its pre_deploy record) and
    the lines saying when they run and that the plan was rendered before them (in check mode: that they did not
    run); the plan itself when no job in scope has hooks."""
    if not hooked:
        return the_plan
    jobs = {j["name"]: j for j in cat.get("jobs", [])}
    globs = {j: jobs[j].get("restart_globs") or [] for j in hooked if jobs[j].get("restart_policy") == "reload"}
    pre_record = pre_deploy.entry(
        hooked, the_plan.job_waves, staging.content, plan.current_versions(req.states),
        plan.seen_update_seq(req.states, cat), bool(req.plan_hash), globs,
        points.rollout_orders(req.bucket, hooked))
    return pre_deploy.attach(the_plan, pre_record, req.check_mode, staging.missing)


def _build_plan(req, cat, jobs_filter, in_scope, staging, ctl):
    """The deploy plan (a records.Plan: deploy/plan.build, reconcile then schedule); a refusal when it has errors."""
    adopted, adopt_warning = maand_db.adopted_versions(req.bucket, cat["bucket_id"])  # takeover from maand
    if adopt_warning:
        ctl.warn(adopt_warning)
    try:
        the_plan = plan.build(cat, staging.content, req.states, req.hosts,
                              {"jobs": jobs_filter, "force": req.force, "sync_only": req.sync_only,
                               "adopt_bucket_id": req.adopt_bucket_id, "stage_errors": staging.errors,
                               "rollout_orders": points.rollout_orders(req.bucket, in_scope),
                               "adopted": adopted, "rollback": req.rollback, "promote": req.promote,
                               "target": req.target, "target_workers": req.target_workers})
    except plan.PlanError as exc:
        raise _Refused(str(exc)) from None
    if the_plan.errors:
        raise _Refused("deploy refused, nothing was changed:\n  " + "\n  ".join(the_plan.errors), the_plan.to_json())
    return the_plan


def _run_plan(req, cat, in_scope, jobs_filter, hooked, staging, ctl):
    """The run's plan, stage by stage (each a new records.Plan): planned, stamped with its hash and the wave
    picture, checked against -e maand_plan, with the pre_deploy record, with the job specs' worker order, slots
    and run fields."""
    the_plan = _build_plan(req, cat, jobs_filter, in_scope, staging, ctl)
    the_plan = pin.stamp(the_plan, cat)  # before the pre_deploy record and estimates join the plan
    try:
        the_plan = pin.check_pin(req.plan_hash, the_plan, req.check_mode)
    except pin.PinRefused as exc:
        raise _Refused(str(exc), the_plan.to_json()) from None
    the_plan = _with_pre_deploy(req, cat, the_plan, hooked, staging)
    workers = {w["host"]: w for w in cat.get("workers", [])}
    return plan.with_job_specs(the_plan, jobspec.specs_of(cat), workers, jobspec.load_history(req.bucket),
                               req.slots)


def _new_run(req, the_plan, staging, ctl, run_id=None):
    """(run_dir, segments): the trees that sync staged (data/.deploy-stage/<host>/<job>), the run folder (a hand of a
    sliced run: the planner's run_id, its plan not published again)."""
    try:
        staging.stage_plan(req.bucket, the_plan)
    except OSError as exc:
        raise _Refused("cannot stage the job trees under %s: %s; nothing was changed"
                       % (stage.stage_root(req.bucket), exc)) from None
    try:
        run_dir = run.new_run(req.bucket, the_plan, run_id=run_id, record=run_id is None)
    except (OSError, run.RunError) as exc:
        raise _Refused("cannot create the deploy run folder under %s/data: %s" % (req.bucket, exc)) from None
    _log_plan(req.bucket, the_plan, run_dir, ctl.warn)
    factor = int(os.environ.get(WIDE_FACTOR_ENV) or run.WIDE_FACTOR)
    return run_dir, run.segments(the_plan, len(req.hosts), factor)


def _log_plan(bucket, the_plan, run_dir, warn):
    """maand's plan events in the bucket logs (bucket/runlog.py, maand=deploy): deploy_skip (worker=-) for a job
    with nothing to do on any allocation (reason already_promoted), reconcile_skip_stop for a disabled or removed
    allocation with nothing to stop (reason not_deployed)."""
    log = RunLog.open(bucket, "deploy", the_plan.get("update_seq"), os.path.basename(run_dir))
    rows = the_plan.get("rows") or []
    try:
        for job in sorted({r["job"] for r in rows if r.get("job")}):  # a removed worker's purge row has no job
            mine = [r for r in rows if r["job"] == job]
            if all(r["action"] == "skip" and r.get("state") == "active" for r in mine):
                log.event("", "deploy_skip", job=job, reason="already_promoted")
        for r in rows:
            if r["action"] == "skip" and r.get("state") in ("disabled", "removed"):
                log.event(r["worker"], "reconcile_skip_stop", job=r["job"], reason="not_deployed",
                          removed=str(r["state"] == "removed").lower(), disabled=str(r["state"] == "disabled").lower())
    except OSError as exc:
        warn("the bucket logs (%s/logs) could not be written: %s" % (bucket, exc))


def _prepare(req, ctl):
    slc = slices.Slice.from_json(req.slice) if req.slice and not req.check_mode else None
    if slc is not None and slc.role == "hand":
        return _prepare_hand(req, ctl, slc)
    cat = _read_catalog(req.bucket, allow_stale=bool(req.target))
    own = sorted(req.hosts)
    if slc is not None:  # the planner: the whole fleet, as the slices claimed it
        fleet = _gather(req, ctl, slc, cat)
        req, ctl = dataclasses.replace(req, hosts=fleet.hosts, states=fleet.states), slices.fleet_ctl(ctl, fleet)
    if req.adopt_bucket_id:  # written by maand.core.deploy_lock (not in check mode)
        cat = dict(cat, bucket_id=req.adopt_bucket_id)
    jobs_filter, errors = plan.parse_jobs_filter(req.jobs, [j["name"] for j in cat.get("jobs", [])])
    if errors:
        raise _Refused("; ".join(errors))
    in_scope = [j["name"] for j in cat.get("jobs", [])
                if not j.get("removed") and (jobs_filter is None or j["name"] in jobs_filter)]
    # job specs' environments (against the controller's), users, groups and root needs checked before
    # pre_deploy hooks run on any worker
    _refuse_on(jobspec.check_env(cat, in_scope, os.environ.get)
               + jobspec.check_ids(cat, req.states, in_scope))
    hooked = [] if req.target else _hooked(cat, in_scope)  # a rolling restart runs no pre_deploy
    if slc is not None and hooked:
        raise _Refused("sliced run %s: jobs with pre_deploy hooks (%s) cannot be sliced yet (their files are rendered "
                       "again on the planner after the hooks); nothing was changed (fix: Job Slicing 1 for this "
                       "deploy, or -e maand_jobs without them)" % (slc.run_key, ", ".join(hooked)))
    staging = _stage_jobs(req, cat, in_scope, hooked)
    _refuse_on(_with_environments(cat, staging.content, req.bucket, req.check_mode))
    typed = _run_plan(req, cat, in_scope, jobs_filter, hooked, staging, ctl)
    the_plan = typed.to_json()  # the plan.json of the run, the plan of the task's result
    work = the_plan["has_work"] or bool(the_plan["prune"])
    run_dir, segments = _new_run(req, the_plan, staging, ctl) if not req.check_mode else ("", [])
    if slc is not None:
        segments = _planner_ready(req, slc, the_plan, fleet, run_dir, own)
    summary = view.plan_summary(the_plan)
    warned = build_warning_lines(cat)
    out = Prepared(req.bucket, the_plan["lines"][0], plan=the_plan, changed=bool(req.check_mode and work), run_dir=run_dir,
                   segments=segments, summary=summary, plan_hash=typed.plan_hash,
                   content_diff=view.content_diff(the_plan, staging, req.states, plan.failed_attempt) if req.diff
                   else {"hosts": []}, build_warnings=warned)
    if req.diff:
        out.diff = {"prepared": "\n".join(the_plan["lines"] + [summary] + warned) + "\n"}
    elif not ctl.watched:  # that callback prints them
        for line in the_plan["lines"] + [summary]:
            ctl.show(line, color="yellow" if work and line.startswith("  ") and " skip " not in line else None)
        for line in warned:
            ctl.show(line, color="yellow")
    return out


# --- a sliced run (deploy/slices.py): the planner plans the fleet, the hands work their hosts ------------------

def _gather(req, ctl, slc, cat):
    """The planner's fleet: its own claim written, the catalog's workers waited for (deploy/slices.gather)."""
    brd = slices.board(req.bucket, slc)
    slices.claim(brd, slc, req.hosts, req.states, *slices.reach(ctl, req.hosts))
    fleet = slices.gather(brd, slc, [w["host"] for w in cat.get("workers") or []])
    if fleet.absent:
        ctl.warn("sliced run %s: %d worker(s) no slice claimed, not deployed: %s"
                 % (slc.run_key, len(fleet.absent), ", ".join(sorted(fleet.absent)[:10])))
    return fleet


def _segments(the_plan, own):
    """A slice's segments: every step of the plan (the final pass too when any gate waits for it), each wide or
    narrow by what this slice's own hosts do in it."""
    factor = int(os.environ.get(WIDE_FACTOR_ENV) or run.WIDE_FACTOR)
    kinds = {s["step"]: s["kind"] for s in run.segments(slices.own_plan(the_plan, own), len(own), factor)}
    return [dict(s, kind=kinds.get(s["step"], "narrow")) for s in run.segments(the_plan, len(own), factor)]


def _planner_ready(req, slc, the_plan, fleet, run_dir, own):
    """The planner's plan on the board for the hands and its slice.json; its segments over its own hosts."""
    render_inputs = {"versions": sorted([j, h, v] for (j, h), v in plan.current_versions(req.states).items()),
                     "update_seq": plan.seen_update_seq(req.states, catalog.read_catalog(req.bucket))}
    slices.publish_plan(slices.board(req.bucket, slc), slc, os.path.basename(run_dir), the_plan, render_inputs, fleet)
    slices.save(run_dir, slc, own, os.path.basename(run_dir))
    return _segments(the_plan, set(own))


def _prepare_hand(req, ctl, slc):
    """A hand's prepare: its claim, the planner's plan, its own hosts' trees staged and checked, its run folder."""
    brd = slices.board(req.bucket, slc)
    own = sorted(req.hosts)
    slices.claim(brd, slc, own, req.states, *slices.reach(ctl, own))
    try:
        return _hand_plan(req, ctl, slc, brd, own)
    except BaseException:
        slices.leave(brd, slc, own, req.run_pid)  # refused: its workers will not answer, the planner gives them up
        raise


def _hand_plan(req, ctl, slc, brd, own):
    try:
        run_id, entry = slices.await_plan(brd, slc, own)
    except slices.SliceError as exc:
        raise _Refused(str(exc)) from None
    the_plan, inputs = entry["plan"], entry.get("render") or {}
    cat = _read_catalog(req.bucket, allow_stale=bool(req.target))
    mine = slices.own_plan(the_plan, set(own))
    jobs = sorted({op["job"] for s in mine["steps"] for ops in s["ops"].values() for op in ops
                   if op.get("sync") and op.get("job")})
    versions = {(j, h): v for j, h, v in inputs.get("versions") or ()}
    staging = _stage_hand(req, cat, jobs, own, versions, int(inputs.get("update_seq") or 0))
    _refuse_on(slices.hash_mismatches(the_plan, staging, set(own)))
    run_dir, dummy = _new_run(req, mine, staging, ctl, run_id=run_id)
    slices.save(run_dir, slc, own, run_id)
    return Prepared(req.bucket, "sliced run %s: run %s, this slice works %d worker(s)" % (slc.run_key, run_id, len(own)),
                    plan=the_plan, changed=bool(the_plan.get("has_work")), run_dir=run_dir,
                    segments=_segments(the_plan, set(own)), summary=view.plan_summary(the_plan),
                    plan_hash=the_plan.get("plan_hash") or "")


def _stage_hand(req, cat, jobs, own, versions, update_seq):
    try:
        staging = render(req.bucket, cat, jobs, own, versions, update_seq)
    except (jobspec.LayerError, OSError) as exc:
        raise _Refused("deploy refused, nothing was changed:\n  %s" % exc) from None
    _refuse_on(list(staging.errors) + _with_environments(cat, staging.content, req.bucket))
    return staging


def build_warning_lines(cat):
    """The warnings of the build that wrote the catalog (catalog/service.py keeps them as `build_warnings`), one
    line each, to repeat under the plan: a deploy is where a warning of the build takes effect (issue 31)."""
    return ["build warning: %s" % text for text in cat.get("build_warnings") or ()]


def prepare(req: PlanRequest, ctl: Controller | None = None) -> Prepared:
    """The deploy plan of the request and, unless in check mode, its staged trees and run folder. A
    refusal releases the deploy lock (a refused deploy must not keep the bucket locked until the
    playbook exits) and shows the plan's lines when a plan was computed."""
    ctl = ctl or Controller()
    try:
        return _prepare(req, ctl)
    except _Refused as exc:
        slc = slices.Slice.from_json(req.slice) if req.slice else None
        if slc is not None and slc.role == "planner" and not req.check_mode:
            slices.refuse(slices.board(req.bucket, slc), exc.msg)
        if not req.check_mode and not (slc is not None and slc.role == "hand"):
            try:
                locks.release(req.bucket, req.run_pid)
            except OSError:  # the refusal is the message; a lock left behind names a dead run: the next takes it
                pass
        if exc.plan is not None:
            for line in exc.plan["lines"]:
                ctl.show(line, color="red" if line.startswith(("ERROR", "FAILED")) else None)
        return Prepared(req.bucket, exc.msg, failed=True, plan=exc.plan)


# --- step: one step of the run ------------------------------------------------------------------------

@contextlib.contextmanager
def callbacks(run_dir, ctl):
    """The callbacks of one step task (deploy/callbacks.StepCallbacks: its gates with the bucket's job commands,
    the pre_deploy hooks due before a step, all in one hook session) over the run's RunContext: its plan, state
    and catalog read once, for the callbacks and for run.advance/finish (cbs.run)."""
    with StepCallbacks.opened(run.RunContext.read(run_dir), ctl, rerender) as cbs:
        yield cbs


def rerender(bucket, cat, job, hosts, versions, update_seq):
    """A job rendered again after its pre_deploy hooks (deploy/pre_deploy, deploy/callbacks.StepCallbacks.before):
    (its staging, errors), the staging None when it cannot be rendered."""
    try:
        staging = render(bucket, cat, [job], hosts, versions, update_seq)
    except (jobspec.LayerError, OSError) as exc:
        return None, [str(exc)]
    return staging, list(staging.errors) + _with_environments(cat, staging.content, bucket)


@dataclasses.dataclass
class Stepped:
    """step()'s outcome: the hosts that act in the step and the failures the previous step left."""

    key: str = ""
    hosts: list = dataclasses.field(default_factory=list)
    failures: list = dataclasses.field(default_factory=list)
    error: str = ""
    ran: dict = dataclasses.field(default_factory=dict)  # host -> the ops its request holds (the step's line)

    def as_result(self):
        if self.error:
            return {"failed": True, "changed": False, "msg": self.error}
        return {"changed": False, "hosts": self.hosts, "step": self.key, "new_failures": self.failures, "ran": self.ran,
                "msg": "step %s: %d host(s) act" % (self.key, len(self.hosts))}


def step(run_dir: str, step_value: Any, ctl: Controller | None = None) -> Stepped:
    """Fold the previous step of the run (results, health gates) and write this step's agent requests.
    A broken run folder is an error of the step; any other exception propagates (and fails the run)."""
    ctl = ctl or Controller()
    sliced = slices.load(run_dir)
    try:
        key = run.step_key(step_value)
        if sliced is not None and sliced[0].role == "hand":
            hosts, failures = slices.hand_step(run_dir, key, sliced)
        else:
            ctl = slices.collected(run_dir, sliced, ctl)
            with callbacks(run_dir, ctl) as cbs:
                hosts, failures = run.advance(cbs.run, key, cbs)
            hosts = slices.handed_out(run_dir, key, sliced, hosts, failures)
    except (run.RunError, ValueError, OSError, slices.SliceError) as exc:
        return Stepped(error="deploy step %s: %s" % (step_value, exc))
    if not ctl.watched:  # the callback prints new_failures from the result
        for msg in failures:
            ctl.show("FAILED: %s" % msg, color="red", stderr=True)
    return Stepped(key, hosts, failures, ran=_ran(run_dir, key, hosts))


def _ran(run_dir, key, hosts):
    """{host: [{"job", "revert"}]}: the ops the step's requests hold (promotions not counted), for its line."""
    out = {}
    for host in hosts:
        try:
            request = run.read_request(run_dir, key, host) or {}
        except (run.RunError, OSError, ValueError):
            request = {}
        out[host] = [{"job": op.get("job"), "revert": op.get("revert_of") is not None}
                     for op in request.get("ops") or [] if isinstance(op, dict)]
    return out


# --- finish: fold the run, prune the catalog, unlock ---------------------------------------------------

@dataclasses.dataclass
class FinishRequest:
    bucket: str
    plan: dict
    run_dir: str = ""
    release: bool = True
    check_mode: bool = False
    run_pid: int = 0


@dataclasses.dataclass
class Finished:
    """finish()'s outcome: the problems (none: the deploy is done), the verdict rows when there are."""

    check_mode: bool
    problems: list
    summary: str
    changed: bool = False
    pruned: list = dataclasses.field(default_factory=list)
    rows: list | None = None
    progress: list | None = None

    def as_result(self):
        out = {"changed": self.changed, "pruned": self.pruned}
        if self.progress is not None:
            out["progress"] = self.progress
        out.update(problems=self.problems, summary=self.summary)
        if self.rows is not None and not self.check_mode:
            out["verdict"] = [v.to_dict() for v in self.rows]
            out["verdict_line"] = view.done_line(self.rows, len(self.problems))
            out["workers"] = view.worker_results(self.rows)
        if self.problems:
            out.update(failed=True, msg="deploy finished with %d problem(s) (%s):\n  %s" % (
                len(self.problems), self.summary, "\n  ".join(self.problems)))
        else:
            out["msg"] = "deploy %s: %s" % ("plan (check mode)" if self.check_mode else "done", self.summary)
        return out


def run_outcome(run_dir, the_plan, ctl):
    """(plan, problems, done, verdict) of the run; a run folder that cannot be read is itself a problem."""
    if not run_dir:
        return the_plan, [f["msg"] for f in the_plan.get("failures") or []], [], view.verdict(the_plan, [], {})
    try:
        with callbacks(run_dir, ctl) as cbs:
            the_plan, state, report = run.finish(cbs.run, cbs)
    except (run.RunError, OSError, ValueError) as exc:
        return the_plan, ["the deploy run state could not be read, the outcome is unknown: %s" % exc], [], None
    try:  # the verdict is for the screen: it never changes the outcome
        rows = view.verdict(the_plan, state.done, state.failed_ops,
                            progress.gate_times(progress.read_all(run_dir)))
    except (KeyError, TypeError, ValueError) as exc:
        ctl.warn("could not compute the deploy verdict: %s: %s" % (type(exc).__name__, exc))
        rows = None
    return the_plan, list(report.problems), list(report.done), rows


def _drop_cleaned(bucket, the_plan, done, problems, show):
    """Drop from the catalog the removed rows whose cleanup succeeded (and those with nothing to clean), and
    the KV keys of the jobs that left with them (catalog/prune.py, under the bucket lock): (changed, pruned
    'job@worker's)."""
    cleaned = list(the_plan.get("prune") or [])
    cleaned += [{"job": d["job"], "worker": d["host"]} for d in done if d.get("kind") == "remove"]
    purged = {d["host"] for d in done if d.get("kind") == "purge"}
    dead = set(the_plan.get("dead_workers") or [])
    if not (cleaned or dead or purged) or not the_plan.get("bucket_id"):
        return False, []
    out = prune.prune(bucket, the_plan["bucket_id"],
                      lambda cat: plan.prune_catalog(cat, cleaned, dead_workers=dead), show)
    if out.problem:
        problems.append(out.problem)
    return out.changed, out.pruned


def _summary(the_plan):
    counts = {}
    for row in the_plan.get("rows", []):
        counts[row["action"]] = counts.get(row["action"], 0) + 1
    return ", ".join("%s %d" % (k, counts[k]) for k in sorted(counts)) or "nothing to do"


def _clean_up(req, the_plan, done, problems, ctl, before_release=None):
    """Prune the catalog and remove the staged trees (a real run whose outcome is known), call before_release
    (the deploy record), release the lock."""
    changed, pruned = False, []
    if not req.check_mode and done is not None:
        changed, pruned = _drop_cleaned(req.bucket, the_plan, done, problems, ctl.show)
        # the staged trees are rebuilt by every deploy and may hold rendered secrets: never kept
        try:
            stage.remove_tree(stage.stage_root(req.bucket))
        except OSError as exc:
            problems.append("could not remove %s (it may hold rendered secrets): %s"
                            % (stage.stage_root(req.bucket), exc))
    if before_release is not None:
        before_release()
    if req.release and not req.check_mode:
        try:
            locks.release(req.bucket, req.run_pid)
        except OSError as exc:
            problems.append("could not release the deploy lock: %s" % exc)
    return changed, pruned


def _keep_record(bucket, run_dir, the_plan, rows, problems, run_pid, ctl):
    """The run's deploy record into the state store (maand.core.logs, info, cat deployments), still under the
    deploy lock. A record that cannot be written is a warning: the deploy's own outcome stands."""
    try:
        record.record_finish(bucket, run_dir, the_plan, rows, problems, run_pid, time.time())
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # never in the way of the lock's release: a store that fails here is named, the deploy's outcome stands
        ctl.warn("the deploy record of run %s was not kept (maand.core.logs will not list it): %s: %s"
                 % (os.path.basename(os.path.normpath(run_dir)), type(exc).__name__, exc))


def finish(req: FinishRequest, ctl: Controller | None = None) -> Finished:
    """The end of a deploy: the run's outcome, the catalog cleanup, the stage removed, the lock released
    (even after a crash of the fold: nothing is pruned then), the run's own ssh masters stopped and their
    folder removed (deploy/rsync.close_control_dir). A failed run keeps its folder for inspection."""
    ctl = ctl or Controller()
    run_dir = "" if req.check_mode else req.run_dir
    sliced = slices.load(run_dir) if run_dir else None
    if sliced is not None and sliced[0].role == "hand":
        return _hand_finish(req, run_dir, sliced, ctl)
    progress_mark = progress.mark(run_dir)
    try:
        ctl = slices.collected(run_dir, sliced, ctl)
        the_plan, problems, done, rows = run_outcome(run_dir, req.plan, ctl)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # a crash here still fails the run (below) and still releases the lock; nothing is pruned
        the_plan, done, rows = req.plan, None, None
        problems = ["the deploy finish step crashed, the outcome is unknown (the run folder %s is kept; "
                    "run the deploy again): %s: %s" % (run_dir, type(exc).__name__, exc)]
    if sliced is not None:
        _end_slices(req.bucket, sliced, the_plan, problems, rows, req.run_pid)
    keep = (lambda: _keep_record(req.bucket, run_dir, the_plan, rows, problems, req.run_pid, ctl)) if run_dir else None
    changed, pruned = _clean_up(req, the_plan, done, problems, ctl, before_release=keep)
    progress_records = None
    if ctl.watched:  # the records this task wrote: the callback may not have read them before the folder goes
        progress_records = progress.read_since(run_dir, progress_mark)
    if run_dir:  # after the run's last ssh call (the gates and status tails above): its own masters stop
        rsync.close_control_dir(rsync.control_dir(run_dir))
    if run_dir and not problems:
        shutil.rmtree(run_dir, ignore_errors=True)  # a failed run keeps its folder for inspection
    out = Finished(req.check_mode, problems, _summary(the_plan), changed, pruned, rows, progress_records)
    if rows is not None and not req.check_mode and not ctl.watched:  # the callback prints the verdict
        verdict_line = view.done_line(rows, len(problems))
        for line in view.verdict_table(rows) + [view.workers_line(rows), verdict_line]:
            if line:
                ctl.show(line)
    return out


def _end_slices(bucket, sliced, the_plan, problems, rows, run_pid):
    """The planner's end of a sliced run: the outcome on the board for the hands, its member token given back."""
    slc, dummy, run_id = sliced
    brd = slices.board(bucket, slc)
    try:
        slices.publish_end(brd, run_id, {"problems": list(problems), "summary": _summary(the_plan),
                                         "verdict": [v.to_dict() for v in rows or ()]},
                           [r["worker"] for r in the_plan.get("rows") or []],
                           (brd.get("plan/%s" % run_id) or {}).get("absent") or {})
    except MaandError as exc:
        problems.append("sliced run %s: the outcome could not reach the other slices: %s" % (slc.run_key, exc))
    brd.store.board_leave(slc.run_key, slc.member, run_pid)


def _hand_finish(req, run_dir, sliced, ctl):
    """A hand's end: the planner's outcome of the whole run (its problems fail this slice too), the staged trees
    removed, its member token given back; it holds no deploy lock and writes no catalog."""
    slc, own, run_id = sliced
    brd = slices.board(req.bucket, slc)
    slices.leave(brd, slc, own, req.run_pid)
    end = slices.await_end(brd, slc, run_id)
    problems = list(end.get("problems") or ())
    try:
        stage.remove_tree(stage.stage_root(req.bucket))
    except OSError as exc:
        problems.append("could not remove %s (it may hold rendered secrets): %s" % (stage.stage_root(req.bucket), exc))
    rows = [view.Verdict(**v) for v in end.get("verdict") or ()]
    rsync.close_control_dir(rsync.control_dir(run_dir))
    if not problems:
        shutil.rmtree(run_dir, ignore_errors=True)
    out = Finished(False, problems, end.get("summary") or _summary(req.plan), False, [], rows)
    if not ctl.watched:
        for line in view.verdict_table(rows) + [view.workers_line(rows), view.done_line(rows, len(problems))]:
            if line:
                ctl.show(line)
    return out

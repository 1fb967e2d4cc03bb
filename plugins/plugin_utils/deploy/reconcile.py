# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reconciler: what happens to every allocation in scope, and why (pure Python, no I/O).

As Nomad's ``AllocReconciler.Compute()`` returns ``ReconcileResults``, ``reconcile()`` returns a
``ReconcileResult``: one ``PlanRow`` per allocation (its action and reason), the reconcile ops (stop,
remove, purge, worker metadata), each job's rollout ops (starts, upgrades, syncs), the auto_revert op of
each upgrade, the errors that refuse the deploy and the failures that leave allocations out. Nothing is
scheduled here: deploy/schedule.py turns the result into waves, batches and steps.

The phases, in order: check the jobs in scope (health gates, restart settings), decide every
allocation in scope (``Reconciler``; rollbacks: ``Rollbacks``), hold upgrades for canaries, purge
workers that left workers.json, plan worker metadata and the update_seq, plan the reverts.
"""

from __future__ import annotations

import dataclasses
import itertools

from ..bucket import content
from ..bucket.job_checks import resolve_health
from .records import ABSENT, GATE_TIMING, STATE_FORMAT, ZERO_VERSION, Failure, Op, PlanOptions, PlanRow, Prune
from .scope import ENV_PREFIX, HOOK_ONLY_GATE, POLICIES, Scope, hook_events, promoted, seen_update_seq, state_record
from .scope import worker_id


def lifecycle_action(policy, globs, changed, hash_changed, version_only, sync_only):
    """What an upgrade of a running allocation does: (action, matched paths). Mirrors maand."""
    if sync_only:
        return "sync", []
    if policy == "never":
        return "sync", []
    if policy == "reload":
        if version_only and not hash_changed:
            return "reload", []
        if not globs:
            return "reload", []
        matched = content.match_any(globs, changed)
        if matched:
            return "restart", matched
        return "reload", []
    return "restart", []


def _short(h):
    return (h or "-")[:12]


def _fmt_paths(paths, limit=8):
    if len(paths) <= limit:
        return ", ".join(paths)
    return "%s (+%d more)" % (", ".join(paths[:limit]), len(paths) - limit)


def _change_reasons(deployed, hash_changed, changed, version_changed, cur_version, new_version, origins=None):
    reasons = []
    if deployed is None:
        reasons.append("new allocation")
    elif hash_changed:
        paths = [p for p in changed if not p.startswith(ENV_PREFIX)]
        keys = [p[len(ENV_PREFIX):] for p in changed if p.startswith(ENV_PREFIX)]
        if paths or not keys:
            reasons.extend(_content_reasons(paths, origins or {}))
        if keys:  # job spec environment (jobspec/deploy.with_env): names only, never values
            reasons.append("environment changed: %s" % _fmt_paths(keys))
    if deployed is not None and version_changed:
        reasons.append("version %s -> %s" % (cur_version, new_version))
    return reasons


def _content_reasons(changed, origins):
    """"content changed: a, b" for files shipped as they are, "template output changed: config.json" for
    rendered ones, "<origin> changed: ..." for other generated files (certificates, ...)."""
    if not changed:
        return ["content changed: (file modes)"]
    groups = {}
    for rel in changed:
        groups.setdefault(origins.get(rel) or "content", []).append(rel)
    order = ["content", "template"] + sorted(o for o in groups if o not in ("content", "template"))
    label = {"content": "content changed", "template": "template output changed"}
    return ["%s: %s" % (label.get(o, "%s changed" % o), _fmt_paths(groups[o])) for o in order if o in groups]


# --- the result ------------------------------------------------------------------------------------

def _ops_json(ops):
    return [o.to_json() for o in ops]


def _ops(data):
    return [Op.from_json(o) for o in data]


@dataclasses.dataclass(slots=True)
class Rollout:
    """One job's run ops by the batches they go in: fresh starts, upgrades (restarts, reloads, rollbacks)
    and syncs (files only, riding in the job's first batch)."""

    start: list = dataclasses.field(default_factory=list)
    upgrade: list = dataclasses.field(default_factory=list)
    sync: list = dataclasses.field(default_factory=list)

    def __bool__(self):
        return bool(self.start or self.upgrade or self.sync)

    def ops(self):
        return itertools.chain(self.start, self.upgrade, self.sync)

    def to_json(self):
        return {"start": _ops_json(self.start), "upgrade": _ops_json(self.upgrade), "sync": _ops_json(self.sync)}

    @classmethod
    def from_json(cls, data):
        return cls(_ops(data["start"]), _ops(data["upgrade"]), _ops(data["sync"]))


@dataclasses.dataclass(slots=True)
class ReconcileResult:
    """What the reconciler decided (Nomad's ReconcileResults), before any scheduling."""

    bucket_id: str
    options: PlanOptions
    job_waves: dict  # {job: deployment_seq} of every catalog job
    rows: list = dataclasses.field(default_factory=list)  # [PlanRow], batch not set
    errors: list = dataclasses.field(default_factory=list)
    failures: list = dataclasses.field(default_factory=list)  # [Failure]
    prune: list = dataclasses.field(default_factory=list)  # [Prune]
    dead_workers: set = dataclasses.field(default_factory=set)  # removed workers assumed dead
    gates: dict = dataclasses.field(default_factory=dict)  # job -> its health gate spec
    cleanup: dict = dataclasses.field(default_factory=dict)  # host -> [Op] stop, remove, purge (step 0)
    meta: dict = dataclasses.field(default_factory=dict)  # host -> the Op writing worker.json / jobs.json
    rollout: dict = dataclasses.field(default_factory=dict)  # job -> Rollout
    reverts: dict = dataclasses.field(default_factory=dict)  # upgrade op id -> its auto_revert Op
    fresh: set = dataclasses.field(default_factory=set)  # (job, host) starts with nothing of the job on the worker
    canaries: set = dataclasses.field(default_factory=set)  # jobs whose upgrade this deploy is a canary batch
    auto_promote: dict = dataclasses.field(default_factory=dict)  # job -> [hosts of its canaries]; the rest follows
    notes: list = dataclasses.field(default_factory=list)
    update_seq: int = 0
    seen_seq: int = 0

    def rollout_of(self, job):
        return self.rollout.setdefault(job, Rollout())

    def clean(self, host, op):
        self.cleanup.setdefault(host, []).append(op)

    def to_json(self):
        return {"bucket_id": self.bucket_id, "options": self.options.to_json(), "job_waves": self.job_waves,
                "rows": [r.to_json() for r in self.rows], "errors": list(self.errors),
                "failures": [f.to_json() for f in self.failures], "prune": [p.to_json() for p in self.prune],
                "dead_workers": sorted(self.dead_workers), "gates": self.gates,
                "cleanup": {h: _ops_json(ops) for h, ops in self.cleanup.items()},
                "meta": {h: o.to_json() for h, o in self.meta.items()},
                "rollout": {j: r.to_json() for j, r in self.rollout.items()},
                "reverts": {i: o.to_json() for i, o in self.reverts.items()},
                "fresh": sorted([j, h] for j, h in self.fresh), "canaries": sorted(self.canaries),
                "auto_promote": {j: list(h) for j, h in self.auto_promote.items()},
                "notes": list(self.notes), "update_seq": self.update_seq, "seen_seq": self.seen_seq}

    @classmethod
    def from_json(cls, data):
        return cls(data["bucket_id"], PlanOptions.from_json(data["options"]), dict(data["job_waves"]),
                   [PlanRow.from_json(r) for r in data["rows"]], list(data["errors"]),
                   [Failure.from_json(f) for f in data["failures"]], [Prune.from_json(p) for p in data["prune"]],
                   set(data["dead_workers"]), dict(data["gates"]),
                   {h: _ops(ops) for h, ops in data["cleanup"].items()},
                   {h: Op.from_json(o) for h, o in data["meta"].items()},
                   {j: Rollout.from_json(r) for j, r in data["rollout"].items()},
                   {i: Op.from_json(o) for i, o in data["reverts"].items()},
                   set(map(tuple, data["fresh"])), set(data["canaries"]),
                   {j: list(h) for j, h in (data.get("auto_promote") or {}).items()}, list(data["notes"]),
                   data["update_seq"], data["seen_seq"])


def reconcile(catalog, staged, states, hosts, options=None):
    """Decide every allocation in scope (the arguments are compute_plan's, deploy/plan.py): a ReconcileResult."""
    scope = Scope(catalog, staged, states, hosts, options or {})
    options = PlanOptions(scope.jobs_filter, scope.force, scope.sync_only, sorted(scope.rollback),
                          sorted(scope.promote) if scope.promote else ABSENT, scope.target or ABSENT)
    out = ReconcileResult(scope.bucket_id, options, {name: job.get("deployment_seq", 0) or 0
                                                     for name, job in scope.jobs.items()}, errors=list(scope.errors))
    gate_failed = check_jobs(scope, out)
    decider = Reconciler(scope, out, gate_failed)
    for alloc in scope.allocations_in_scope():
        if scope.target:
            decider.rolling.decide(alloc)
        else:
            decider.decide(alloc)
    if not scope.target:  # a rolling restart holds nothing back, and puts back what it restarted
        hold_for_canaries(scope, out)
    plan_purges(scope, out)
    plan_metadata(scope, out)
    if not scope.target:
        plan_reverts(scope, out)
    return out


# --- phase 1: the jobs in scope ---

def check_jobs(scope, out):
    """Health gates, restart_policy and restart_globs of every job in scope, validated up front: the gates
    into out.gates; returns {job: why its health_check cannot run} (those jobs are not deployed)."""
    gate_failed = {}
    for name, job in sorted(scope.jobs.items()):
        if job.get("removed") or not scope.in_scope_job(name):
            continue
        if "health_gate" in job:  # resolved and validated by build (catalog/service.py: catalog job "health_gate")
            spec, gate_errors = job["health_gate"], []
        else:  # a catalog of an older build, or a check build could not resolve (that job fails, named)
            spec, gate_errors = resolve_health(job)
        if gate_errors:  # only this job is left out; the others deploy and the run ends failed
            gate_failed[name] = gate_errors
            out.failures.append(Failure(name, None, "job %s not deployed: its health_check cannot run: %s"
                                        % (name, "; ".join(gate_errors))))
        if not spec and not gate_errors and hook_events(job):
            spec = dict(HOOK_ONLY_GATE, job=name)  # the batch's hooks run in its gate (hooks/points.py)
        if spec:
            out.gates[name] = dict(spec, **{k: job[k] for k in GATE_TIMING if job.get(k)})  # min_healthy_time, ...
        policy = job.get("restart_policy") or "always"
        if policy not in POLICIES:
            out.errors.append("jobs/%s/manifest.json restart_policy: %r is not one of %s"
                              % (name, policy, ", ".join(POLICIES)))
        for glob in job.get("restart_globs") or []:
            try:
                content.validate_glob(glob)
            except content.GlobError as exc:
                out.errors.append("jobs/%s/manifest.json restart_globs: %s" % (name, exc))
    return gate_failed


# --- phase 2: one decision per allocation ---

class Reconciler:
    """The decision for each allocation in scope: a PlanRow with its action and reason, and its op."""

    def __init__(self, scope, out, gate_failed):
        self.scope, self.out, self.gate_failed = scope, out, gate_failed
        self.rollbacks = Rollbacks(scope, out)
        self.rolling = RollingTarget(scope, out, gate_failed)

    def decide(self, alloc):
        name, host, state = alloc["job"], alloc["worker"], alloc.get("state", "active")
        job = self.scope.jobs.get(name)
        st = self.scope.state(host)
        deployed = promoted(st, name)
        row = PlanRow(name, host, alloc.get("alloc_id"), state, (job or {}).get("deployment_seq", 0),
                      from_version=(deployed or {}).get("version"), to_version=(job or {}).get("version") or ZERO_VERSION)
        self.out.rows.append(row)
        if job is None:
            row.decide("skip", "job is not in the catalog's jobs list (rebuild the catalog)")
            self.out.errors.append("catalog: allocation %s@%s names job %s, which has no job record; run "
                                   "maand.core.build" % (name, host, name))
        elif state == "removed" or host in self.scope.removed_worker_hosts:
            self._decide_removed(row, job, st, deployed)
        elif not st.get("reachable", False):
            row.decide("unreachable", "worker unreachable: %s" % (st.get("error") or "no answer"))
            self.out.failures.append(Failure(name, host, "%s@%s not deployed: worker unreachable (%s)"
                                             % (name, host, st.get("error") or "no answer")))
        else:
            self._decide_reachable(row, job, st, deployed)

    def _decide_reachable(self, row, job, st, deployed):
        """An allocation in scope on a worker that answered."""
        name, host = row.job, row.worker
        cur = self.scope.content.get(name) or {}
        if cur.get("error"):
            row.decide("skip", "cannot read the job tree: %s" % cur["error"])
            self.out.errors.append("job %s: %s" % (name, cur["error"]))
            return
        if row.state == "disabled":
            self._decide_disabled(row, deployed)
        elif name in self.gate_failed:
            row.decide("skip", "not deployed: its health_check cannot run (%s)" % "; ".join(self.gate_failed[name]))
        elif name in self.scope.rollback:
            self.rollbacks.decide(row, job, st, deployed)
        else:
            cur = (cur.get("allocations") or {}).get(host, cur)  # rendered per allocation (deploy/stage.py)
            if cur.get("error"):  # the message is in options["stage_errors"], once for all its workers
                row.decide("skip", "cannot render: %s" % cur["error"])
                return
            self._decide_active(row, job, st, deployed, cur)

    def _decide_removed(self, row, job, st, deployed):
        """A removed allocation, or any allocation of a worker that left workers.json: stop and remove."""
        name, host = row.job, row.worker
        worker_removed = host in self.scope.removed_worker_hosts
        why = ("worker left workers.json" if worker_removed else
               "job left the workspace" if job.get("removed") else
               "worker no longer matches the job's selectors")
        if not st.get("reachable", False):
            self._removed_unreachable(row, st, why, worker_removed)
            return
        if deployed is None and name not in set(st.get("trees") or []):
            row.decide("skip", "%s; nothing deployed there" % why)
            self.out.prune.append(Prune(name, host))
            return
        running = (deployed or {}).get("running")
        todo = "stop, then delete job files (keep data/, logs/)" if running else "delete job files (keep data/, logs/)"
        row.decide("remove", "%s; %s" % (why, todo))
        version = (deployed or {}).get("version") or ZERO_VERSION
        self.out.clean(host, Op.reconcile("remove", host, job=name, target="stop" if running else None,
                                          env=self.scope.alloc_env(name, host, version, version)))

    def _removed_unreachable(self, row, st, why, worker_removed):
        name, host = row.job, row.worker
        if worker_removed:
            row.decide("remove", "%s; worker unreachable, assumed dead (files not cleaned): %s"
                       % (why, st.get("error") or "unreachable"))
            self.out.dead_workers.add(host)
            self.out.prune.append(Prune(name, host))
        else:
            row.decide("unreachable", "%s; worker unreachable, cannot stop/remove: %s"
                       % (why, st.get("error") or "unreachable"))
            self.out.failures.append(Failure(name, host, "cannot remove %s@%s: worker unreachable (%s)"
                                             % (name, host, st.get("error") or "")))

    def _decide_disabled(self, row, deployed):
        name, host = row.job, row.worker
        if not (deployed and deployed.get("running")):
            row.decide("skip", "disabled (not running)")
            return
        row.decide("stop", "disabled (was running)")
        record = dict(deployed)
        record["running"] = False
        cur_version = deployed.get("version") or ZERO_VERSION
        self.out.clean(host, Op.reconcile("stop", host, job=name, target="stop", record=record, promote_now=True,
                                          env=self.scope.alloc_env(name, host, cur_version, cur_version)))

    def _decide_active(self, row, job, st, deployed, cur):
        name, host = row.job, row.worker
        new_version = job.get("version") or ZERO_VERSION
        cur_version = (deployed or {}).get("version") or ZERO_VERSION
        row.hash = cur.get("hash")
        unpromoted_rollback = deployed is not None and name in (st.get("rollback_pending") or [])
        hash_changed = deployed is None or deployed.get("hash") != cur.get("hash") or unpromoted_rollback
        version_changed = deployed is not None and cur_version != new_version
        changed = (content.changed_paths((deployed or {}).get("files") or {}, cur.get("files"))
                   if deployed and hash_changed else [])
        reasons = _active_reasons(deployed, name, st, hash_changed, unpromoted_rollback, changed, version_changed,
                                  cur_version, new_version, cur.get("origins"))
        row.paths = changed
        op = Op.run(name, host, job.get("path"), sync=bool(hash_changed),
                    env=self.scope.alloc_env(name, host, cur_version, new_version),
                    record=state_record(name, row.alloc_id, cur, new_version, True, None),
                    promote_now=name not in self.out.gates)
        rollout = self.out.rollout_of(name)
        if deployed is None and self._adopt(row, op, rollout, st, new_version):
            return
        if deployed is None or not deployed.get("running"):
            self._decide_start(row, op, rollout, st, deployed, reasons)
            return
        dead = self._not_running(name, job, st)
        if dead:  # the worker's `make status` says so (the state read): start it again, new files if any
            reasons.insert(0, dead)
            self._decide_start(row, op, rollout, st, None, reasons)
            return
        if not hash_changed and not version_changed and not self.scope.force:
            row.decide("skip", "unchanged (hash %s, version %s)" % (_short(deployed.get("hash")), cur_version))
            return
        if not hash_changed and not version_changed:
            reasons.append("forced (maand_force)")
        self._decide_upgrade(row, op, rollout, job, changed, hash_changed, version_changed, reasons)

    def _not_running(self, name, job, st):
        """Why a promoted running allocation is not running (its `make status`, asked by the state read: a
        job with a status target that a deploy started), or None. Not for job_control jobs (their status is
        not their Makefile's), nor under maand_sync_only (which starts nothing)."""
        answer = (st.get("status") or {}).get(name) or {}
        if answer.get("running") is not False or self.scope.sync_only or "job_control" in hook_events(job):
            return None
        return "not running (`make status` exit %s on the worker)" % answer.get("rc")

    def _adopt(self, row, op, rollout, st, new_version):
        """An allocation maand deployed and runs (data/maand.db, its tree on the worker, no maand.core record):
        same version -> its files are synced and it is recorded, not restarted. True when handled."""
        name, host = row.job, row.worker
        maand_version = self.scope.adopted.get((name, host))
        if maand_version is None or name not in (st.get("trees") or []):
            return False
        if maand_version != new_version:
            row.paths = []
            op.act("restart", "restart")
            op.env = self.scope.alloc_env(name, host, maand_version, new_version)
            row.decide("restart", "taken over from maand: version %s -> %s" % (maand_version, new_version))
            rollout.upgrade.append(op)
            return True
        op.act("sync", None)
        op.promote_now = True
        row.decide("sync", "taken over from maand (running %s): files synced, not restarted" % new_version)
        rollout.sync.append(op)
        return True

    def _decide_start(self, row, op, rollout, st, deployed, reasons):
        name, host = row.job, row.worker
        if deployed is not None:
            reasons.insert(0, "not running (re-enabled or stopped)")
        if self.scope.sync_only:
            row.decide("start", "; ".join(reasons))
            self.out.errors.append("maand_sync_only: %s@%s needs a start (%s); run the deploy without "
                                   "maand_sync_only" % (name, host, "; ".join(reasons)))
            return
        if name in (st.get("pending") or []):
            reasons.insert(0, "retry: the previous start failed its gate (stop it first)")
        elif deployed is None and name not in (st.get("trees") or []):
            self.out.fresh.add((name, host))
        op.act("start", "start")
        row.decide("start", "; ".join(reasons))
        rollout.start.append(op)

    def _decide_upgrade(self, row, op, rollout, job, changed, hash_changed, version_changed, reasons):
        policy = job.get("restart_policy") or "always"
        action, matched = lifecycle_action(policy, job.get("restart_globs") or [], changed, hash_changed,
                                           version_changed and not hash_changed, self.scope.sync_only)
        if matched:
            reasons.append("restart_globs matched: %s" % _fmt_paths(matched))
        elif action == "reload" and job.get("restart_globs") and hash_changed:
            reasons.append("no restart_globs matched")
        if action == "sync":
            reasons.append("maand_sync_only" if self.scope.sync_only else "restart_policy never: files only")
        op.act(action, None if action == "sync" else action)
        row.decide(action, "; ".join(reasons))
        if action == "sync":
            op.promote_now = True
            rollout.sync.append(op)
        else:
            rollout.upgrade.append(op)


class RollingTarget:
    """A rolling restart (maand.core.job -e maand_target=restart|start|reload, maand_rolling_target): every active
    allocation of the jobs in scope runs the target on its promoted tree (nothing shipped; CURRENT_VERSION =
    NEW_VERSION = the promoted version) in the job's upgrade batches and gate; the gate promotes the same record.
    Disabled and removed allocations, and workers maand_rolling_workers does not name, are left alone."""

    def __init__(self, scope, out, gate_failed):
        self.scope, self.out, self.gate_failed = scope, out, gate_failed
        self.noted = set()

    def decide(self, alloc):
        scope, target = self.scope, self.scope.target
        name, host, state = alloc["job"], alloc["worker"], alloc.get("state", "active")
        job, st = scope.jobs.get(name) or {}, scope.state(host)
        deployed = promoted(st, name)
        row = PlanRow(name, host, alloc.get("alloc_id"), state, job.get("deployment_seq", 0),
                      from_version=(deployed or {}).get("version"),
                      to_version=(deployed or {}).get("version") or ZERO_VERSION)
        self.out.rows.append(row)
        if state != "active" or host in scope.removed_worker_hosts or job.get("removed"):
            row.decide("skip", "%s: left alone by maand_target=%s" % (state, target))
        elif scope.target_workers is not None and host not in scope.target_workers:
            row.decide("skip", "not in maand_job_workers: left alone")
        elif not st.get("reachable", False):
            row.decide("unreachable", "worker unreachable: %s" % (st.get("error") or "no answer"))
            self.out.failures.append(Failure(name, host, "%s@%s: make %s not run: worker unreachable (%s)"
                                             % (name, host, target, st.get("error") or "no answer")))
        elif "job_control" in hook_events(job):
            row.decide("skip", "job_control job: its commands run the target (maand.core.job runs them)")
            self.out.errors.append("maand_rolling_target: job %s has job_control commands, which run its targets "
                                   "all at once (maand.core.job -e maand_job_all_at_once=true)" % name)
        elif name in self.gate_failed:
            row.decide("skip", "not run: its health_check cannot run (%s)" % "; ".join(self.gate_failed[name]))
        elif deployed is None:
            row.decide("skip", "not deployed here: nothing to %s" % target)
            self.out.failures.append(Failure(name, host, "%s@%s: make %s not run: the job was never deployed there "
                                             "(run maand.core.deploy first)" % (name, host, target)))
        else:
            self._roll(row, job, deployed)

    def _roll(self, row, job, deployed):
        name, host, target = row.job, row.worker, self.scope.target
        version = deployed.get("version") or ZERO_VERSION
        op = Op.run(name, host, job.get("path"), sync=False, env=self.scope.alloc_env(name, host, version, version),
                    record=dict(deployed, running=True), promote_now=name not in self.out.gates)
        op.act(target, target)
        row.hash = deployed.get("hash")
        row.decide(target, "rolling %s (maand_target=%s): the deployed tree, no files shipped" % (target, target))
        self.out.rollout_of(name).upgrade.append(op)
        cur = self.scope.content.get(name) or {}
        cur = (cur.get("allocations") or {}).get(host, cur)
        changed = deployed.get("hash") != cur.get("hash") or version != (job.get("version") or ZERO_VERSION)
        if changed and name not in self.noted:
            self.noted.add(name)
            self.out.notes.append("job %s: the workspace's changes are not shipped by maand_target=%s; deploy them "
                                  "with maand.core.deploy -e maand_jobs=%s" % (name, target, name))


def _active_reasons(deployed, name, st, hash_changed, unpromoted_rollback, changed, version_changed, cur_version,
                    new_version, origins):
    """Why an active allocation changes: its content, version and rollback history."""
    reasons = _change_reasons(deployed, hash_changed and not unpromoted_rollback, changed, version_changed,
                              cur_version, new_version, origins)
    if unpromoted_rollback:
        reasons.insert(0, "a rollback was not promoted (its gate failed): the workspace's files go back")
    if deployed is not None and deployed.get("rolled_back_from"):
        reasons.append("roll forward after the rollback from %s" % deployed["rolled_back_from"])
    if deployed is not None and deployed.get("reverted_from"):
        reasons.append("%s was reverted here before" % deployed["reverted_from"])
    return reasons


class Rollbacks:
    """maand_rollback: the worker's previous promoted tree and record go back, through the job's rolling
    batches and gate (a restart, or a start when it is not running). When the job's latest attempt failed
    somewhere, the recovery decides instead (_decide_recovery)."""

    def __init__(self, scope, out):
        self.scope, self.out = scope, out

    def decide(self, row, job, st, deployed):
        failed = self.scope.failed_attempts(row.job)
        if failed:
            self._decide_recovery(row, job, st, deployed, failed)
            return
        self._to_previous(row, job, st, deployed)

    def _decide_recovery(self, row, job, st, deployed, failed):
        """maand_rollback after a failed attempt: where it failed, the promoted tree (the last one that
        passed its gate) goes back and restarts through the gate; where the new version was promoted, the
        previous one goes back; workers that never got the new version are left alone."""
        name, host = row.job, row.worker
        tried = "/".join(sorted({str(a.get("version") or ZERO_VERSION) for a in failed.values()}))
        if host in failed:
            self._restore_promoted(row, job, st, deployed, failed[host])
            return
        if deployed is None:
            row.decide("skip", "rollback: nothing promoted here (left alone; the next deploy starts it)")
            return
        cur = self.scope.content.get(name) or {}
        cur = (cur.get("allocations") or {}).get(host, cur)
        if (deployed.get("hash"), deployed.get("version")) != (cur.get("hash"), job.get("version") or ZERO_VERSION):
            row.decide("skip", "rollback: left alone (runs %s; %s never reached it)"
                       % (deployed.get("version") or ZERO_VERSION, tried))
            return
        self._to_previous(row, job, st, deployed)

    def _restore_promoted(self, row, job, st, deployed, attempt):
        """The promoted tree (history/<job>/current) back in place of a failed attempt, restarted."""
        name, host = row.job, row.worker
        version = deployed.get("version") or ZERO_VERSION
        failed_version = attempt.get("version") or ZERO_VERSION
        info = attempt.get("attempt") or {}
        why = ("%s failed its gate" % failed_version if info.get("ok") else
               "make %s of %s failed" % (info.get("target") or "restart", failed_version))
        if name not in (st.get("kept") or []):
            row.decide("skip", "rollback: no copy of the promoted tree on the worker")
            self.out.errors.append("maand_rollback: %s@%s: %s, but the worker keeps no copy of the promoted %s tree "
                                   "(history/%s/current, kept from this release on); deploy the old version from the "
                                   "workspace instead" % (name, host, why, version, name))
            return
        record = dict(deployed, running=True, update_seq=None, reverted_from=failed_version)
        record.pop("rolled_back_from", None)
        row.paths = content.changed_paths(attempt.get("files") or {}, deployed.get("files") or {})
        row.hash, row.from_version, row.to_version = deployed.get("hash"), failed_version, version
        row.decide("rollback", "rollback: restore %s (%s); the catalog stays at %s, the next deploy rolls forward "
                   "again" % (version, why, job.get("version") or ZERO_VERSION))
        self.out.rollout_of(name).upgrade.append(Op.run(
            name, host, job.get("path"), restore="current", action="rollback", target="restart",
            env=self.scope.alloc_env(name, host, failed_version, version), record=record,
            promote_now=name not in self.out.gates))

    def _to_previous(self, row, job, st, deployed):
        """The version promoted before the current one back (history/<job>/previous on the worker)."""
        name, host = row.job, row.worker
        previous = (st.get("previous") or {}).get(name)
        if not self._has_previous(row, deployed, previous):
            return
        cur_version = deployed.get("version") or ZERO_VERSION
        old_version = previous.get("version") or ZERO_VERSION
        record = dict(previous, running=True, update_seq=None, rolled_back_from=cur_version)
        record.pop("rollback", None)
        record.pop("reverted_from", None)
        target = "restart" if deployed.get("running") else "start"
        row.paths = content.changed_paths(deployed.get("files") or {}, previous.get("files") or {})
        row.hash, row.to_version = previous.get("hash"), old_version
        row.decide("rollback", "rollback: %s %s -> %s (hash %s -> %s; %s); the catalog stays at %s, the next deploy "
                   "rolls forward again" % (name, cur_version, old_version, _short(deployed.get("hash")),
                                            _short(previous.get("hash")), target, job.get("version") or ZERO_VERSION))
        self.out.rollout_of(name).upgrade.append(Op.run(
            name, host, job.get("path"), restore=True, action="rollback", target=target,
            env=self.scope.alloc_env(name, host, cur_version, old_version), record=record,
            promote_now=name not in self.out.gates))

    def _has_previous(self, row, deployed, previous):
        """Whether there is a previous version to roll back to; if not, the row is skipped and the deploy refused."""
        name, host = row.job, row.worker
        if deployed is None:
            row.decide("skip", "rollback: nothing deployed here")
            self.out.errors.append("maand_rollback: %s@%s has nothing deployed, so nothing to roll back" % (name, host))
            return False
        if not isinstance(previous, dict) or previous.get("format") != STATE_FORMAT:
            row.decide("skip", "rollback: no previous version on the worker")
            self.out.errors.append(
                "maand_rollback: %s@%s has no previous version to roll back to (a worker keeps the tree of the "
                "version promoted before the current one, from the first deploy that promotes a new version with "
                "this release on); deploy the old version from the workspace instead" % (name, host))
            return False
        return True


# --- phase 2b: canaries ---

def hold_for_canaries(scope, out):
    """`canary: N` (Nomad's canary + promote): an upgrade of the job rolls out to N allocations
    (counting those already on the new version), gated as usual; the others are held (action "hold")
    until a deploy with -e maand_promote=<job> rolls them out in the job's normal batches."""
    rows = {(r.job, r.worker): r for r in out.rows}
    for name, rollout in sorted(out.rollout.items()):
        size = int((scope.jobs.get(name) or {}).get("canary") or 0)
        upgrades = [o for o in rollout.upgrade if not o.restore]
        if size <= 0 or not upgrades:
            continue
        if name in scope.promote:
            out.notes.append("job %s: maand_promote: the %d allocation(s) held after the canary roll out"
                             % (name, len(upgrades)))
            continue
        version = scope.jobs[name].get("version") or ZERO_VERSION
        done = sum(1 for r in out.rows if r.job == name and r.action == "skip" and r.reason.startswith("unchanged"))
        keep = upgrades[:max(0, size - done)]
        held = upgrades[len(keep):]
        if not held:
            continue
        out.canaries.add(name)
        if (scope.jobs.get(name) or {}).get("auto_promote"):
            _auto_promote(out, name, size, keep, held, rows)
            continue
        for o in held:
            rollout.upgrade.remove(o)
            row = rows[(name, o.host)]
            row.decide("hold", "canary: waits for -e maand_promote=%s (%s)" % (name, row.reason))
        out.notes.append("job %s: canary %d: %d allocation(s) on %s after this deploy, %d held until a deploy with "
                         "-e maand_promote=%s" % (name, size, done + len(keep), version, len(held), name))


def _auto_promote(out, name, size, keep, held, rows):
    """`auto_promote: true`: the canaries roll out first (their own batches, gated, with min_healthy_time), then the
    held allocations in the job's upgrade batches of the same deploy; a canary that fails stops the rest."""
    out.auto_promote[name] = [o.host for o in keep]
    for o in held:
        row = rows[(name, o.host)]
        row.reason = "%s; after the canary (auto_promote)" % row.reason
    if keep:
        out.notes.append("job %s: canary %d, auto_promote: %d canary allocation(s) first, then the other %d in this "
                         "deploy once the canaries passed their gate" % (name, size, len(keep), len(held)))
    else:
        out.notes.append("job %s: canary %d, auto_promote: the canaries already run this version; the other %d roll "
                         "out" % (name, size, len(held)))


# --- phase 3: workers that left workers.json ---

def plan_purges(scope, out):
    """After their allocations, purge /opt/worker/<bucket_id> of removed workers (keeps jobs/*/data, logs)."""
    for host in sorted(scope.removed_worker_hosts):
        st = scope.state(host)
        if not st.get("reachable"):
            out.dead_workers.add(host)
            if scope.jobs_filter is None:
                out.rows.append(_purge_row(host, "worker left workers.json; unreachable, assumed dead (%s)"
                                           % (st.get("error") or "")))
            continue
        if scope.jobs_filter is not None:
            continue  # a filtered deploy cleans only the jobs it names
        if st.get("worker") is not None or st.get("deployed") or st.get("trees"):
            out.rows.append(_purge_row(host, "worker left workers.json: delete %s except jobs/*/data and jobs/*/logs"
                                       % scope.root))
            out.clean(host, Op.reconcile("purge", host))


def _purge_row(host, reason):
    return PlanRow(None, host, None, "removed", None, from_version=None, to_version=None, action="purge",
                   reason=reason)


# --- phase 4: worker metadata (worker.json / jobs.json) and the update_seq ---

def desired_meta(scope, host, seq):
    """(worker.json, jobs.json) the catalog wants on host, with update_seq seq."""
    worker = scope.workers.get(host) or {}
    # maand's worker.json (deploy/types.go WorkerData: its bin/worker.py checks bucket_id, worker_id,
    # update_seq) with maand.core's "worker" beside it
    worker_json = {"bucket_id": scope.bucket_id, "worker": host, "labels": sorted(worker.get("labels") or []),
                   "update_seq": seq, "worker_ip": host, "worker_id": worker_id(worker, host)}
    entries = []
    for a in scope.allocations_on(host):
        if a.get("state") == "removed":
            continue
        entries.append({"job": a["job"], "alloc_id": a.get("alloc_id"),
                        "disabled": 1 if a.get("state") == "disabled" else 0,
                        "version": (scope.jobs.get(a["job"]) or {}).get("version") or ZERO_VERSION})
    entries.sort(key=lambda e: e["job"])
    # maand's jobs.json: a list of {"job", "disabled": 0|1} (its bin/runner.py reads it), maand.core's
    # alloc_id and version beside them in each entry
    return worker_json, entries


def _meta_hosts(scope):
    """Reachable catalog workers in scope that did not leave workers.json, sorted."""
    return [h for h in sorted(scope.hosts - scope.removed_worker_hosts)
            if scope.state(h).get("reachable") and h in scope.workers]


def _meta_stale(scope, host):
    """True when the worker's metadata differs from the catalog's, update_seq aside."""
    st = scope.state(host)
    want_worker, want_jobs = desired_meta(scope, host, 0)
    have_worker = dict(st.get("worker") or {})
    have_worker["update_seq"] = 0
    return have_worker != want_worker or st.get("jobs") != want_jobs


def plan_metadata(scope, out):
    """Bump update_seq when anything changes; write metadata where it differs; stamp the records."""
    out.seen_seq = seen_update_seq({h: scope.state(h) for h in scope.hosts}, scope.catalog)
    has_job_work = bool(out.cleanup) or (any(out.rollout.values()) and not scope.target)  # a restart: same records
    bump = has_job_work or any(_meta_stale(scope, h) for h in _meta_hosts(scope))
    out.update_seq = out.seen_seq + 1 if bump else out.seen_seq
    if bump:
        for host in _meta_hosts(scope):
            st = scope.state(host)
            want_worker, want_jobs = desired_meta(scope, host, out.update_seq)
            if st.get("worker") != want_worker or st.get("jobs") != want_jobs:
                out.meta[host] = Op.reconcile("meta", host, worker_json=want_worker, jobs_json=want_jobs)
    for rollout in out.rollout.values() if not scope.target else ():
        for op in rollout.ops():
            op.record["update_seq"] = out.update_seq


# --- phase 5: auto_revert ---

def plan_reverts(scope, out):
    """auto_revert: the conditional revert of each upgrade op that restarts or reloads a promoted tree
    (deploy/schedule.py places it after the op's batch; the run issues it only when that batch failed)."""
    for name, rollout in sorted(out.rollout.items()):
        if not (scope.jobs.get(name) or {}).get("auto_revert"):
            continue
        for op in rollout.upgrade:
            deployed = promoted(scope.state(op.host), name)
            if op.action in ("restart", "reload") and not op.restore and deployed is not None:
                out.reverts[op.id] = revert_op(scope, out, name, op, deployed)


def revert_op(scope, out, name, op, deployed):
    """The conditional revert of one upgrade op: the promoted tree and record back (reverted_from)."""
    version = deployed.get("version") or ZERO_VERSION
    failed_version = (op.record or {}).get("version") or ZERO_VERSION
    record = dict(deployed, running=True, update_seq=out.update_seq, reverted_from=failed_version)
    record.pop("rolled_back_from", None)
    return Op("%s@%s/revert" % (name, op.host), "run", op.host, job=name, src=op.src, restore="current",
              action="revert", target="restart", env=scope.alloc_env(name, op.host, failed_version, version),
              record=record, promote_now=name not in out.gates)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy plan's typed records (pure Python, no I/O): what the run folder's plan.json holds.

``Plan`` (the whole plan), ``PlanRow`` (one allocation's action and reason), ``Step`` (ops run side by
side, then gates), ``Op`` (one operation of the worker agent), ``Gate`` (a batch's health gate and hooks),
``Failure``, ``Prune``, ``PlanOptions`` and ``PreDeploy`` (what the run needs for the pre_deploy hooks);
``Rerender`` is what a pre_deploy hook changed at run time (deploy/plan.rerendered applies it).

Each record has ``to_json()`` (the exact JSON of plan.json, docs/contract.md; the golden plans of
tests/data/deploy_plan/ keep it unchanged) and ``from_json()``; ``from_json(to_json())`` gives an
equal record. A key the JSON leaves out (not the same as null) is ``ABSENT`` in the record.

The planner builds them (deploy/reconcile.py decides, deploy/schedule.py schedules, deploy/plan.py
assembles); the stages after it (deploy/pin.py, deploy/pre_deploy.py, deploy/plan.with_job_specs) return a
new ``Plan`` (``dataclasses.replace``) and edit none in place.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

from ..errors import MaandError

PRE_DEPLOY = "pre_deploy"  # plan.json's key of the PreDeploy record
ACTIONS = ("start", "restart", "reload", "sync", "rollback", "hold", "skip", "stop", "remove", "purge", "unreachable")
ZERO_VERSION = "0.0.0"
STATE_FORMAT = 1


class PlanError(MaandError):
    """Input that cannot be planned at all (a broken catalog), or JSON that is not a plan."""

    kind = "input"


class _Absent:
    """A field whose key the JSON leaves out (not the same as null)."""

    def __repr__(self):
        return "ABSENT"

    def __bool__(self):
        return False

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


ABSENT = _Absent()


def _put(out, key, value):
    """out[key] = value unless value is ABSENT (then the key stays out)."""
    if value is not ABSENT:
        out[key] = value
    return out


_FIELDS = {}  # record class -> attrgetter of its fields, in order


def _but(record, changes):
    """A copy of a record with changes (dataclasses.replace without its checks: the planner's hot path)."""
    cls = type(record)
    if cls not in _FIELDS:
        _FIELDS[cls] = operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))
    new = cls(*_FIELDS[cls](record))
    for name, value in changes.items():
        setattr(new, name, value)
    return new


def _field(data, key, what):
    """data[key], or PlanError naming the record and the key."""
    try:
        return data[key]
    except (KeyError, TypeError):
        raise PlanError("%s: %r is missing (not a plan of this release)" % (what, key)) from None


@dataclasses.dataclass(slots=True)
class PlanRow:
    """plan["rows"][i]: what the deploy does to one allocation (or, job None, to a worker it purges), and why."""

    job: str | None
    worker: str
    alloc_id: str | None
    state: str
    wave: int | None
    from_version: str | None
    to_version: str | None
    paths: list = dataclasses.field(default_factory=list)  # changed (or, for a rollback, restored) files
    action: str | None = None  # one of ACTIONS, set by the decision
    reason: str | None = None
    hash: Any = ABSENT  # the tree hash it ships; the key is absent for rows that ship nothing
    batch: str | None = None  # the rolling batch label, once scheduled (absent when not)

    def decide(self, action, reason):
        self.action, self.reason = action, reason

    def but(self, **changes):
        """A copy with changes."""
        return _but(self, changes)

    def to_json(self):
        out = {"job": self.job, "worker": self.worker, "alloc_id": self.alloc_id, "state": self.state,
               "wave": self.wave, "paths": list(self.paths), "from_version": self.from_version,
               "to_version": self.to_version}
        _put(out, "hash", self.hash)
        out.update(action=self.action, reason=self.reason)
        if self.batch is not None:
            out["batch"] = self.batch
        return out

    @classmethod
    def from_json(cls, data):
        get = data.get
        return cls(get("job"), _field(data, "worker", "plan row"), get("alloc_id"), get("state"), get("wave"),
                   get("from_version"), get("to_version"), list(get("paths") or []), get("action"), get("reason"),
                   get("hash", ABSENT), get("batch"))


@dataclasses.dataclass(slots=True)
class Op:
    """plan["steps"][i]["ops"][host][j]: one operation of the worker agent (worker/agent.py) in a step.

    kind "run" ships a job tree (src) and runs its target; "stop", "remove", "purge" and "meta" (worker.json
    and jobs.json) reconcile in step 0 (meta ops ride in each host's first wave step when nothing else reconciles);
    "files" ships the tree of a later step's fresh start early (of: that run op's id), see deploy/schedule.py.
    """

    id: str
    kind: str
    host: str
    job: str | None = None
    action: str | None = None
    target: str | None = None  # the make target, or None (files only)
    sync: bool = False
    env: dict = dataclasses.field(default_factory=dict)
    record: dict | None = None  # the state record promoted on the worker (reconcile.state_record)
    promote_now: bool = False  # promoted after the op, not after the batch's gate
    src: str | None = None  # run ops: the job folder (the staged tree once prepared)
    restore: Any = False  # run ops of a rollback: True = the previous tree goes back, "current" = the promoted one
    revert_of: int | None = None  # auto_revert ops: the step whose failure of this job they undo (else never run)
    worker_json: dict | None = None  # meta ops
    jobs_json: list | None = None  # meta ops
    of: str | None = None  # files ops: the id of the run op whose files they ship
    held: bool = False  # run ops of a start batch before the job's last: promoted after the gate of the last
    slots: Any = ABSENT  # the worker's slots (deploy/plan.with_job_specs), on every op once prepared
    spec: Any = ABSENT  # the job spec's run fields (jobspec/deploy.op_spec), when it has any

    @classmethod
    def reconcile(cls, kind, host, job=None, **kw):
        """A step 0 op: "<job>@<host>" (stop, remove) or "<kind>@<host>" (purge, meta)."""
        return cls("%s@%s" % (job or kind, host), kind, host, job=job, action=kind, **kw)

    @classmethod
    def run(cls, job, host, src, **kw):
        return cls("%s@%s" % (job, host), "run", host, job=job, src=src, **kw)

    @classmethod
    def files(cls, run_op):
        """The files of run_op, shipped in an earlier step (run_op then no longer syncs)."""
        return cls(run_op.id + "/files", "files", run_op.host, job=run_op.job, action="sync", sync=True,
                   src=run_op.src, of=run_op.id)

    def act(self, action, target):
        self.action, self.target = action, target

    def but(self, **changes):
        """A copy with changes."""
        return _but(self, changes)

    def to_json(self):
        if self.kind == "run":
            out = {"id": self.id, "kind": self.kind, "job": self.job, "host": self.host, "src": self.src,
                   "sync": self.sync, "env": self.env, "record": self.record, "promote_now": self.promote_now,
                   "action": self.action, "target": self.target}
            if self.restore:
                out["restore"] = self.restore
            if self.revert_of is not None:
                out["revert_of"] = self.revert_of
            if self.held:
                out["held"] = True
        else:
            out = {"id": self.id, "kind": self.kind, "job": self.job, "host": self.host, "action": self.action,
                   "target": self.target, "sync": self.sync, "env": self.env, "record": self.record,
                   "promote_now": self.promote_now}
            if self.kind == "meta":
                out.update(worker_json=self.worker_json, jobs_json=self.jobs_json)
            if self.kind == "files":
                out.update(src=self.src, of=self.of)
        _put(out, "slots", self.slots)
        return _put(out, "spec", self.spec)

    @classmethod
    def from_json(cls, data):
        get = data.get
        return cls(_field(data, "id", "op"), _field(data, "kind", "op"), _field(data, "host", "op"), job=get("job"),
                   action=get("action"), target=get("target"), sync=get("sync", False), env=get("env") or {},
                   record=get("record"), promote_now=get("promote_now", False), src=get("src"),
                   restore=get("restore", False), revert_of=get("revert_of"), worker_json=get("worker_json"),
                   jobs_json=get("jobs_json"), of=get("of"), held=get("held", False), slots=get("slots", ABSENT),
                   spec=get("spec", ABSENT))


GATE_SPEC = ("job", "checks", "timeout_seconds", "attempts", "interval_seconds")  # bucket/job_checks.resolve_health
GATE_TIMING = ("min_healthy_time", "progress_deadline")  # the manifest's, only when set (deploy/reconcile.check_jobs)


@dataclasses.dataclass(slots=True)
class Gate:
    """plan["steps"][i]["gates"][j]: after a batch, the job's health gate (its probes, deploy/gate.py) and the
    job's commands (hooks/points.py) on the batch's hosts. The first fields are the job's gate spec as build
    resolved it (bucket/job_checks.resolve_health; any other key of the spec rides in ``more``)."""

    job: Any = ABSENT
    checks: Any = ABSENT  # the probes; [] when only the batch's hooks run
    timeout_seconds: Any = ABSENT
    attempts: Any = ABSENT
    interval_seconds: Any = ABSENT
    min_healthy_time: Any = ABSENT  # seconds every probe must keep passing after the gate passed
    progress_deadline: Any = ABSENT  # seconds a batch of the job may take to make progress (deploy/run_state.py)
    hosts: list = dataclasses.field(default_factory=list)  # the hosts probed (and whose hooks run)
    label: Any = ABSENT  # the batch it follows, when hosts span several (maand's gate after the last start batch)
    hooks: Any = ABSENT  # {"phase", "batch_index", ...} or {"job_control": True, ...}: the job's commands
    revert: Any = ABSENT  # True: the gate of an auto_revert
    revert_of: Any = ABSENT  # with revert: the step whose failure it undoes
    more: dict = dataclasses.field(default_factory=dict)

    def but(self, **changes):
        """A copy with changes."""
        return _but(self, changes)

    def on(self, hosts, **changes):
        """A copy of this gate (a job's spec, Gate.from_json) on hosts, with changes."""
        return _but(self, dict(changes, hosts=list(hosts)))

    def to_json(self):
        out = dict(self.more)
        for name in GATE_SPEC + GATE_TIMING:
            _put(out, name, getattr(self, name))
        out["hosts"] = self.hosts
        for name in ("label", "hooks", "revert", "revert_of"):
            _put(out, name, getattr(self, name))
        return out

    @classmethod
    def from_json(cls, data):
        known = GATE_SPEC + GATE_TIMING + ("hosts", "label", "hooks", "revert", "revert_of")
        gate = cls(**{k: data[k] for k in known if k in data and k != "hosts"})
        gate.hosts = data.get("hosts") or []
        gate.more = {k: v for k, v in data.items() if k not in known}
        return gate


@dataclasses.dataclass(slots=True)
class Step:
    """plan["steps"][i]: ops run side by side on their hosts, then the gates of the batches in it."""

    index: int
    wave: int | None
    last_in_wave: bool
    label: str
    jobs: list
    ops: dict  # host -> [Op]
    gates: list  # [Gate]

    def to_json(self):
        return {"index": self.index, "wave": self.wave, "last_in_wave": self.last_in_wave, "label": self.label,
                "jobs": self.jobs, "ops": {host: [o.to_json() for o in ops] for host, ops in self.ops.items()},
                "gates": [g.to_json() for g in self.gates]}

    @classmethod
    def from_json(cls, data):
        return cls(_field(data, "index", "step"), data.get("wave"), data.get("last_in_wave", False),
                   data.get("label", ""), list(data.get("jobs") or []),
                   {host: [Op.from_json(o) for o in ops] for host, ops in (data.get("ops") or {}).items()},
                   [Gate.from_json(g) for g in data.get("gates") or []])


@dataclasses.dataclass(slots=True)
class Failure:
    """plan["failures"][i]: an allocation (or, worker None, a whole job) this deploy cannot deploy, and why."""

    job: str
    worker: str | None
    msg: str

    def to_json(self):
        return {"job": self.job, "worker": self.worker, "msg": self.msg}

    @classmethod
    def from_json(cls, data):
        return cls(data.get("job"), data.get("worker"), _field(data, "msg", "failure"))


@dataclasses.dataclass(slots=True)
class Prune:
    """plan["prune"][i]: a removed allocation whose catalog row goes after this deploy (nothing left on its worker)."""

    job: str
    worker: str

    def to_json(self):
        return {"job": self.job, "worker": self.worker}

    @classmethod
    def from_json(cls, data):
        return cls(_field(data, "job", "prune"), _field(data, "worker", "prune"))


@dataclasses.dataclass(slots=True)
class PlanOptions:
    """plan["options"]: the options the plan was computed with (jobs: the maand_jobs filter, None = all)."""

    jobs: list | None = None
    force: bool = False
    sync_only: bool = False
    rollback: list = dataclasses.field(default_factory=list)
    promote: Any = ABSENT  # the maand_promote jobs; absent when none
    target: Any = ABSENT  # a rolling restart's make target (maand.core.job); absent for a deploy

    def to_json(self):
        out = {"jobs": self.jobs, "force": self.force, "sync_only": self.sync_only, "rollback": self.rollback}
        return _put(_put(out, "promote", self.promote), "target", self.target)

    @classmethod
    def from_json(cls, data):
        return cls(data.get("jobs"), data.get("force", False), data.get("sync_only", False),
                   list(data.get("rollback") or []), data.get("promote", ABSENT), data.get("target", ABSENT))


@dataclasses.dataclass(slots=True)
class PreDeploy:
    """plan["pre_deploy"]: the jobs with pre_deploy hooks (hook order) and their waves, what the plan rendered
    for each of their allocations ({job: {host: hash}}, only jobs whose allocations render), the versions and
    update_seq they rendered with, whether the plan is pinned, the restart_globs of reload jobs and the
    rollout_order each hook had in the KV before the run (deploy/pre_deploy.py)."""

    jobs: list
    waves: dict
    rendered: dict
    versions: dict
    update_seq: int
    pinned: bool
    restart_globs: dict
    rollout_orders: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        return {"jobs": self.jobs, "waves": self.waves, "rendered": self.rendered, "versions": self.versions,
                "update_seq": self.update_seq, "pinned": self.pinned, "restart_globs": self.restart_globs,
                "rollout_orders": self.rollout_orders}

    @classmethod
    def from_json(cls, data):
        data = data or {}
        return cls(list(data.get("jobs") or []), dict(data.get("waves") or {}), dict(data.get("rendered") or {}),
                   dict(data.get("versions") or {}), data.get("update_seq") or 0, bool(data.get("pinned")),
                   dict(data.get("restart_globs") or {}), dict(data.get("rollout_orders") or {}))


@dataclasses.dataclass(frozen=True, slots=True)
class Rerender:
    """What a job's pre_deploy hooks changed on one allocation at run time (deploy/pre_deploy.apply): its new
    tree hash and files, the paths that differ from the planned record, and (once staged) the staged tree."""

    job: str
    host: str
    op_id: str  # the run op that rolls the job out on host
    hash: str
    files: dict
    paths: list
    src: str | None = None

    def to_json(self):
        return {"job": self.job, "host": self.host, "op_id": self.op_id, "hash": self.hash, "files": self.files,
                "paths": self.paths, "src": self.src}

    @classmethod
    def from_json(cls, data):
        return cls(data["job"], data["host"], data["op_id"], data["hash"], dict(data.get("files") or {}),
                   list(data.get("paths") or []), data.get("src"))


PLAN_KEYS = ("bucket_id", "update_seq", "previous_update_seq", "options", "rows", "steps", "errors", "failures",
             "prune", "dead_workers", "job_waves", "has_work", "lines")


@dataclasses.dataclass(slots=True)
class Plan:
    """The deploy plan (plan.json): rows, steps, refusals and failures, and the lines --check prints.

    Built by deploy/plan.build; plan_hash is stamped by deploy/pin.stamp, pre_deploy by
    deploy/pre_deploy.attach (absent until then, and absent from the JSON when not set)."""

    bucket_id: str
    update_seq: int
    previous_update_seq: int
    options: PlanOptions
    rows: list  # [PlanRow]
    steps: list  # [Step]; [] when the plan has errors
    errors: list  # [str]: why the whole deploy is refused
    failures: list  # [Failure]
    prune: list  # [Prune]
    dead_workers: list  # [host]: removed workers assumed dead
    job_waves: dict  # {job: deployment_seq} of every job in the catalog
    has_work: bool
    lines: list = dataclasses.field(default_factory=list)  # [str]
    plan_hash: Any = ABSENT  # sha256 of the plan's summary (deploy/pin.plan_digest)
    pre_deploy: Any = ABSENT  # PreDeploy, when jobs in scope have pre_deploy hooks

    def replace(self, **changes):
        """A new plan with changes (the record itself is never edited once built)."""
        return dataclasses.replace(self, **changes)

    def to_json(self):
        out = {"bucket_id": self.bucket_id, "update_seq": self.update_seq,
               "previous_update_seq": self.previous_update_seq, "options": self.options.to_json(),
               "rows": [r.to_json() for r in self.rows], "steps": [s.to_json() for s in self.steps],
               "errors": list(self.errors), "failures": [f.to_json() for f in self.failures],
               "prune": [p.to_json() for p in self.prune], "dead_workers": list(self.dead_workers),
               "job_waves": self.job_waves, "has_work": self.has_work, "lines": list(self.lines)}
        _put(out, "plan_hash", self.plan_hash)
        return _put(out, "pre_deploy", self.pre_deploy.to_json() if self.pre_deploy is not ABSENT else ABSENT)

    @classmethod
    def from_json(cls, data):
        if not isinstance(data, dict):
            raise PlanError("a plan is a JSON object, not %s" % type(data).__name__)
        missing = [k for k in PLAN_KEYS if k not in data]
        if missing:
            raise PlanError("plan: %s missing (not a plan of this release)" % ", ".join(missing))
        pre = data.get("pre_deploy", ABSENT)
        return cls(data["bucket_id"], data["update_seq"], data["previous_update_seq"],
                   PlanOptions.from_json(data["options"]), [PlanRow.from_json(r) for r in data["rows"]],
                   [Step.from_json(s) for s in data["steps"]], list(data["errors"]),
                   [Failure.from_json(f) for f in data["failures"]], [Prune.from_json(p) for p in data["prune"]],
                   list(data["dead_workers"]), dict(data["job_waves"]), bool(data["has_work"]), list(data["lines"]),
                   data.get("plan_hash", ABSENT), PreDeploy.from_json(pre) if pre is not ABSENT else ABSENT)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy plan: what a deploy does to every allocation, and in which order (pure Python).

Inputs are plain data: the catalog (`data/catalog.json`), the content of every job tree hashed on
the controller (`bucket/content.hash_tree`), and what each worker reported about its promoted state
(`/opt/worker/<bucket_id>/deploy/<job>.json`, one read per host). The output is a JSON-able dict:

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

Inside the planner, rows, operations and steps are typed records (`PlanRow`, `Op`, `Step`); their
`to_json` gives the plan's JSON, the only shape that leaves this module (tests/unit/plugin_utils/deploy/test_deploy_plan_golden.py
keeps it unchanged).

Nothing here performs I/O.
"""

from __future__ import annotations

import dataclasses
import itertools

from ..worker import layout as _layout
from ..bucket import content as _content
from ..kv import functions as _functions
from ..worker import agent as _agent
from ..bucket.job_checks import resolve_health
from ..bucket.problems import did_you_mean
from ..errors import MaandError

ACTIONS = ("start", "restart", "reload", "sync", "rollback", "hold", "skip", "stop", "remove", "purge", "unreachable")
POLICIES = ("always", "reload", "never")
START_GATES = ("last_batch", "every_batch")  # the manifest's start_gate: maand's single gate after the starts, or one per batch
ZERO_VERSION = "0.0.0"
STATE_FORMAT = 1
ENV_PREFIX = _agent.ENV_PREFIX  # content pseudo-paths of a job spec's environment (jobspec/deploy.py)


class PlanError(MaandError):
    """Input that cannot be planned at all (a broken catalog)."""


# --- small pure helpers ---------------------------------------------------------------------------

def batches(items, size):
    """Split items into consecutive batches of at most size (0 or less = one batch of everything).

    Every item appears exactly once, in the original order.
    """
    items = list(items)
    if not items:
        return []
    if size is None or size <= 0 or size >= len(items):
        return [items]
    return [items[i:i + size] for i in range(0, len(items), size)]


def parse_jobs_filter(value, known_jobs):
    """`maand_jobs` as given by the user (None, "a,b" or a list) -> (sorted set or None, errors)."""
    if value is None or value == "" or value == []:
        return None, []
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)):
        names = []
        for v in value:
            if not isinstance(v, str):
                return None, ["maand_jobs: %r is not a job name; give a list of names or a comma-separated string" % (v,)]
            names.extend(x.strip() for x in v.split(","))
    else:
        return None, ["maand_jobs: expected a list of job names or a comma-separated string, got %s" % type(value).__name__]
    names = [n for n in names if n]
    unknown = sorted(set(names) - set(known_jobs))
    if unknown:
        named = ", ".join(name + did_you_mean(name, known_jobs) for name in unknown)
        return None, ["maand_jobs: unknown job(s) %s; jobs in the catalog: %s" % (
            named, ", ".join(sorted(known_jobs)) or "(none)")]
    return sorted(set(names)), []


def parse_rollback(value, known_jobs, jobs_filter, options):
    """`maand_rollback` (None, "a,b" or a list) -> (set of jobs, errors); it cannot be combined with
    maand_force or maand_sync_only, and maand_jobs, when given, must name the same jobs."""
    names, errors = parse_jobs_filter(value, known_jobs)
    if errors:
        return set(), [e.replace("maand_jobs:", "maand_rollback:", 1) for e in errors]
    if not names:
        return set(), []
    gone = [n for n in names if (known_jobs.get(n) or {}).get("removed")]
    if gone:
        errors.append("maand_rollback: job(s) %s left the workspace; a rollback needs a job that is still deployed "
                      "(put its folder back and build)" % ", ".join(gone))
    bad = [k for k in ("force", "sync_only") if options.get(k)]
    if bad:
        errors.append("maand_rollback cannot be combined with %s (a rollback restores the previous tree as it was)"
                      % " or ".join("maand_" + k for k in bad))
    if jobs_filter is not None and set(jobs_filter) != set(names):
        errors.append("maand_rollback names %s but maand_jobs names %s; a rollback deploys only the jobs it "
                      "rolls back (leave maand_jobs out)" % (",".join(names), ",".join(jobs_filter)))
    return set(names), errors


def parse_promote(value, known_jobs):
    """`maand_promote` (None, "a,b" or a list) -> (set of jobs, errors): jobs with `canary` whose held
    allocations this deploy rolls out."""
    names, errors = parse_jobs_filter(value, known_jobs)
    if errors:
        return set(), [e.replace("maand_jobs:", "maand_promote:", 1) for e in errors]
    plain = [n for n in names or [] if not int((known_jobs.get(n) or {}).get("canary") or 0)]
    if plain:
        errors.append("maand_promote: job(s) %s have no canary in their manifest; nothing waits for a promotion "
                      "(deploy without maand_promote)" % ", ".join(plain))
    return set(names or []), errors


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
        matched = _content.match_any(globs, changed)
        if matched:
            return "restart", matched
        return "reload", []
    return "restart", []


HOOK_EVENTS = ("job_control", "after_allocation_started", "health_check", "post_deploy")
HOOK_ONLY_GATE = {"checks": [], "timeout_seconds": 0, "attempts": 1, "interval_seconds": 0}


def hook_events(job):
    """The job commands events of a job that run in its batches' gates (hooks/points.py)."""
    events = {e for c in (job.get("commands") or {}).values() for e in (c.get("executed_on") or ())}
    return [e for e in HOOK_EVENTS if e in events]


def state_record(job, alloc_id, content, version, running, update_seq):
    return {
        "format": STATE_FORMAT,
        "job": job,
        "alloc_id": alloc_id,
        "hash": content["hash"] if content else None,
        "files": dict(content["files"]) if content else {},
        "version": version,
        "running": bool(running),
        "update_seq": update_seq,
    }


def _short(h):
    return (h or "-")[:12]


def _fmt_paths(paths, limit=8):
    if len(paths) <= limit:
        return ", ".join(paths)
    return "%s (+%d more)" % (", ".join(paths[:limit]), len(paths) - limit)


def foreign_buckets(bucket_id, states, hosts, adopt=None):
    """Errors for workers that hold another bucket id's tree under /opt/worker/ (a lost or rebuilt catalog)."""
    errors = []
    for host in sorted(hosts):
        st = states.get(host) or {}
        for other in st.get("others") or []:
            other_id = other.get("bucket_id") if isinstance(other, dict) else None
            if not other_id or other_id == bucket_id:
                continue
            errors.append(
                "worker %s already holds bucket %s (%s), but data/catalog.json has bucket_id %s: the catalog was lost "
                "or rebuilt. Restore the data/catalog.json that has bucket_id %s, or adopt that id with "
                "-e maand_adopt_bucket_id=%s (the catalog then takes it and the deploy continues that tree)"
                % (host, other_id, other.get("path") or _layout.bucket_root(other_id), bucket_id, other_id, other_id))
    return errors


# --- the plan -------------------------------------------------------------------------------------

def compute_plan(catalog, content, states, hosts, options=None):
    """Compute the deploy plan.

    catalog: the catalog dict (docs/contract.md).
    content: {job: {"hash": hex, "files": {rel: hex}, "origins": {rel: origin}}} for every non-removed
        job in scope (deploy/stage.compute); a job may map to {"error": msg} when its tree could not be
        read. A job with templates or overlays has "allocations": {host: the same shape, or {"error": msg}}
        (its messages, once per failure, come in options["stage_errors"] and refuse the deploy).
    states: {host: {"reachable": bool, "error": str, "worker": dict|None, "jobs": dict|None,
        "deployed": {job: record}, "trees": [job names with a folder under jobs/]}}.
    hosts: the hosts this run targets (after --limit); allocations elsewhere are out of scope.
    options: {"jobs": filter value, "force": bool, "sync_only": bool, "stage_errors": [str]}.

    The phases, in order: check the jobs in scope (options, health gates, restart settings), decide
    every allocation in scope, purge workers that left workers.json, plan worker metadata and the
    update_seq, then schedule (step 0 reconciles, then one step per rolling batch per wave).
    """
    planner = _Planner(catalog, content, states, hosts, options or {})
    planner.check_jobs()
    for alloc in planner.allocations_in_scope():
        planner.decide(alloc)
    planner.hold_for_canaries()
    planner.plan_purges()
    planner.plan_metadata()
    planner.schedule()
    return planner.result()


# --- the plan's records (typed inside the planner, plain JSON at the boundary: to_json) -----------------

class _Absent:
    """A field whose key the JSON leaves out (not the same as null)."""

    def __repr__(self):
        return "ABSENT"


ABSENT = _Absent()


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
    hash: object = ABSENT  # the tree hash it ships; the key is absent for rows that ship nothing
    batch: str | None = None  # the rolling batch label, once scheduled (absent when not)

    def decide(self, action, reason):
        self.action, self.reason = action, reason

    def to_json(self):
        out = {"job": self.job, "worker": self.worker, "alloc_id": self.alloc_id, "state": self.state,
               "wave": self.wave, "paths": list(self.paths), "from_version": self.from_version,
               "to_version": self.to_version}
        if self.hash is not ABSENT:
            out["hash"] = self.hash
        out.update(action=self.action, reason=self.reason)
        if self.batch is not None:
            out["batch"] = self.batch
        return out


@dataclasses.dataclass(slots=True)
class Op:
    """plan["steps"][i]["ops"][host][j]: one operation of the worker agent (worker/agent.py) in a step.

    kind "run" ships a job tree (src) and runs its target; "stop", "remove", "purge" and "meta" (worker.json
    and jobs.json) reconcile in step 0 (meta ops ride in each host's first wave step when nothing else reconciles);
    "files" ships the tree of a later step's fresh start early (of: that run op's id), see _presync.
    """

    id: str
    kind: str
    host: str
    job: str | None = None
    action: str | None = None
    target: str | None = None  # the make target, or None (files only)
    sync: bool = False
    env: dict = dataclasses.field(default_factory=dict)
    record: dict | None = None  # the state record promoted on the worker (state_record)
    promote_now: bool = False  # promoted after the op, not after the batch's gate
    src: str | None = None  # run ops: the job folder
    restore: object = False  # run ops of a rollback: True = the previous tree goes back, "current" = the promoted one
    revert_of: int | None = None  # auto_revert ops: the step whose failure of this job they undo (else never run)
    worker_json: dict | None = None  # meta ops
    jobs_json: list | None = None  # meta ops
    of: str | None = None  # files ops: the id of the run op whose files they ship
    held: bool = False  # run ops of a start batch before the job's last: promoted after the gate of the last

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
            return out
        out = {"id": self.id, "kind": self.kind, "job": self.job, "host": self.host, "action": self.action,
               "target": self.target, "sync": self.sync, "env": self.env, "record": self.record,
               "promote_now": self.promote_now}
        if self.kind == "meta":
            out.update(worker_json=self.worker_json, jobs_json=self.jobs_json)
        if self.kind == "files":
            out.update(src=self.src, of=self.of)
        return out


@dataclasses.dataclass(slots=True)
class Step:
    """plan["steps"][i]: ops run side by side on their hosts, then the gates of the batches in it."""

    index: int
    wave: int | None
    last_in_wave: bool
    label: str
    jobs: list
    ops: dict  # host -> [Op]
    gates: list

    def to_json(self):
        return {"index": self.index, "wave": self.wave, "last_in_wave": self.last_in_wave, "label": self.label,
                "jobs": self.jobs, "ops": {host: [o.to_json() for o in ops] for host, ops in self.ops.items()},
                "gates": self.gates}


@dataclasses.dataclass(slots=True)
class Failure:
    """plan["failures"][i]: an allocation (or, worker None, a whole job) this deploy cannot deploy, and why."""

    job: str
    worker: str | None
    msg: str

    def to_json(self):
        return {"job": self.job, "worker": self.worker, "msg": self.msg}


@dataclasses.dataclass(slots=True)
class Prune:
    """plan["prune"][i]: a removed allocation whose catalog row goes after this deploy (nothing left on its worker)."""

    job: str
    worker: str

    def to_json(self):
        return {"job": self.job, "worker": self.worker}


def current_versions(states):
    """{(job, host): version} each reachable worker reports as promoted (the templates' .CurrentVersion)."""
    out = {}
    for host, st in states.items():
        for name in (st or {}).get("deployed") or {}:
            record = _promoted(st, name)
            if record is not None and record.get("version"):
                out[(name, host)] = str(record["version"])
    return out


def worker_id(worker, host):
    """The worker_id a deploy writes into the worker's worker.json: the catalog's (maand's, kept by a
    takeover), else maand's stable UUID of the host."""
    return str((worker or {}).get("worker_id") or _functions.stable_uuid(host))


def seen_update_seq(states, catalog=None):
    """The highest update_seq the workers report, and at least the catalog's update_seq_floor (maand.db's
    update_seq, kept by a takeover build); 0 when neither has one."""
    seen = int((catalog or {}).get("update_seq_floor") or 0)
    for st in states.values():
        w = (st or {}).get("worker")
        if isinstance(w, dict) and isinstance(w.get("update_seq"), int):
            seen = max(seen, w["update_seq"])
    return seen


def _promoted(st, name):
    """The promoted state record a worker reported for job name, or None (absent or an unknown format)."""
    deployed = (st.get("deployed") or {}).get(name)
    if deployed is not None and (not isinstance(deployed, dict) or deployed.get("format") != STATE_FORMAT):
        return None
    return deployed


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


def allocation_indexes(catalog, position):
    """{(job, host): index} of every non-removed allocation among its job's, in worker order (maand's
    ALLOCATION_INDEX, the same as <job>_allocation_index in the KV)."""
    live_workers = {w["host"] for w in catalog.get("workers", []) if not w.get("removed")}
    peers = {}
    for a in catalog.get("allocations", []):
        if a.get("state") != "removed" and a.get("worker") in live_workers:
            peers.setdefault(a["job"], []).append(a["worker"])
    out = {}
    for job, hosts in peers.items():
        for i, host in enumerate(sorted(hosts, key=lambda h: (position.get(h, (1 << 30, 0)), h))):
            out[(job, host)] = i
    return out


def port_env(ports):
    """A job's ports as environment variables: api_http_port -> API_HTTP_PORT=30000."""
    return {str(name).upper(): str(port) for name, port in sorted((ports or {}).items())}


def worker_positions(catalog):
    """{host: sort key} in workers.json order (workers without a position last)."""
    return {w["host"]: (w.get("position") if w.get("position") is not None else 1 << 30, i)
            for i, w in enumerate(catalog.get("workers", []))}


def allocation_env(job, alloc, host, index, cur_version, new_version):
    """The environment of a job's make targets on one allocation: maand's job command variables
    (ALLOCATION_ID, ALLOCATION_IP, ALLOCATION_INDEX, JOB, CURRENT_VERSION, NEW_VERSION) and the job's
    ports (api_http_port -> API_HTTP_PORT). job and alloc are catalog records."""
    env = {"ALLOCATION_ID": str(alloc.get("alloc_id") or ""), "ALLOCATION_IP": host,
           "ALLOCATION_INDEX": "" if index is None else str(index), "JOB": str(job.get("name") or alloc.get("job") or ""),
           "CURRENT_VERSION": cur_version, "NEW_VERSION": new_version}
    env.update(port_env(job.get("ports")))
    return env


def catalog_allocation_env(catalog, job, host, cur_version, new_version):
    """allocation_env for job on host, straight from a catalog (the job playbook)."""
    record = next((j for j in catalog.get("jobs", []) if j.get("name") == job), {"name": job})
    alloc = next((a for a in catalog.get("allocations", []) if a.get("job") == job and a.get("worker") == host), {})
    index = allocation_indexes(catalog, worker_positions(catalog)).get((job, host))
    return allocation_env(record, alloc, host, index, cur_version, new_version)


class _Planner:
    """One compute_plan call: its inputs, the decisions made so far, then the schedule."""

    def __init__(self, catalog, content, states, hosts, options):
        if not isinstance(catalog, dict) or not catalog.get("bucket_id"):
            raise PlanError("the catalog has no bucket_id: run the maand.core.build playbook first")
        self.catalog = catalog
        self.content = content
        self.states = states
        self.bucket_id = catalog["bucket_id"]
        self.jobs = {j["name"]: j for j in catalog.get("jobs", [])}
        self.workers = {w["host"]: w for w in catalog.get("workers", [])}
        self.allocs = {(a.get("job"), a.get("worker")): a for a in catalog.get("allocations", [])}
        self.indexes = None  # (job, host) -> ALLOCATION_INDEX, computed on first use
        self.by_worker = None  # host -> its allocation records, computed on first use
        self.position = worker_positions(catalog)
        self.hosts = set(hosts)
        self.errors = []
        self.failures = []
        self.rows = []
        self.prune = []
        self.jobs_filter, filter_errors = parse_jobs_filter(options.get("jobs"), self.jobs)
        self.errors.extend(filter_errors)
        self.rollback, rollback_errors = parse_rollback(options.get("rollback"), self.jobs, self.jobs_filter, options)
        self.errors.extend(rollback_errors)
        self.promote, promote_errors = parse_promote(options.get("promote"), self.jobs)
        self.errors.extend(promote_errors)
        self.canaries = set()    # jobs whose upgrade this deploy is a canary batch
        if self.rollback:  # a rollback deploys only the jobs it names
            self.jobs_filter = sorted(self.rollback)
        self.errors.extend(foreign_buckets(self.bucket_id, states, self.hosts, options.get("adopt_bucket_id")))
        self.errors.extend(options.get("stage_errors") or [])  # templates that failed to render (deploy/stage.py)
        self.force = bool(options.get("force"))
        self.sync_only = bool(options.get("sync_only"))
        self.adopted = dict(options.get("adopted") or {})  # (job, host) -> version maand deployed (takeover)
        self.rollout_orders = dict(options.get("rollout_orders") or {})  # job -> rollout_order a hook put in the KV
        self.order_notes = []
        self.gates = {}          # job -> health gate spec
        self.gate_failed = {}    # job -> why its health_check cannot run (the job is not deployed)
        self.reconcile = {}      # host -> [op]
        self.rollout = {}        # job -> {"start": [op], "upgrade": [op], "sync": [op]}
        self.dead_removed_workers = set()
        self.removed_worker_hosts = {h for h in self.hosts if (self.workers.get(h) or {}).get("removed")}
        self.meta_ops = {}
        self.attempts = {}       # job -> {host: its latest attempt, never promoted} (_failed_attempts)
        self.fresh = set()       # (job, host) of starts with nothing of the job on the worker (_presync)
        self.seen_seq = 0
        self.update_seq = 0
        self.steps = []

    def state(self, host):
        return self.states.get(host) or {}

    def in_scope_job(self, name):
        return self.jobs_filter is None or name in self.jobs_filter

    # --- phase 1: the jobs in scope ---

    def check_jobs(self):
        """Health gates, restart_policy and restart_globs of every job in scope, validated up front."""
        for name, job in sorted(self.jobs.items()):
            if job.get("removed") or not self.in_scope_job(name):
                continue
            if "health_gate" in job:  # resolved and validated by build (catalog/service.py: catalog job "health_gate")
                spec, gate_errors = job["health_gate"], []
            else:  # a catalog of an older build, or a check build could not resolve (that job fails, named)
                spec, gate_errors = resolve_health(job)
            if gate_errors:  # only this job is left out; the others deploy and the run ends failed
                self.gate_failed[name] = gate_errors
                self.failures.append(Failure(name, None, "job %s not deployed: its health_check cannot run: %s"
                                             % (name, "; ".join(gate_errors))))
            if not spec and not gate_errors and hook_events(job):
                spec = dict(HOOK_ONLY_GATE, job=name)  # the batch's hooks run in its gate (hooks/points.py)
            if spec:
                self.gates[name] = spec
            policy = job.get("restart_policy") or "always"
            if policy not in POLICIES:
                self.errors.append("jobs/%s/manifest.json restart_policy: %r is not one of %s"
                                   % (name, policy, ", ".join(POLICIES)))
            for glob in job.get("restart_globs") or []:
                try:
                    _content.validate_glob(glob)
                except _content.GlobError as exc:
                    self.errors.append("jobs/%s/manifest.json restart_globs: %s" % (name, exc))

    def allocations_in_scope(self):
        return sorted(
            (a for a in self.catalog.get("allocations", [])
             if a.get("worker") in self.hosts and self.in_scope_job(a.get("job"))),
            key=lambda a: (a["job"], self.position.get(a["worker"], (1 << 30, 0)), a["worker"]))

    # --- phase 2: one decision per allocation ---

    def decide(self, alloc):
        name, host, state = alloc["job"], alloc["worker"], alloc.get("state", "active")
        job = self.jobs.get(name)
        st = self.state(host)
        deployed = _promoted(st, name)
        row = PlanRow(name, host, alloc.get("alloc_id"), state, (job or {}).get("deployment_seq", 0),
                      from_version=(deployed or {}).get("version"), to_version=(job or {}).get("version") or ZERO_VERSION)
        self.rows.append(row)
        if job is None:
            row.decide("skip", "job is not in the catalog's jobs list (rebuild the catalog)")
            self.errors.append("catalog: allocation %s@%s names job %s, which has no job record; run maand.core.build"
                               % (name, host, name))
            return
        if state == "removed" or host in self.removed_worker_hosts:
            self._decide_removed(row, job, st, deployed)
            return
        if not st.get("reachable", False):
            row.decide("unreachable", "worker unreachable: %s" % (st.get("error") or "no answer"))
            self.failures.append(Failure(name, host, "%s@%s not deployed: worker unreachable (%s)"
                                         % (name, host, st.get("error") or "no answer")))
            return
        cur = self.content.get(name) or {}
        if cur.get("error"):
            row.decide("skip", "cannot read the job tree: %s" % cur["error"])
            self.errors.append("job %s: %s" % (name, cur["error"]))
            return
        if state == "disabled":
            self._decide_disabled(row, deployed)
            return
        if name in self.gate_failed:
            row.decide("skip", "not deployed: its health_check cannot run (%s)" % "; ".join(self.gate_failed[name]))
            return
        if name in self.rollback:
            self._decide_rollback(row, job, st, deployed)
            return
        cur = (cur.get("allocations") or {}).get(host, cur)  # rendered per allocation (deploy/stage.py)
        if cur.get("error"):  # the message is in options["stage_errors"], once for all its workers
            row.decide("skip", "cannot render: %s" % cur["error"])
            return
        self._decide_active(row, job, st, deployed, cur)

    def alloc_env(self, job, host, cur_version, new_version):
        if self.indexes is None:
            self.indexes = allocation_indexes(self.catalog, self.position)
        return allocation_env(self.jobs.get(job) or {}, self.allocs.get((job, host)) or {}, host,
                              self.indexes.get((job, host)), cur_version, new_version)

    def _decide_removed(self, row, job, st, deployed):
        """A removed allocation, or any allocation of a worker that left workers.json: stop and remove."""
        name, host = row.job, row.worker
        worker_removed = host in self.removed_worker_hosts
        why = ("worker left workers.json" if worker_removed else
               "job left the workspace" if job.get("removed") else
               "worker no longer matches the job's selectors")
        if not st.get("reachable", False):
            if worker_removed:
                row.decide("remove", "%s; worker unreachable, assumed dead (files not cleaned): %s"
                           % (why, st.get("error") or "unreachable"))
                self.dead_removed_workers.add(host)
                self.prune.append(Prune(name, host))
            else:
                row.decide("unreachable", "%s; worker unreachable, cannot stop/remove: %s"
                           % (why, st.get("error") or "unreachable"))
                self.failures.append(Failure(name, host, "cannot remove %s@%s: worker unreachable (%s)"
                                             % (name, host, st.get("error") or "")))
            return
        if deployed is None and name not in set(st.get("trees") or []):
            row.decide("skip", "%s; nothing deployed there" % why)
            self.prune.append(Prune(name, host))
            return
        running = (deployed or {}).get("running")
        todo = "stop, then delete job files (keep data/, logs/)" if running else "delete job files (keep data/, logs/)"
        row.decide("remove", "%s; %s" % (why, todo))
        version = (deployed or {}).get("version") or ZERO_VERSION
        self.reconcile.setdefault(host, []).append(Op.reconcile(
            "remove", host, job=name, target="stop" if running else None, env=self.alloc_env(name, host, version, version)))

    def _decide_disabled(self, row, deployed):
        name, host = row.job, row.worker
        if not (deployed and deployed.get("running")):
            row.decide("skip", "disabled (not running)")
            return
        row.decide("stop", "disabled (was running)")
        record = dict(deployed)
        record["running"] = False
        cur_version = deployed.get("version") or ZERO_VERSION
        self.reconcile.setdefault(host, []).append(Op.reconcile(
            "stop", host, job=name, target="stop", env=self.alloc_env(name, host, cur_version, cur_version),
            record=record, promote_now=True))

    def _decide_active(self, row, job, st, deployed, cur):
        name, host = row.job, row.worker
        new_version = job.get("version") or ZERO_VERSION
        cur_version = (deployed or {}).get("version") or ZERO_VERSION
        prev_files = (deployed or {}).get("files") or {}
        row.hash = cur.get("hash")
        unpromoted_rollback = deployed is not None and name in (st.get("rollback_pending") or [])
        hash_changed = deployed is None or deployed.get("hash") != cur.get("hash") or unpromoted_rollback
        version_changed = deployed is not None and cur_version != new_version
        changed = _content.changed_paths(prev_files, cur.get("files")) if deployed and hash_changed else []
        reasons = _change_reasons(deployed, hash_changed and not unpromoted_rollback, changed, version_changed,
                                  cur_version, new_version, cur.get("origins"))
        if unpromoted_rollback:
            reasons.insert(0, "a rollback was not promoted (its gate failed): the workspace's files go back")
        if deployed is not None and deployed.get("rolled_back_from"):
            reasons.append("roll forward after the rollback from %s" % deployed["rolled_back_from"])
        if deployed is not None and deployed.get("reverted_from"):
            reasons.append("%s was reverted here before" % deployed["reverted_from"])
        row.paths = changed
        op = Op.run(name, host, job.get("path"), sync=bool(hash_changed),
                    env=self.alloc_env(name, host, cur_version, new_version),
                    record=state_record(name, row.alloc_id, cur, new_version, True, None),
                    promote_now=name not in self.gates)
        bucket = self.rollout.setdefault(name, {"start": [], "upgrade": [], "sync": []})
        if deployed is None and self._adopt(row, op, bucket, st, new_version):
            return
        if deployed is None or not deployed.get("running"):
            self._decide_start(row, op, bucket, st, deployed, reasons)
            return
        if not hash_changed and not version_changed and not self.force:
            row.decide("skip", "unchanged (hash %s, version %s)" % (_short(deployed.get("hash")), cur_version))
            return
        if not hash_changed and not version_changed:
            reasons.append("forced (maand_force)")
        self._decide_upgrade(row, op, bucket, job, changed, hash_changed, version_changed, reasons)

    def _failed_attempts(self, name):
        """{host: attempt} of job name's active allocations in scope whose latest attempt (the tree shipped
        and started, history/<job>/incoming on the worker) was never promoted while an older version is."""
        if name not in self.attempts:
            found = {}
            for a in self.allocations_in_scope():
                host = a["worker"]
                if a["job"] != name or a.get("state", "active") != "active":
                    continue
                st = self.state(host)
                attempt, deployed = (st.get("attempts") or {}).get(name), _promoted(st, name)
                if (isinstance(attempt, dict) and deployed is not None
                        and (attempt.get("hash"), attempt.get("version")) != (deployed.get("hash"), deployed.get("version"))):
                    found[host] = attempt
            self.attempts[name] = found
        return self.attempts[name]

    def _decide_rollback(self, row, job, st, deployed):
        """maand_rollback: the worker's previous promoted tree and record go back, through the job's
        rolling batches and gate (a restart, or a start when it is not running). When the job's latest
        attempt failed somewhere, _decide_recovery decides instead."""
        name = row.job
        failed = self._failed_attempts(name)
        if failed:
            self._decide_recovery(row, job, st, deployed, failed)
            return
        self._rollback_to_previous(row, job, st, deployed)

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
        cur = self.content.get(name) or {}
        cur = (cur.get("allocations") or {}).get(host, cur)
        if (deployed.get("hash"), deployed.get("version")) != (cur.get("hash"), job.get("version") or ZERO_VERSION):
            row.decide("skip", "rollback: left alone (runs %s; %s never reached it)"
                       % (deployed.get("version") or ZERO_VERSION, tried))
            return
        self._rollback_to_previous(row, job, st, deployed)

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
            self.errors.append("maand_rollback: %s@%s: %s, but the worker keeps no copy of the promoted %s tree "
                               "(history/%s/current, kept from this release on); deploy the old version from the "
                               "workspace instead" % (name, host, why, version, name))
            return
        record = dict(deployed, running=True, update_seq=None, reverted_from=failed_version)
        record.pop("rolled_back_from", None)
        row.paths = _content.changed_paths(attempt.get("files") or {}, deployed.get("files") or {})
        row.hash, row.from_version, row.to_version = deployed.get("hash"), failed_version, version
        row.decide("rollback", "rollback: restore %s (%s); the catalog stays at %s, the next deploy rolls forward "
                   "again" % (version, why, job.get("version") or ZERO_VERSION))
        op = Op.run(name, host, job.get("path"), restore="current", action="rollback", target="restart",
                    env=self.alloc_env(name, host, failed_version, version), record=record,
                    promote_now=name not in self.gates)
        self.rollout.setdefault(name, {"start": [], "upgrade": [], "sync": []})["upgrade"].append(op)

    def _rollback_to_previous(self, row, job, st, deployed):
        name, host = row.job, row.worker
        previous = (st.get("previous") or {}).get(name)
        if deployed is None:
            row.decide("skip", "rollback: nothing deployed here")
            self.errors.append("maand_rollback: %s@%s has nothing deployed, so nothing to roll back" % (name, host))
            return
        if not isinstance(previous, dict) or previous.get("format") != STATE_FORMAT:
            row.decide("skip", "rollback: no previous version on the worker")
            self.errors.append(
                "maand_rollback: %s@%s has no previous version to roll back to (a worker keeps the tree of the "
                "version promoted before the current one, from the first deploy that promotes a new version with "
                "this release on); deploy the old version from the workspace instead" % (name, host))
            return
        cur_version = deployed.get("version") or ZERO_VERSION
        old_version = previous.get("version") or ZERO_VERSION
        record = dict(previous, running=True, update_seq=None, rolled_back_from=cur_version)
        record.pop("rollback", None)
        record.pop("reverted_from", None)
        target = "restart" if deployed.get("running") else "start"
        row.paths = _content.changed_paths(deployed.get("files") or {}, previous.get("files") or {})
        row.hash, row.to_version = previous.get("hash"), old_version
        row.decide("rollback", "rollback: %s %s -> %s (hash %s -> %s; %s); the catalog stays at %s, the next deploy "
                   "rolls forward again" % (name, cur_version, old_version, _short(deployed.get("hash")),
                                            _short(previous.get("hash")), target, job.get("version") or ZERO_VERSION))
        op = Op.run(name, host, job.get("path"), restore=True, action="rollback", target=target,
                    env=self.alloc_env(name, host, cur_version, old_version), record=record,
                    promote_now=name not in self.gates)
        self.rollout.setdefault(name, {"start": [], "upgrade": [], "sync": []})["upgrade"].append(op)

    def _adopt(self, row, op, bucket, st, new_version):
        """An allocation maand deployed and runs (data/maand.db, its tree on the worker, no maand.core record):
        same version -> its files are synced and it is recorded, not restarted. True when handled."""
        name, host = row.job, row.worker
        maand_version = self.adopted.get((name, host))
        if maand_version is None or name not in (st.get("trees") or []):
            return False
        if maand_version != new_version:
            row.paths = []
            op.act("restart", "restart")
            op.env = self.alloc_env(name, host, maand_version, new_version)
            row.decide("restart", "taken over from maand: version %s -> %s" % (maand_version, new_version))
            bucket["upgrade"].append(op)
            return True
        op.act("sync", None)
        op.promote_now = True
        row.decide("sync", "taken over from maand (running %s): files synced, not restarted" % new_version)
        bucket["sync"].append(op)
        return True

    def _decide_start(self, row, op, bucket, st, deployed, reasons):
        name, host = row.job, row.worker
        if deployed is not None:
            reasons.insert(0, "not running (re-enabled or stopped)")
        if self.sync_only:
            row.decide("start", "; ".join(reasons))
            self.errors.append("maand_sync_only: %s@%s needs a start (%s); run the deploy without maand_sync_only"
                               % (name, host, "; ".join(reasons)))
            return
        if name in (st.get("pending") or []):
            reasons.insert(0, "retry: the previous start failed its gate (stop it first)")
        elif deployed is None and name not in (st.get("trees") or []):
            self.fresh.add((name, host))
        op.act("start", "start")
        row.decide("start", "; ".join(reasons))
        bucket["start"].append(op)

    def _decide_upgrade(self, row, op, bucket, job, changed, hash_changed, version_changed, reasons):
        policy = job.get("restart_policy") or "always"
        action, matched = lifecycle_action(policy, job.get("restart_globs") or [], changed, hash_changed,
                                           version_changed and not hash_changed, self.sync_only)
        if matched:
            reasons.append("restart_globs matched: %s" % _fmt_paths(matched))
        elif action == "reload" and job.get("restart_globs") and hash_changed:
            reasons.append("no restart_globs matched")
        if action == "sync":
            reasons.append("maand_sync_only" if self.sync_only else "restart_policy never: files only")
        op.act(action, None if action == "sync" else action)
        row.decide(action, "; ".join(reasons))
        if action == "sync":
            op.promote_now = True
            bucket["sync"].append(op)
        else:
            bucket["upgrade"].append(op)

    # --- phase 2b: canaries ---

    def hold_for_canaries(self):
        """`canary: N` (Nomad's canary + promote): an upgrade of the job rolls out to N allocations
        (counting those already on the new version), gated as usual; the others are held (action "hold")
        until a deploy with -e maand_promote=<job> rolls them out in the job's normal batches."""
        rows = {(r.job, r.worker): r for r in self.rows}
        for name, job_ops in sorted(self.rollout.items()):
            size = int((self.jobs.get(name) or {}).get("canary") or 0)
            upgrades = [o for o in job_ops["upgrade"] if not o.restore]
            if size <= 0 or not upgrades:
                continue
            if name in self.promote:
                self.order_notes.append("job %s: maand_promote: the %d allocation(s) held after the canary roll out"
                                        % (name, len(upgrades)))
                continue
            version = self.jobs[name].get("version") or ZERO_VERSION
            done = sum(1 for r in self.rows if r.job == name and r.action == "skip" and r.reason.startswith("unchanged"))
            keep = upgrades[:max(0, size - done)]
            held = upgrades[len(keep):]
            if not held:
                continue
            self.canaries.add(name)
            for o in held:
                job_ops["upgrade"].remove(o)
                rows[(name, o.host)].decide("hold", "canary: waits for -e maand_promote=%s (%s)"
                                            % (name, rows[(name, o.host)].reason))
            self.order_notes.append(
                "job %s: canary %d: %d allocation(s) on %s after this deploy, %d held until a deploy with "
                "-e maand_promote=%s" % (name, size, done + len(keep), version, len(held), name))

    # --- phase 3: workers that left workers.json ---

    def plan_purges(self):
        """After their allocations, purge /opt/worker/<bucket_id> of removed workers (keeps jobs/*/data, logs)."""
        for host in sorted(self.removed_worker_hosts):
            st = self.state(host)
            if not st.get("reachable"):
                self.dead_removed_workers.add(host)
                if self.jobs_filter is None:
                    self.rows.append(self._purge_row(host, "worker left workers.json; unreachable, assumed dead (%s)"
                                                     % (st.get("error") or "")))
                continue
            if self.jobs_filter is not None:
                continue  # a filtered deploy cleans only the jobs it names
            has_files = st.get("worker") is not None or st.get("deployed") or st.get("trees")
            if has_files:
                self.rows.append(self._purge_row(
                    host, "worker left workers.json: delete %s except jobs/*/data and jobs/*/logs"
                    % _layout.bucket_root(self.bucket_id)))
                self.reconcile.setdefault(host, []).append(Op.reconcile("purge", host))

    @staticmethod
    def _purge_row(host, reason):
        return PlanRow(None, host, None, "removed", None, from_version=None, to_version=None, action="purge",
                       reason=reason)

    # --- phase 4: worker metadata (worker.json / jobs.json) and the update_seq ---

    def desired_meta(self, host, seq):
        worker = self.workers.get(host) or {}
        # maand's worker.json (deploy/types.go WorkerData: its bin/worker.py checks bucket_id, worker_id,
        # update_seq) with maand.core's "worker" beside it
        worker_json = {"bucket_id": self.bucket_id, "worker": host, "labels": sorted(worker.get("labels") or []),
                       "update_seq": seq, "worker_ip": host,
                       "worker_id": worker_id(worker, host)}
        if self.by_worker is None:  # allocations by worker, once: metadata of every host stays linear
            self.by_worker = {}
            for a in self.catalog.get("allocations", []):
                self.by_worker.setdefault(a.get("worker"), []).append(a)
        entries = []
        for a in self.by_worker.get(host, ()):
            if a.get("state") == "removed":
                continue
            entries.append({"job": a["job"], "alloc_id": a.get("alloc_id"),
                            "disabled": 1 if a.get("state") == "disabled" else 0,
                            "version": (self.jobs.get(a["job"]) or {}).get("version") or ZERO_VERSION})
        entries.sort(key=lambda e: e["job"])
        # maand's jobs.json: a list of {"job", "disabled": 0|1} (its bin/runner.py reads it), maand.core's
        # alloc_id and version beside them in each entry
        return worker_json, entries

    def _meta_hosts(self):
        """Reachable catalog workers in scope that did not leave workers.json, sorted."""
        return [h for h in sorted(self.hosts - self.removed_worker_hosts)
                if self.state(h).get("reachable") and h in self.workers]

    def _meta_stale(self, host):
        """True when the worker's metadata differs from the catalog's, update_seq aside."""
        st = self.state(host)
        want_worker, want_jobs = self.desired_meta(host, 0)
        have_worker = dict(st.get("worker") or {})
        have_worker["update_seq"] = 0
        return have_worker != want_worker or st.get("jobs") != want_jobs

    def plan_metadata(self):
        """Bump update_seq when anything changes; write metadata where it differs; stamp the records."""
        self.seen_seq = seen_update_seq({h: self.state(h) for h in self.hosts}, self.catalog)
        has_job_work = bool(self.reconcile) or any(b["start"] or b["upgrade"] or b["sync"]
                                                   for b in self.rollout.values())
        needs_meta = any(self._meta_stale(h) for h in self._meta_hosts())
        bump = has_job_work or needs_meta
        self.update_seq = self.seen_seq + 1 if bump else self.seen_seq
        if bump:
            for host in self._meta_hosts():
                st = self.state(host)
                want_worker, want_jobs = self.desired_meta(host, self.update_seq)
                if st.get("worker") != want_worker or st.get("jobs") != want_jobs:
                    self.meta_ops[host] = Op.reconcile("meta", host, worker_json=want_worker, jobs_json=want_jobs)
        for job_ops in self.rollout.values():
            for op in itertools.chain(job_ops["start"], job_ops["upgrade"], job_ops["sync"]):
                op.record["update_seq"] = self.update_seq

    # --- phase 5: the schedule ---

    def schedule(self):
        waves = {}
        for name, job_ops in self.rollout.items():
            if job_ops["start"] or job_ops["upgrade"] or job_ops["sync"]:
                waves.setdefault(self.jobs[name].get("deployment_seq", 0) or 0, []).append(name)
        # Metadata alone needs no step of its own: it rides first in each host's request of its first wave
        # step (one agent round trip per host less; a failed meta op is a run error either way).
        fold_meta = bool(waves) and not any(self.reconcile.values())
        self._schedule_reconcile(with_meta=not fold_meta)
        row_index = {(r.job, r.worker): r for r in self.rows}
        for wave in sorted(waves):
            subs = {name: self._job_batches(name, row_index) for name in sorted(waves[wave])}
            self._schedule_wave(wave, subs)
        if fold_meta and self.meta_ops:
            self._fold_meta()
        self._presync()

    def _fold_meta(self):
        """With nothing to reconcile, a worker's metadata rides first in its request of the first wave step in
        which it acts (its own batch: no session of pure metadata on a worker whose batch comes later), or of
        the first wave step when it acts in none."""
        first = {}
        for step in self.steps:
            for host in step.ops:
                first.setdefault(host, step)
        for host in sorted(self.meta_ops):
            ops = first.get(host, self.steps[0]).ops
            ops[host] = [self.meta_ops[host]] + ops.get(host, [])

    def _schedule_reconcile(self, with_meta=True):
        """Step 0: per host, metadata first, then stops, removes and the purge."""
        step0 = {}
        for host in sorted((set(self.meta_ops) if with_meta else set()) | set(self.reconcile)):
            ops = [self.meta_ops[host]] if with_meta and host in self.meta_ops else []
            todo = self.reconcile.get(host, [])
            ops += sorted((o for o in todo if o.kind == "stop"), key=lambda o: o.job)
            ops += sorted((o for o in todo if o.kind == "remove"), key=lambda o: o.job)
            ops += [o for o in todo if o.kind == "purge"]
            if ops:
                step0[host] = ops
        if step0:
            self.steps.append(Step(0, None, True, "reconcile",
                                   sorted({o.job for ops in step0.values() for o in ops if o.job}), step0, []))

    def _presync(self):
        """A fresh start of a later step (nothing of the job on the worker: no record, no tree, no failed
        start; and no deploy hooks, whose commands run in the job's gates) ships its files in the first
        wave step in which its host acts, with that step's own files: one rsync per host for every wave of a first deploy (maand
        syncs a worker's whole tree first, too). Its run op then only starts the job, in its own step;
        when the early copy fails, the job fails and is blocked there. Files of an upgrade never travel
        early: the running version keeps its tree until its own batch."""
        first = {}
        for step in self.steps:
            for host in step.ops if step.wave is not None else ():  # never into the reconcile step
                first.setdefault(host, step)
        for step in self.steps:
            for host, ops in step.ops.items():
                if first.get(host, step) is step:
                    continue
                for op in ops:
                    if (op.kind == "run" and op.sync and op.target == "start" and (op.job, host) in self.fresh
                            and not hook_events(self.jobs[op.job])):
                        first[host].ops[host].append(Op.files(op))
                        op.sync = False

    def _job_batches(self, name, row_index):
        """One job's rolling batches in order: starts, then upgrades; sync-only ops ride in the first.

        Start batches follow maand (rolloutStartBatches): they run one after another and the job's gate
        runs once, after the last of them, over every started allocation (a quorum service cannot be
        healthy with its first member alone); `start_gate: every_batch` in the manifest gates each one.
        Upgrade batches are gated one by one (rolloutRestartBatches). With `auto_revert`, each upgrade
        batch has a revert in the job's next slot, run only when that batch failed (_add_reverts)."""
        job = self.jobs[name]
        job_ops = self.rollout[name]
        if "job_control" in hook_events(job):
            return [self._job_control_batch(name, job_ops, row_index)]
        starts, start_src = self._ordered(name, job_ops["start"])
        upgrades, upgrade_src = self._ordered(name, job_ops["upgrade"])
        if upgrade_src == "default":  # a rollback after a failed attempt: the workers it left down come back first
            upgrades.sort(key=lambda o: o.restore != "current")
        sources = {"start": start_src, "upgrade": upgrade_src}
        start_b = batches(starts, int(job.get("max_concurrent_starts") or 0))
        upgrade_size = job.get("max_concurrent_upgrades")
        upgrade_b = batches(upgrades, 1 if upgrade_size is None else max(int(upgrade_size), 1))
        seq = [("start", b) for b in start_b] + [("upgrade", b) for b in upgrade_b]
        if job_ops["sync"]:
            if seq:
                seq[0] = (seq[0][0], job_ops["sync"] + seq[0][1])
            else:
                seq = [("sync", job_ops["sync"])]
        total = {"start": len(start_b), "upgrade": len(upgrade_b), "sync": 1}
        counter = {"start": 0, "upgrade": 0, "sync": 0}
        once = job.get("start_gate", START_GATES[0]) != "every_batch" and len(start_b) > 1
        started = [o.host for b in start_b for o in b]
        out = []
        for pos, (phase, ops) in enumerate(seq):
            counter[phase] += 1
            shown = "rollback" if phase == "upgrade" and all(o.restore for o in ops) else phase
            shown = "canary" if shown == "upgrade" and name in self.canaries else shown
            label = "%s %s batch %d/%d" % (name, shown, counter[phase], total[phase])
            lifecycle_hosts = [o.host for o in ops if o.action != "sync"]
            deferred = once and phase == "start"  # maand: one gate after the last start batch
            last_start = deferred and counter["start"] == total["start"]
            gate = None
            if name in self.gates and lifecycle_hosts and (not deferred or last_start or hook_events(job)):
                gate = dict(self.gates[name], hosts=started if last_start else lifecycle_hosts)
                if last_start:  # its hosts span every start batch: the label names the batch it follows
                    gate["label"] = label
                if hook_events(job):
                    order = [o.host for p, b in seq if p == phase for o in b if o.action != "sync"]
                    gate["hooks"] = {"phase": "new" if phase == "start" else "update",
                                     "batch_index": counter[phase] - 1, "batch_count": total[phase],
                                     "order": order, "order_source": sources.get(phase, "default"),
                                     "last": pos == len(seq) - 1}
                    if last_start:  # after_allocation_started runs for this batch; probes for every start
                        gate["hooks"]["batch_hosts"] = lifecycle_hosts
                    elif deferred:  # only the batch's hooks: no probes, no health_check
                        gate["checks"] = []
                        gate["hooks"]["health"] = False
            for o in ops:
                row_index[(name, o.host)].batch = label
                o.held = deferred and not last_start and o.action != "sync" and not o.promote_now
            out.append({"label": label, "ops": ops, "gate": gate, "phase": phase})
        if job.get("auto_revert"):
            self._add_reverts(name, out)
        return out

    def _add_reverts(self, name, out):
        """auto_revert: the revert of upgrade batch k rides in the job's slot k + 1 (a slot of its own
        after the last batch). It restores the promoted tree (history/<job>/current) on the batch's
        workers, restarts it and gates it; the run state issues it only when batch k failed
        (deploy/run_state.py: revert_of), and the job's later batches never run (it is blocked)."""
        job = self.jobs[name]
        for k, sub in enumerate(list(out)):
            if sub["phase"] != "upgrade":
                continue
            ops = []
            for o in sub["ops"]:
                deployed = _promoted(self.state(o.host), name)
                if o.action in ("restart", "reload") and not o.restore and deployed is not None:
                    ops.append(self._revert_op(name, o, deployed))
            if not ops:
                continue
            gate = None
            if name in self.gates:
                gate = dict(self.gates[name], hosts=[o.host for o in ops], revert=True,
                            label="%s revert of %s" % (name, sub["label"][len(name) + 1:]))
                if hook_events(job):
                    gate["hooks"] = {"phase": "update", "batch_index": 0, "batch_count": 1,
                                     "order": [o.host for o in ops], "order_source": "default", "last": False}
            if k + 1 == len(out):
                out.append({"label": "%s revert (if %s fails)" % (name, sub["label"][len(name) + 1:]),
                            "ops": [], "gate": None, "phase": "revert"})
            out[k + 1]["reverts"] = {"ops": ops, "gate": gate, "of": k}
        if any(sub.get("reverts") for sub in out):
            self.order_notes.append("job %s: auto_revert: an upgrade batch that fails gets its promoted tree back "
                                    "(restart, gate), the job's later batches do not run, the deploy ends failed" % name)

    def _revert_op(self, name, op, deployed):
        """The conditional revert of one upgrade op: the promoted tree and record back (reverted_from)."""
        version = deployed.get("version") or ZERO_VERSION
        failed_version = (op.record or {}).get("version") or ZERO_VERSION
        record = dict(deployed, running=True, update_seq=self.update_seq, reverted_from=failed_version)
        record.pop("rolled_back_from", None)
        return Op("%s@%s/revert" % (name, op.host), "run", op.host, job=name, src=op.src, restore="current",
                  action="revert", target="restart", env=self.alloc_env(name, op.host, failed_version, version),
                  record=record, promote_now=name not in self.gates)

    def _ordered(self, name, ops):
        """ops in the order a hook put in maand/job/<job> rollout_order when it names exactly these
        allocations (maand ResolveRolloutOrder), else as they are; (ops, "kv" | "default")."""
        raw = self.rollout_orders.get(name)
        if not raw or not ops:
            return ops, "default"
        order = [ip.strip() for ip in str(raw).split(",") if ip.strip()]
        hosts = [o.host for o in ops]
        problem = None
        if len(set(order)) != len(order):
            problem = "duplicate allocation"
        elif set(order) != set(hosts):
            problem = "it names %s, the batch has %s" % (",".join(order), ",".join(hosts))
        if problem:
            self.order_notes.append("job %s: rollout_order %r ignored (%s); using the catalog order" % (name, raw, problem))
            return ops, "default"
        by_host = {o.host: o for o in ops}
        return [by_host[h] for h in order], "kv"

    def _job_control_batch(self, name, job_ops, row_index):
        """A job_control job: its whole rollout is one batch whose ops only sync files; the job's
        job_control command starts, restarts or reloads it in the batch's gate (maand deployJobWithCommands)."""
        ops = job_ops["sync"] + job_ops["start"] + job_ops["upgrade"]
        for o in job_ops["start"] + job_ops["upgrade"]:
            o.target = None
        label = "%s job_control" % name
        lifecycle_hosts = [o.host for o in job_ops["start"] + job_ops["upgrade"]]
        gate = None
        if lifecycle_hosts:
            gate = dict(self.gates[name], hosts=lifecycle_hosts, hooks={
                "job_control": True, "new": [o.host for o in job_ops["start"]],
                "updated": [o.host for o in job_ops["upgrade"]], "last": True})
        for o in ops:
            row_index[(name, o.host)].batch = label
        return {"label": label, "ops": ops, "gate": gate}

    def _schedule_wave(self, wave, subs):
        """Batch i of every job in the wave runs side by side in one step (with the conditional
        revert of the job's batch i - 1, auto_revert)."""
        depth = max(len(v) for v in subs.values())
        for i in range(depth):
            ops_by_host = {}
            labels, gate_list, step_jobs = [], [], []
            for name in sorted(subs):
                if i >= len(subs[name]):
                    continue
                sub = subs[name][i]
                sub["step"] = len(self.steps)
                labels.append(sub["label"])
                step_jobs.append(name)
                if sub["gate"]:
                    gate_list.append(sub["gate"])
                for o in sub["ops"]:
                    ops_by_host.setdefault(o.host, []).append(o)
                reverts = sub.get("reverts")
                if reverts:
                    of = subs[name][reverts["of"]]["step"]
                    for o in reverts["ops"]:
                        o.revert_of = of
                        ops_by_host.setdefault(o.host, []).append(o)
                    if reverts["gate"]:
                        gate_list.append(dict(reverts["gate"], revert_of=of))
            self.steps.append(Step(len(self.steps), wave, i == depth - 1, "wave %d: %s" % (wave, "; ".join(labels)),
                                   step_jobs, ops_by_host, gate_list))

    def result(self):
        plan = {
            "bucket_id": self.bucket_id,
            "update_seq": self.update_seq,
            "previous_update_seq": self.seen_seq,
            "options": dict({"jobs": self.jobs_filter, "force": self.force, "sync_only": self.sync_only,
                             "rollback": sorted(self.rollback)}, **({"promote": sorted(self.promote)} if self.promote else {})),
            "rows": [row.to_json() for row in self.rows],
            "steps": [step.to_json() for step in self.steps] if not self.errors else [],
            "errors": self.errors,
            "failures": [f.to_json() for f in self.failures],
            "prune": [p.to_json() for p in self.prune],
            "dead_workers": sorted(self.dead_removed_workers),
            "job_waves": {name: job.get("deployment_seq", 0) or 0 for name, job in self.jobs.items()},
            "has_work": bool(self.steps) and not self.errors,
        }
        plan["lines"] = render_plan(plan)
        plan["lines"].extend("note: " + note for note in self.order_notes)
        return plan


def render_plan(plan):
    """Human-readable plan lines (what --check --diff prints)."""
    lines = []
    work = plan["has_work"] or bool(plan["prune"])
    errors = plan.get("errors") or []
    verdict = ("refused, nothing will be changed (%d error%s, listed after the plan)"
               % (len(errors), "" if len(errors) == 1 else "s")) if errors else \
        "changes required" if work else "no changes required"
    head = "deploy plan for bucket %s: %s" % (plan["bucket_id"], verdict)
    if plan["update_seq"] != plan["previous_update_seq"] and not errors:
        head += " (update_seq %d -> %d)" % (plan["previous_update_seq"], plan["update_seq"])
    lines.append(head)
    opts = plan["options"]
    flags = [k for k in ("force", "sync_only") if opts.get(k)]
    if opts.get("rollback"):
        flags.append("rollback=%s" % ",".join(opts["rollback"]))
    if opts.get("promote"):
        flags.append("promote=%s" % ",".join(opts["promote"]))
    if opts.get("jobs") or flags:
        lines.append("options: jobs=%s%s" % (",".join(opts["jobs"]) if opts.get("jobs") else "all",
                                             "".join(" %s" % f for f in flags)))
    by_wave = {}
    for row in plan["rows"]:
        key = "reconcile" if row["action"] in ("stop", "remove", "purge") or row["state"] != "active" else row["wave"]
        by_wave.setdefault(key, []).append(row)
    order = (["reconcile"] if "reconcile" in by_wave else []) + sorted(k for k in by_wave if k != "reconcile")
    for key in order:
        lines.append("reconcile (removed / disabled):" if key == "reconcile" else "wave %s (deployment_seq):" % key)
        rows = by_wave[key]
        by_job = {}
        for row in rows:
            by_job.setdefault(row["job"], []).append(row)
        for row in rows:
            group = by_job.get(row["job"])
            if (group and len(group) > 1 and row["job"] is not None
                    and all(r["action"] == "skip" and r["reason"] == group[0]["reason"] for r in group)):
                lines.append("  %-16s %-16s %-11s %s" % (row["job"], "(%d workers)" % len(group), "skip", row["reason"]))
                by_job[row["job"]] = None
                continue
            if group is None:
                continue
            extra = ""
            if row.get("batch") and row["action"] not in ("skip", "hold"):
                extra = "  [%s]" % row["batch"]
            lines.append("  %-16s %-16s %-11s %s%s" % (row["job"] or "*", row["worker"], row["action"], row.get("reason", ""), extra))
    if plan["prune"]:
        lines.append("catalog: %d removed allocation row(s) leave data/catalog.json after cleanup" % len(plan["prune"]))
    for f in plan["failures"]:
        lines.append("FAILED: %s" % f["msg"])
    for e in plan["errors"]:
        lines.append("ERROR: %s" % e)
    return lines


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

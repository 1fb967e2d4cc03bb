# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one deploy plan reads (pure Python, no I/O): the options as given, the catalog's jobs, workers and
allocations in scope, what the workers report (promoted records, failed attempts, other buckets) and the
environment of each allocation's make targets.

``Scope`` holds one plan's inputs and their lookups; deploy/reconcile.py decides over it and
deploy/schedule.py schedules with it. deploy/plan.py re-exports the helpers other modules use
(parse_jobs_filter, current_versions, seen_update_seq, worker_id, state_record, catalog_allocation_env...).
"""

from __future__ import annotations

from ..bucket import did_you_mean
from ..kv import functions
from ..worker import agent
from ..worker import layout
from .records import STATE_FORMAT, PlanError

POLICIES = ("always", "reload", "never")
ENV_PREFIX = agent.ENV_PREFIX  # content pseudo-paths of a job spec's environment (jobspec/deploy.py)
HOOK_EVENTS = ("job_control", "after_allocation_started", "health_check", "post_deploy",
               "before_allocation_stopped")  # its batch variables ride in the gate's hooks (deploy/drain.py)
HOOK_ONLY_GATE = {"checks": [], "timeout_seconds": 0, "attempts": 1, "interval_seconds": 0}


# --- the options -----------------------------------------------------------------------------------

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


ROLLING_TARGETS = ("start", "restart", "reload")  # maand.core.job's targets that roll through the deploy's batches


def parse_target(options, workers):
    """A rolling restart's (target, workers or None, errors): maand_rolling_target (what maand.core.job sets for
    -e maand_target=restart) with maand_rolling_workers; refused with the deploy's other modes."""
    target = options.get("target") or ""
    if not target:
        return "", None, []
    if target not in ROLLING_TARGETS:
        return "", None, ["maand_rolling_target: %r is not one of %s" % (target, ", ".join(ROLLING_TARGETS))]
    clash = [name for name, key in (("maand_force", "force"), ("maand_sync_only", "sync_only"),
                                    ("maand_rollback", "rollback"), ("maand_promote", "promote")) if options.get(key)]
    if clash:
        return "", None, ["maand_rolling_target=%s runs make %s on what is deployed; it cannot be combined with %s"
                          % (target, target, ", ".join(clash))]
    names, errors = parse_jobs_filter(options.get("target_workers"), workers)
    errors = [e.replace("maand_jobs:", "maand_rolling_workers:", 1).replace("job(s)", "worker(s)", 1)
              .replace("jobs in the catalog", "workers in the catalog", 1) for e in errors]
    return target, (set(names) if names else None), errors


def hook_events(job):
    """The job commands events of a job that run in its batches' gates (hooks/points.py)."""
    events = {e for c in (job.get("commands") or {}).values() for e in (c.get("executed_on") or ())}
    return [e for e in HOOK_EVENTS if e in events]


# --- what the workers report ----------------------------------------------------------------------

def state_record(job, alloc_id, content, version, running, update_seq):
    """The state record a worker promotes for an allocation (deploy/<job>.json on the worker)."""
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


def promoted(st, name):
    """The promoted state record a worker reported for job name, or None (absent or an unknown format)."""
    deployed = (st.get("deployed") or {}).get(name)
    if deployed is not None and (not isinstance(deployed, dict) or deployed.get("format") != STATE_FORMAT):
        return None
    return deployed


def failed_attempt(attempt, record):
    """Whether a worker's latest attempt at a job (the tree shipped and started, history/<job>/incoming) is
    not its promoted version (record): the attempt failed, an older version is still promoted. The one rule
    of the planner's rollback (deploy/reconcile.py) and of --diff (deploy/view.content_diff)."""
    return (isinstance(attempt, dict) and bool(record)
            and (attempt.get("hash"), attempt.get("version")) != (record.get("hash"), record.get("version")))


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
                % (host, other_id, other.get("path") or layout.bucket_root(other_id), bucket_id, other_id, other_id))
    return errors


def current_versions(states):
    """{(job, host): version} each reachable worker reports as promoted (the templates' .CurrentVersion)."""
    out = {}
    for host, st in states.items():
        for name in (st or {}).get("deployed") or {}:
            record = promoted(st, name)
            if record is not None and record.get("version"):
                out[(name, host)] = str(record["version"])
    return out


def worker_id(worker, host):
    """The worker_id a deploy writes into the worker's worker.json: the catalog's (maand's, kept by a
    takeover), else maand's stable UUID of the host."""
    return str((worker or {}).get("worker_id") or functions.stable_uuid(host))


def seen_update_seq(states, catalog=None):
    """The highest update_seq the workers report, and at least the catalog's update_seq_floor (maand.db's
    update_seq, kept by a takeover build); 0 when neither has one."""
    seen = int((catalog or {}).get("update_seq_floor") or 0)
    for st in states.values():
        w = (st or {}).get("worker")
        if isinstance(w, dict) and isinstance(w.get("update_seq"), int):
            seen = max(seen, w["update_seq"])
    return seen


# --- an allocation's environment ------------------------------------------------------------------

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


# --- one plan's inputs ----------------------------------------------------------------------------

class Scope:
    """The inputs of one compute_plan call and their lookups: the catalog's records by key, the options as
    parsed (their errors in ``errors``, with the stage's and those of foreign buckets), the workers' states."""

    def __init__(self, catalog, content, states, hosts, options):
        if not isinstance(catalog, dict) or not catalog.get("bucket_id"):
            raise PlanError("the catalog has no bucket_id: run the maand.core.build playbook first")
        self.catalog, self.content, self.states = catalog, content, states
        self.bucket_id = catalog["bucket_id"]
        self.root = layout.bucket_root(self.bucket_id)  # the bucket's folder on every worker
        self.jobs = {j["name"]: j for j in catalog.get("jobs", [])}
        self.workers = {w["host"]: w for w in catalog.get("workers", [])}
        self.allocs = {(a.get("job"), a.get("worker")): a for a in catalog.get("allocations", [])}
        self.position = worker_positions(catalog)
        self.hosts = set(hosts)
        self.removed_worker_hosts = {h for h in self.hosts if (self.workers.get(h) or {}).get("removed")}
        self._indexes = None  # (job, host) -> ALLOCATION_INDEX, computed on first use
        self._by_worker = None  # host -> its allocation records, computed on first use
        self._attempts = {}  # job -> {host: its latest attempt, never promoted} (failed_attempts)
        self.errors = []
        self._parse_options(options)

    def _parse_options(self, options):
        self.jobs_filter, errors = parse_jobs_filter(options.get("jobs"), self.jobs)
        self.errors.extend(errors)
        self.rollback, errors = parse_rollback(options.get("rollback"), self.jobs, self.jobs_filter, options)
        self.errors.extend(errors)
        self.promote, errors = parse_promote(options.get("promote"), self.jobs)
        self.errors.extend(errors)
        if self.rollback:  # a rollback deploys only the jobs it names
            self.jobs_filter = sorted(self.rollback)
        self.errors.extend(foreign_buckets(self.bucket_id, self.states, self.hosts, options.get("adopt_bucket_id")))
        self.errors.extend(options.get("stage_errors") or [])  # templates that failed to render (deploy/stage.py)
        self.target, self.target_workers, errors = parse_target(options, self.workers)
        self.errors.extend(errors)
        self.force = bool(options.get("force"))
        self.sync_only = bool(options.get("sync_only"))
        self.adopted = dict(options.get("adopted") or {})  # (job, host) -> version maand deployed (takeover)
        self.rollout_orders = dict(options.get("rollout_orders") or {})  # job -> rollout_order a hook put in the KV

    def state(self, host):
        return self.states.get(host) or {}

    def in_scope_job(self, name):
        return self.jobs_filter is None or name in self.jobs_filter

    def allocations_in_scope(self):
        return sorted(
            (a for a in self.catalog.get("allocations", [])
             if a.get("worker") in self.hosts and self.in_scope_job(a.get("job"))),
            key=lambda a: (a["job"], self.position.get(a["worker"], (1 << 30, 0)), a["worker"]))

    def allocations_on(self, host):
        """The catalog's allocation records on host (every state), in catalog order."""
        if self._by_worker is None:  # allocations by worker, once: metadata of every host stays linear
            self._by_worker = {}
            for a in self.catalog.get("allocations", []):
                self._by_worker.setdefault(a.get("worker"), []).append(a)
        return self._by_worker.get(host, ())

    def alloc_env(self, job, host, cur_version, new_version):
        if self._indexes is None:
            self._indexes = allocation_indexes(self.catalog, self.position)
        return allocation_env(self.jobs.get(job) or {}, self.allocs.get((job, host)) or {}, host,
                              self._indexes.get((job, host)), cur_version, new_version)

    def failed_attempts(self, name):
        """{host: attempt} of job name's active allocations in scope whose latest attempt was never
        promoted while an older version is (failed_attempt)."""
        if name not in self._attempts:
            found = {}
            for a in self.allocations_in_scope():
                host = a["worker"]
                if a["job"] != name or a.get("state", "active") != "active":
                    continue
                st = self.state(host)
                attempt = (st.get("attempts") or {}).get(name)
                if failed_attempt(attempt, promoted(st, name)):
                    found[host] = attempt
            self._attempts[name] = found
        return self._attempts[name]

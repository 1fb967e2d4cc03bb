# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand gc, planned: what removed allocations, jobs and workers left behind (no Ansible imports).

maand's `gc` (docs/reference/cli/gc.md) deletes the `jobs/<job>/` trees that removed allocations
left on workers (a deploy keeps their `data/` and `logs/`), the catalog rows of removed
allocations, the KV namespaces of removed allocations and of jobs that are gone, and old KV
history. Here a deploy already drops the catalog rows it cleaned, so the worker side is found by
listing `/opt/worker/<bucket_id>/jobs/` on each worker (the deploy state read: `trees`, the
promoted records `deployed` and the unpromoted starts `pending`).

Inputs: the catalog (dict), the KV namespaces ({namespace: {key: kv/store.Entry}}), one
`Listing` per worker that was read, the time and the retention. Output: a `Plan`. The rules:

* a folder `jobs/<job>` on worker W is deleted only when (job, W) has no active or disabled
  allocation and the worker holds no deploy record or pending start of it (a deploy has not
  stopped it yet: run the deploy first);
* a `removed` allocation row goes when its worker was read and holds no deploy record or pending
  start of it; a removed job or worker row goes when no allocation row is left on it;
* a job's namespaces (`maand/job/<job>`, `vars/job/<job>`, `secrets/job/<job>`,
  `vars/bucket/job/<job>`, `maand/job/<job>/worker/*`) go when the job is not in the catalog (or
  is removed) and no allocation row of it is left; an allocation's namespace
  (`maand/job/<job>/worker/<ip>`) goes when (job, ip) has no allocation row left and is not active
  or disabled; a worker's (`maand/worker/<ip>`, `.../tags`) when ip is not a live catalog worker
  and holds no allocation row;
* KV history as maand's gc purges it (`KVStore.prune_history`, kv/purge.go): a key whose latest
  version was written before now - retain_days goes whole when that version is a tombstone, and
  keeps at most MAX_HISTORY (7) previous versions otherwise (the store never holds more, so this
  is mostly the tombstones). History within MAX_HISTORY is kept, whatever its age.

Departed workers (they left workers.json; the build keeps them in the catalog's `departed` list until
gc has cleaned them, and `-e maand_departed=h1,h2` names more): a deploy stops their allocations and
deletes their files but keeps `jobs/*/data` and `jobs/*/logs`; gc deletes the whole
`/opt/worker/<bucket_id>` on them (maand's deploy does it for a worker that left) and then drops the
row. It leaves alone a departed worker that still holds allocation rows (run the deploy first), and
fails on one it cannot read or that still holds deploy records (jobs no deploy stopped); a row of a
machine gone for good is dropped without contact with `-e maand_departed_forget=h1`.

Nothing that belongs to an active or disabled allocation, or to a worker of workers.json, is ever in a
plan (a hypothesis property test checks it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Iterable, Mapping

from ..worker import layout
from ..bucket import locks
from ..catalog import catalog
from ..kv import store
from ..errors import MaandError

KEEP_STATES = ("active", "disabled")
DAY = 86400.0

_JOB_NS = re.compile(r"^(?:maand/job|vars/job|secrets/job|vars/bucket/job)/([^/]+)\Z")
_ALLOC_NS = re.compile(r"^maand/job/([^/]+)/worker/([^/]+)\Z")
_WORKER_NS = re.compile(r"^maand/worker/([^/]+)(?:/tags)?\Z")
_HOST = re.compile(r"^[^\s,/\\'\"`$;!*?\[\]{}()<>|&]+\Z")  # an address Ansible can take as a host name
TREE = ""  # PathDeletion.job of the whole bucket folder of a departed worker


class GCError(MaandError):
    """Bad input to gc (the message names it and the fix)."""


@dataclasses.dataclass(frozen=True)
class Listing:
    """What one worker holds of the bucket: job folders, promoted records, pending starts."""

    host: str
    reachable: bool = True
    error: str = ""
    trees: tuple = ()
    deployed: tuple = ()
    pending: tuple = ()
    exists: bool = True  # /opt/worker/<bucket_id> is there

    @classmethod
    def from_state(cls, host: str, state: Mapping[str, Any] | None) -> "Listing":
        """From maand.core.deploy_state's `state` ({reachable, error} or the agent's read)."""
        state = state or {}
        if not state.get("reachable"):
            return cls(host, False, str(state.get("error") or "the worker was not read"))
        return cls(host, True, "", tuple(sorted(state.get("trees") or ())),
                   tuple(sorted(state.get("deployed") or ())), tuple(sorted(state.get("pending") or ())),
                   bool(state.get("exists", True)))


@dataclasses.dataclass(frozen=True)
class PathDeletion:
    host: str
    job: str  # TREE (""): the whole bucket folder of a departed worker
    path: str
    reason: str


@dataclasses.dataclass(frozen=True)
class RowDeletion:
    table: str  # allocations, jobs, workers, departed
    key: str    # job@worker, job name, worker host
    reason: str


@dataclasses.dataclass(frozen=True)
class NamespacePurge:
    namespace: str
    keys: tuple
    reason: str


@dataclasses.dataclass(frozen=True)
class HistoryPrune:
    namespace: str
    key: str
    revisions: int
    whole_key: bool  # a key deleted before the cutoff: it goes with its history


@dataclasses.dataclass
class Plan:
    bucket_id: str
    retain_days: float
    cutoff: float
    paths: list = dataclasses.field(default_factory=list)
    rows: list = dataclasses.field(default_factory=list)
    namespaces: list = dataclasses.field(default_factory=list)
    history: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)   # notes: left alone, and why
    problems: list = dataclasses.field(default_factory=list)  # failures: the run must not exit 0
    departed: tuple = ()  # hosts named with maand_departed (the commit re-plans with them)
    forget: tuple = ()    # departed rows dropped without contact (maand_departed_forget)

    @property
    def empty(self) -> bool:
        return not (self.paths or self.rows or self.namespaces or self.history)

    def paths_by_host(self) -> dict:
        """{host: [job]} of the job folders to delete (gc_worker's `jobs`)."""
        out: dict = {}
        for item in self.paths:
            if item.job != TREE:
                out.setdefault(item.host, []).append(item.job)
        return out

    def trees(self) -> list:
        """The departed workers whose whole bucket folder goes (gc_worker's `bucket_tree`), sorted."""
        return sorted({item.host for item in self.paths if item.job == TREE})

    def as_dict(self) -> dict:
        return {"bucket_id": self.bucket_id, "retain_days": self.retain_days, "cutoff": self.cutoff,
                "paths": [dataclasses.asdict(p) for p in self.paths],
                "rows": [dataclasses.asdict(r) for r in self.rows],
                "namespaces": [dict(dataclasses.asdict(n), keys=list(n.keys)) for n in self.namespaces],
                "history": [dataclasses.asdict(h) for h in self.history],
                "skipped": list(self.skipped), "problems": list(self.problems),
                "departed": list(self.departed), "forget": list(self.forget)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "Plan":
        try:
            return cls(str(doc["bucket_id"]), float(doc["retain_days"]), float(doc["cutoff"]),
                       [PathDeletion(**p) for p in doc.get("paths") or ()],
                       [RowDeletion(**r) for r in doc.get("rows") or ()],
                       [NamespacePurge(n["namespace"], tuple(n["keys"]), n["reason"]) for n in doc.get("namespaces") or ()],
                       [HistoryPrune(**h) for h in doc.get("history") or ()],
                       list(doc.get("skipped") or ()), list(doc.get("problems") or ()),
                       tuple(str(h) for h in doc.get("departed") or ()), tuple(str(h) for h in doc.get("forget") or ()))
        except (KeyError, TypeError, ValueError) as exc:
            raise GCError("the gc plan passed from the plan step is not a gc plan (%s); run maand.core.gc again"
                          % exc) from None

    def lines(self, done: bool = False) -> list:
        """The plan, readable: what goes (or went), per worker, catalog table and KV namespace."""
        verb = "deleted" if done else "delete"
        out = []
        for host, items in _grouped(self.paths, lambda p: p.host):
            out.append("worker %s:" % host)
            out.extend("  %s %s (%s)" % (verb, p.path, p.reason) for p in items)
        for item in self.rows:
            out.append("catalog: %s %s row %s (%s)" % (verb, item.table, item.key, item.reason))
        for item in self.namespaces:
            out.append("kv: %s namespace %s (%d key%s: %s; %s)" % (
                verb, item.namespace, len(item.keys), "" if len(item.keys) == 1 else "s",
                ", ".join(item.keys) or "-", item.reason))
        if self.history:
            out.append("kv history of keys last written more than %s day(s) ago (deleted keys; versions "
                       "beyond the %d kept):" % (_days(self.retain_days), store.MAX_HISTORY))
            for item in self.history:
                what = "the deleted key and its %d revision(s)" % item.revisions if item.whole_key else \
                    "%d revision(s) beyond the %d kept" % (item.revisions, store.MAX_HISTORY)
                out.append("  %s %s %s: %s" % (verb, item.namespace, item.key, what))
        out.extend("left alone: %s" % note for note in self.skipped)
        if self.empty:
            out.append("nothing to collect")
        return out


def _days(value: float) -> str:
    return ("%d" % value) if float(value).is_integer() else ("%g" % value)


def _grouped(items, key):
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return sorted(groups.items())


def retain_days(value: Any) -> float:
    """maand_retain_days: a number of days >= 0 (default 0, as maand's --retain-days)."""
    if value is None or value == "":
        return 0.0
    try:
        days = float(value)
    except (TypeError, ValueError):
        raise GCError("maand_retain_days %r is not a number of days (fix: -e maand_retain_days=7)" % (value,)) from None
    if not math.isfinite(days) or days < 0:
        raise GCError("maand_retain_days %r must be a number of days >= 0 (fix: -e maand_retain_days=7)" % (value,))
    return days


# --- departed workers: the hosts gc is told about ---------------------------------------------------

def host_list(value: Any, name: str) -> tuple:
    """maand_departed / maand_departed_forget: "h1,h2" or a list of host addresses, in order, once each."""
    if value is None or value == "" or value == []:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise GCError("%s %r is not a list of hosts (fix: -e %s=10.0.0.5,10.0.0.6)" % (name, value, name))
    out = []
    for item in items:
        host = item.strip() if isinstance(item, str) else item
        if host == "":
            continue
        if not isinstance(host, str) or not _HOST.match(host):
            raise GCError("%s: %r is not a host address (fix: -e %s=10.0.0.5,10.0.0.6)" % (name, host, name))
        if host not in out:
            out.append(host)
    return tuple(out)


def check_departed(the_catalog: Mapping[str, Any], named: Iterable[str], forget: Iterable[str]) -> None:
    """Refuse (GCError, naming the host and the fix) a named departed host that is a worker of
    workers.json, and a forgotten one that is not in the catalog's departed list or still holds
    allocation rows."""
    cat = _read_catalog(the_catalog)
    named, forget = tuple(named), tuple(forget)
    for host in named:
        if host in cat.live_workers:
            raise GCError("maand_departed: %s is a worker of workspace/workers.json: gc deletes the bucket folder only "
                          "of workers that left it (fix: drop it from maand_departed, or remove it from "
                          "workers.json, build and deploy first)" % host)
        if host in forget:
            raise GCError("%s is in both maand_departed (clean it) and maand_departed_forget (drop its row without "
                          "contact): name it in one of them" % host)
    for host in forget:
        if host not in cat.departed:
            raise GCError("maand_departed_forget: %s is not in the catalog's departed list (%s): there is no row to "
                          "drop (fix: name only departed workers; ansible-inventory -i <bucket>/maand.yml --graph "
                          "maand_departed_workers lists them)" % (host, ", ".join(sorted(cat.departed)) or "empty"))
        if host in cat.holding:
            raise GCError("maand_departed_forget: %s still holds allocation rows in the catalog: run maand.core.deploy "
                          "first (it stops them, or drops the rows of an unreachable departed worker)" % host)


# --- planning ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Catalog:
    keep: set          # (job, worker) of active and disabled allocations
    removed: dict      # (job, worker) -> row, state removed
    live_jobs: set
    live_workers: set
    removed_jobs: list
    removed_workers: list
    departed: set = dataclasses.field(default_factory=set)  # the catalog's departed list
    holding: set = dataclasses.field(default_factory=set)   # workers with any allocation row


def _read_catalog(the_catalog: Mapping[str, Any]) -> _Catalog:
    keep, removed = set(), {}
    for alloc in the_catalog.get("allocations") or ():
        key = (alloc["job"], alloc["worker"])
        if alloc.get("state") == "removed":
            removed[key] = alloc
        else:  # anything not explicitly removed is kept, whatever its state says
            keep.add(key)
    jobs = the_catalog.get("jobs") or ()
    workers = the_catalog.get("workers") or ()
    return _Catalog(keep, {k: v for k, v in removed.items() if k not in keep},
                    {j["name"] for j in jobs if not j.get("removed")},
                    {w["host"] for w in workers if not w.get("removed")},
                    sorted(j["name"] for j in jobs if j.get("removed")),
                    sorted(w["host"] for w in workers if w.get("removed")),
                    set(catalog.departed_hosts(the_catalog)),
                    {worker for dummy, worker in keep} | {worker for dummy, worker in removed})


def job_root(bucket_id: str, job: str) -> str:
    return layout.job_root(bucket_id, job)


def plan(the_catalog: Mapping[str, Any], namespaces: Mapping[str, Mapping[str, Any]],
         listings: Iterable[Listing], now: float, days: float = 0.0,
         departed: Iterable[str] = (), forget: Iterable[str] = ()) -> Plan:
    """The gc plan of a bucket (see the module docstring for the rules). departed: hosts named with
    maand_departed; forget: departed rows to drop without contact (maand_departed_forget)."""
    cat = _read_catalog(the_catalog)
    departed, forget = tuple(departed), tuple(forget)
    check_departed(the_catalog, departed, forget)
    bucket_id = str(the_catalog.get("bucket_id") or "")
    out = Plan(bucket_id, days, now - max(0.0, days) * DAY, departed=departed, forget=forget)
    dropped = set()
    gone = (cat.departed | set(departed)) - cat.live_workers - cat.holding
    for listing in sorted(listings, key=lambda item: item.host):
        if listing.host in forget:
            continue
        if listing.host in gone:
            _plan_departed(out, cat, listing)
            continue
        dropped |= _plan_worker(out, cat, listing)
        if listing.host in (cat.departed | set(departed)) and listing.host in cat.holding:
            out.skipped.append("departed worker %s: its bucket folder %s goes once a deploy has stopped its "
                               "allocations; run maand.core.deploy first" % (listing.host, layout.bucket_root(bucket_id)))
    for host in forget:
        out.rows.append(RowDeletion("departed", host, "forgotten with maand_departed_forget: nothing on it was "
                                    "deleted; whatever it holds of the bucket stays there"))
    left = set(cat.keep) | (set(cat.removed) - dropped)
    _plan_rows(out, cat, left)
    _plan_namespaces(out, cat, namespaces, left)
    _plan_history(out, namespaces, {n.namespace for n in out.namespaces})
    return out


def _plan_worker(out: Plan, cat: _Catalog, listing: Listing) -> set:
    """Folders and removed rows of one worker; returns the (job, worker) rows to drop."""
    host = listing.host
    mine = sorted(job for job, worker in cat.removed if worker == host)
    if not listing.reachable:
        out.problems.append("worker %s could not be read (%s): nothing of it is collected; fix: check that it is "
                            "up and reachable over SSH (ansible -i <bucket>/maand.yml %s -m ping), then run "
                            "maand.core.gc again" % (host, listing.error, host))
        return set()
    busy = set(listing.deployed) | set(listing.pending)
    for job in listing.trees:
        if (job, host) in cat.keep:
            continue
        if job in busy:
            out.skipped.append("%s on %s: the worker still holds a deploy record of it (deploy/%s.json or .pending); "
                               "run maand.core.deploy first, which stops and removes it" % (job, host, job))
            continue
        reason = "removed allocation" if (job, host) in cat.removed else "left by a removed allocation"
        out.paths.append(PathDeletion(host, job, job_root(out.bucket_id, job), reason))
    dropped = set()
    for job in mine:
        if job in busy:
            if job not in listing.trees:
                out.skipped.append("%s on %s: a deploy has not removed it yet; run maand.core.deploy first"
                                   % (job, host))
            continue
        dropped.add((job, host))
        out.rows.append(RowDeletion("allocations", "%s@%s" % (job, host), "removed allocation, cleaned on the worker"))
    return dropped


def _plan_departed(out: Plan, cat: _Catalog, listing: Listing) -> None:
    """A worker that left workers.json and holds no allocation row: its whole bucket folder, then its row."""
    host, root = listing.host, layout.bucket_root(out.bucket_id)
    if not listing.reachable:
        out.problems.append(
            "departed worker %s could not be read (%s): its bucket folder %s (data/ and logs/ included) is left on it "
            "and it stays in the catalog's departed list; fix: bring it up and check SSH (ansible -i <bucket>/maand.yml "
            "%s -m ping), then run maand.core.gc again; if the machine is gone for good, drop its row with "
            "-e maand_departed_forget=%s" % (host, listing.error, root, host, host))
        return
    busy = sorted(set(listing.deployed) | set(listing.pending))
    if busy:
        out.problems.append(
            "departed worker %s still holds deploy records of %s (%s/deploy/<job>.json or .pending): jobs no deploy "
            "stopped (was it unreachable when it left?); nothing of it is deleted; fix: stop them there (make stop in "
            "%s/jobs/<job>) and delete %s/deploy, then run maand.core.gc again"
            % (host, ", ".join(busy), root, root, root))
        return
    if listing.exists:
        out.paths.append(PathDeletion(host, TREE, root, "departed worker: the whole bucket folder, data/ and logs/ "
                                                        "included"))
    if host in cat.departed:
        out.rows.append(RowDeletion("departed", host, "departed worker, cleaned" if listing.exists else
                                    "departed worker, holds nothing of the bucket"))
    elif not listing.exists:
        out.skipped.append("departed worker %s (maand_departed): holds nothing of the bucket (%s is not there)"
                           % (host, root))


def _plan_rows(out: Plan, cat: _Catalog, left: set) -> None:
    jobs_left = {job for job, dummy in left}
    workers_left = {worker for dummy, worker in left}
    for job in cat.removed_jobs:
        if job not in jobs_left:
            out.rows.append(RowDeletion("jobs", job, "removed job without allocations"))
    for host in cat.removed_workers:
        if host not in workers_left:
            out.rows.append(RowDeletion("workers", host, "removed worker without allocations"))


def namespace_owner(namespace: str):
    """("job", job), ("allocation", (job, ip)), ("worker", ip) or None for a namespace gc may purge."""
    match = _ALLOC_NS.match(namespace)
    if match:
        return "allocation", (match.group(1), match.group(2))
    match = _JOB_NS.match(namespace)
    if match:
        return "job", match.group(1)
    match = _WORKER_NS.match(namespace)
    if match:
        return "worker", match.group(1)
    return None


def _purge_reason(cat: _Catalog, owner, left: set):
    jobs_left = {job for job, dummy in left}
    workers_left = {worker for dummy, worker in left}
    kind, what = owner
    if kind == "job":
        job = what
        if job not in cat.live_jobs and job not in jobs_left:
            return "job %s is gone" % job
    elif kind == "allocation":
        job, host = what
        if what not in left and what not in cat.keep:
            if job not in cat.live_jobs and job not in jobs_left:
                return "job %s is gone" % job
            return "allocation %s@%s is gone" % (job, host)
    elif kind == "worker":
        if what not in cat.live_workers and what not in workers_left:
            return "worker %s is gone" % what
    return None


def _plan_namespaces(out: Plan, cat: _Catalog, namespaces: Mapping[str, Mapping[str, Any]], left: set) -> None:
    for namespace in sorted(namespaces):
        owner = namespace_owner(namespace)
        reason = _purge_reason(cat, owner, left) if owner else None
        if reason:
            out.namespaces.append(NamespacePurge(namespace, tuple(sorted(namespaces[namespace])), reason))


def _plan_history(out: Plan, namespaces: Mapping[str, Mapping[str, Any]], purged: set) -> None:
    """As kv/store.KVStore.prune_before(cutoff), listed instead of done."""
    for namespace in sorted(namespaces):
        if namespace in purged:
            continue
        for key, entry in sorted(namespaces[namespace].items()):
            stale, whole = store.stale_revisions(entry, out.cutoff)
            if stale:
                out.history.append(HistoryPrune(namespace, key, stale, whole))


# --- applying (controller side) ---------------------------------------------------------------------

def confirm(planned: Plan, fresh: Plan, failed_paths: Iterable[tuple] = ()) -> Plan:
    """What the commit step may do: only what both the shown plan and a plan of the catalog and KV as
    they are now (re-read under the bucket lock) hold; a removed row whose folder was not deleted stays."""
    failed = set(failed_paths)
    rows = set(fresh.rows)
    spaces = {n.namespace for n in fresh.namespaces}
    history = {(h.namespace, h.key) for h in fresh.history}
    out = Plan(planned.bucket_id, planned.retain_days, planned.cutoff, list(planned.paths))
    out.rows = [r for r in planned.rows if r in rows and not _row_failed(r, failed)]
    out.namespaces = [n for n in planned.namespaces if n.namespace in spaces]
    out.history = [h for h in planned.history if (h.namespace, h.key) in history]
    out.skipped = list(planned.skipped)
    out.problems = list(planned.problems)
    out.departed, out.forget = planned.departed, planned.forget
    return out


def _row_failed(row: RowDeletion, failed: set) -> bool:
    if row.table == "departed":
        return (row.key, TREE) in failed
    if row.table != "allocations":
        return False
    job, dummy, host = row.key.partition("@")
    return (host, job) in failed


def apply_catalog(the_catalog: Mapping[str, Any], confirmed: Plan) -> dict:
    """A new catalog without the plan's rows (only removed rows are ever dropped)."""
    allocs = {r.key for r in confirmed.rows if r.table == "allocations"}
    jobs = {r.key for r in confirmed.rows if r.table == "jobs"}
    workers = {r.key for r in confirmed.rows if r.table == "workers"}
    new = dict(the_catalog)
    new["allocations"] = [a for a in the_catalog.get("allocations") or ()
                          if not (a.get("state") == "removed" and "%s@%s" % (a["job"], a["worker"]) in allocs)]
    new["jobs"] = [j for j in the_catalog.get("jobs") or () if not (j.get("removed") and j["name"] in jobs)]
    new["workers"] = [w for w in the_catalog.get("workers") or () if not (w.get("removed") and w["host"] in workers)]
    return catalog.drop_departed(new, {r.key for r in confirmed.rows if r.table == "departed"})


# --- the controller side: worker answers in, plan and commit out ---------------------------------------


def listings(answers: Mapping[str, Any], hosts: Iterable[str]) -> list:
    """One Listing per host from its maand.core.deploy_state result in answers ({host: result})."""
    out = []
    for host in hosts:
        reg = answers.get(host)
        if not isinstance(reg, Mapping) or not reg:  # {}: no result was registered
            state = {"reachable": False, "error": "its job folders were not listed (host skipped or failed earlier)"}
        elif reg.get("unreachable") or reg.get("failed"):
            state = {"reachable": False, "error": (reg.get("msg") or "unreachable").strip().splitlines()[-1]}
        else:
            state = reg.get("state")
        out.append(Listing.from_state(host, state))
    return out


def deletions(answers: Mapping[str, Any], planned: Plan) -> tuple:
    """(failed (host, job) pairs, problems) of the worker step, from each host's maand.core.gc_worker result."""
    failed, problems = set(), []
    wanted = planned.paths_by_host()
    for host in planned.trees():
        wanted.setdefault(host, []).append(TREE)
    for host, jobs in sorted(wanted.items()):
        reg = answers.get(host)
        if not isinstance(reg, Mapping) or not reg or reg.get("skipped"):
            reg = {"failed": True, "msg": "the deletion did not run"}
        if reg.get("unreachable") or (reg.get("failed") and not reg.get("results")):
            failed.update((host, job) for job in jobs)
            problems.append("worker %s: nothing was deleted (%s); fix: check that it is reachable over SSH, then run "
                            "maand.core.gc again" % (host, (reg.get("msg") or "failed").strip().splitlines()[-1]))
            continue
        for item in reg.get("results") or ():
            if not item.get("ok"):
                failed.add((host, item.get("job")))
                problems.append("worker %s: %s" % (host, item.get("msg")))
    return failed, problems


def _inputs(bucket: str):
    the_catalog = catalog.read_catalog(bucket)
    if the_catalog is None:
        raise GCError("%s/%s is missing: there is nothing to collect; run maand.core.build first"
                      % (bucket, catalog.CATALOG_REL))
    return the_catalog, store.KVStore.load(bucket)


def targets(bucket: str, departed: Any, forget: Any) -> tuple:
    """(named departed hosts, forgotten hosts) from the extra vars, checked against the catalog: the
    playbook adds the named ones to maand_departed_workers before the play that reaches the workers."""
    named, forgotten = host_list(departed, "maand_departed"), host_list(forget, "maand_departed_forget")
    the_catalog, dummy = _inputs(bucket)
    check_departed(the_catalog, named, forgotten)
    return named, forgotten


def plan_bucket(bucket: str, answers: Mapping[str, Any], hosts: Iterable[str], now: float, days: Any,
                departed: Any = None, forget: Any = None) -> Plan:
    """The gc plan of a bucket from its catalog, its KV store and the workers' listings."""
    days = retain_days(days)
    named, forgotten = host_list(departed, "maand_departed"), host_list(forget, "maand_departed_forget")
    hosts = list(hosts)
    missing = [h for h in named if h not in hosts]
    if missing:
        raise GCError("maand_departed: %s not in this run (a --limit that leaves them out?): nothing was collected "
                      "(fix: run without --limit, or add them to it)" % ", ".join(missing))
    the_catalog, kv_store = _inputs(bucket)
    return plan(the_catalog, kv_store.namespaces, listings(answers, hosts), now, days, named, forgotten)


@dataclasses.dataclass
class Commit:
    """What commit() did: the confirmed plan, whether anything changed, and the problems met."""

    done: Plan
    changed: bool
    problems: list


def commit(bucket: str, planned: Plan, states: Mapping[str, Any], deleted: Mapping[str, Any],
           hosts: Iterable[str]) -> Commit:
    """Under the bucket lock: re-plan from fresh inputs, keep what the workers really deleted, then drop
    the catalog rows and KV namespaces and prune KV history. Raises GCError when the bucket changed."""
    hosts = list(hosts)
    failed, problems = deletions(deleted, planned)
    with locks.bucket_lock(bucket, wait=True):
        the_catalog, kv_store = _inputs(bucket)
        if the_catalog.get("bucket_id") != planned.bucket_id:
            raise GCError("data/catalog.json now holds bucket_id %s, not %s: the catalog and KV were left as "
                          "they are; run maand.core.gc again" % (the_catalog.get("bucket_id"), planned.bucket_id))
        fresh = plan(the_catalog, kv_store.namespaces, listings(states, hosts),
                     planned.cutoff + planned.retain_days * DAY, planned.retain_days, planned.departed, planned.forget)
        done = confirm(planned, fresh, failed)
        done.paths = [p for p in done.paths if (p.host, p.job) not in failed]
        new = apply_catalog(the_catalog, done)
        if new != the_catalog:
            catalog.write_catalog(bucket, new)
        for item in done.namespaces:
            kv_store.purge_namespace(item.namespace)
        kv_store.prune_before(done.cutoff, {(h.namespace, h.key) for h in done.history})
        saved = kv_store.save()
    return Commit(done, bool(saved) or new != the_catalog or bool(done.paths), list(planned.problems) + problems)


def count(plan_: Plan) -> int:
    return len(plan_.paths) + len(plan_.rows) + len(plan_.namespaces) + len(plan_.history)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.cat``: a bucket's state as readable tables (maand's ``maand cat ...``; pure, no Ansible).

Views: kv, allocations, jobs, workers, ports, job_commands, certs (from the catalog and the KV store) and
deployments (each allocation's rollout state, hashes and versions from the deploy records, deploy/record.py,
and a run that has not finished yet). Filters: jobs and workers, checked against the catalog (an unknown
name gets "did you mean"); ``active``: only active allocations (maand's ``--active``); ``namespace`` and
``key``: one KV key in full (maand's ``maand cat kv get``). Secrets read ``***`` unless revealed; a
revealed secret needs ``secrets/kv.key``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from typing import Any, Iterable, Mapping, Sequence

from .. import prometheus
from ..catalog import catalog
from ..deploy import record, run
from ..catalog import kv_build
from ..kv import functions, store
from ..bucket import storage
from ..bucket.problems import did_you_mean
from ..errors import MaandError

VIEWS = ("kv", "allocations", "jobs", "workers", "ports", "deployments", "certs", "job_commands", "prometheus")
ACTIVE_VIEWS = ("deployments", "allocations")  # the views maand_active narrows
HASH_CHARS = 12
MASK = store.MASK
MAX_VALUE = 80


class CatError(MaandError):
    """A view or filter that cannot be shown; the message says why and what to do."""


@dataclasses.dataclass
class Table:
    """One view: a title, a header, string rows and notes printed under the table."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        """The table as aligned text lines (title, header, rule, rows, notes)."""
        cells = [self.header] + self.rows
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.header))]

        def fmt(row: Sequence[str]) -> str:
            return "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()

        out = [self.title, fmt(self.header), fmt(["-" * w for w in widths])]
        out += [fmt(r) for r in self.rows] if self.rows else ["(none)"]
        return out + self.notes

    def as_dicts(self) -> list[dict[str, str]]:
        keys = [h.lower() for h in self.header]
        return [dict(zip(keys, row)) for row in self.rows]


@dataclasses.dataclass
class Request:
    """What to show: a view, filters, and whether secrets (and deleted keys) are shown."""

    view: str
    jobs: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    reveal: bool = False
    deleted: bool = False
    active: bool = False
    namespace: str = ""
    key: str = ""
    file: str = ""  # prometheus: print this file of the job's _prometheus/ (maand cat prometheus get)
    scrape: bool = False  # prometheus: the expanded scrape configs (maand cat prometheus scrape)


def split_names(value: Any) -> tuple[str, ...]:
    """ "a,b" or ["a", "b"] -> ("a", "b"); None or "" -> ()."""
    if value is None or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(i).strip() for i in items if str(i).strip())


def cat(bucket_dir: str, request: Request) -> Table:
    """The table of request.view for the bucket; CatError for unknown views, names or no catalog."""
    if request.view not in VIEWS:
        raise CatError("unknown view %r%s; the views are %s" % (request.view, did_you_mean(request.view, VIEWS),
                                                                ", ".join(VIEWS)))
    if (request.file or request.scrape) and request.view != "prometheus":
        raise CatError("file and scrape (-e maand_file, -e maand_scrape) belong to the prometheus view, not %s"
                       % request.view)
    _check_options(request)
    doc = read_catalog(bucket_dir)
    _check_names("job", request.jobs, [j["name"] for j in doc.get("jobs", [])])
    _check_names("worker", request.workers, [w["host"] for w in doc.get("workers", [])])
    if request.key:
        return _kv_get(bucket_dir, request)
    return _BUILDERS[request.view](bucket_dir, doc, request)


def _check_options(request: Request) -> None:
    """Options are refused where they would be ignored (never silently accepted)."""
    if request.active and request.view not in ACTIVE_VIEWS:
        raise CatError("maand_active narrows the %s views only (maand's --active); the %s view has no such filter"
                       % (" and ".join(ACTIVE_VIEWS), request.view))
    if (request.namespace or request.key) and request.view != "kv":
        raise CatError("maand_namespace and maand_key read one KV key: use them with maand_cat=kv")
    if bool(request.namespace) != bool(request.key):
        raise CatError("reading one KV key needs both maand_namespace and maand_key (maand cat kv get NAMESPACE KEY), "
                       "e.g. -e maand_namespace=maand/bucket -e maand_key=bucket_id")
    if request.key and (request.jobs or request.workers or request.deleted):
        raise CatError("maand_key reads one key: maand_jobs, maand_workers and maand_deleted do not apply to it")


def read_catalog(bucket_dir: str) -> dict:
    try:
        doc = catalog.read_catalog(bucket_dir)
    except catalog.CatalogError as exc:
        raise CatError(str(exc)) from None
    if doc is None:
        raise CatError("%s has no data/catalog.json; build the bucket first (ansible-playbook"
                       " maand.core.build -e maand_bucket=%s)" % (bucket_dir, bucket_dir))
    return doc


def _check_names(kind: str, asked: Iterable[str], known: list[str]) -> None:
    for name in asked:
        if name not in known:
            raise CatError("unknown %s %s%s; the %ss are: %s" % (kind, name, did_you_mean(name, known), kind,
                                                                 ", ".join(sorted(known)) or "(none)"))


def _keep(request: Request, job: str | None, worker: str | None) -> bool:
    return ((not request.jobs or job in request.jobs)
            and (not request.workers or worker in request.workers))


def _num(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return ("%s %s" % (value, unit)).strip()


def _when(seconds: float) -> str:
    if not seconds:
        return "-"
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


# --- kv -----------------------------------------------------------------------------------------

def namespace_owner(namespace: str) -> tuple[str | None, str | None]:
    """(job, worker) a namespace belongs to, for filtering: maand/job/api/worker/10.0.0.1 -> both."""
    parts = namespace.split("/")
    if parts[:2] == ["maand", "job"] and len(parts) >= 3:
        return parts[2], (parts[4] if len(parts) >= 5 and parts[3] == "worker" else None)
    if parts[:2] == ["maand", "worker"] and len(parts) >= 3:
        return None, parts[2]
    if parts[:3] == ["vars", "bucket", "job"] and len(parts) == 4:
        return parts[3], None
    if parts[0] in ("vars", "secrets") and parts[1:2] == ["job"] and len(parts) == 3:
        return parts[2], None
    return None, None


def _kv_keep(request: Request, namespace: str) -> bool:
    job, worker = namespace_owner(namespace)
    if request.jobs and job not in request.jobs:
        return False
    if request.workers and worker not in request.workers and not (request.jobs and worker is None):
        return False
    return True


def shown_value(namespace: str, key: str, value: str | None, reveal: bool) -> str:
    """A value as the table shows it: secrets masked, certificates and long text cut to a line."""
    if value is None:
        return "(deleted)"
    if functions.is_secret_ns(namespace) and not reveal:
        return MASK
    first = value.split("\n", 1)[0]
    if key.startswith("certs/") or first != value:
        first += " ..."
    return first if len(first) <= MAX_VALUE else first[:MAX_VALUE - 3] + "..."


def _kv_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("KV of %s" % bucket_dir, ("NAMESPACE", "KEY", "VALUE", "VERSION", "MODIFIED"))
    if not store.KVStore.exists(bucket_dir):
        kv = functions.compute_kv(doc, functions.load_job_vars(bucket_dir, doc))
        for ns in sorted(n for n in kv if _kv_keep(request, n)):
            table.rows += [(ns, k, shown_value(ns, k, v, request.reveal), "-", "-") for k, v in sorted(kv[ns].items())]
        table.notes.append("computed from data/catalog.json: build has not written data/kv.json yet (rebuild)")
        return table
    try:
        kv_store = store.KVStore.load(bucket_dir)
        for ns in sorted(n for n in kv_store.namespaces if _kv_keep(request, n)):
            for key, entry in sorted(kv_store.namespaces[ns].items()):
                if entry.deleted and not request.deleted:
                    continue
                value = kv_store.get(ns, key, reveal_secrets=request.reveal) if not entry.deleted else None
                table.rows.append((ns, key, shown_value(ns, key, value, request.reveal), str(entry.version),
                                   _when(entry.modified)))
    except store.KVStoreError as exc:
        raise CatError(str(exc)) from None
    if not request.reveal and any(functions.is_secret_ns(r[0]) for r in table.rows):
        table.notes.append("secrets are shown as %s (-e maand_reveal=true decrypts them)" % MASK)
    return table


def _kv_get(bucket_dir: str, request: Request) -> Table:
    """One key in full (maand cat kv get): namespace, key, value, version, modified; a missing or deleted key
    is an error naming the keys of the namespace."""
    ns, key = request.namespace, request.key
    if not store.KVStore.exists(bucket_dir):
        raise CatError("%s has no data/kv.json: build the bucket first (ansible-playbook maand.core.build)" % bucket_dir)
    try:
        kv_store = store.KVStore.load(bucket_dir)
        keys = kv_store.namespaces.get(ns)
        if keys is None:
            raise CatError("no KV namespace %s%s" % (ns, did_you_mean(ns, sorted(kv_store.namespaces))))
        entry = keys.get(key)
        live = sorted(k for k, e in keys.items() if not e.deleted)
        if entry is None or entry.deleted:
            raise CatError("key %s not found in %s%s%s" % (
                key, ns, " (it was deleted)" if entry is not None else "", did_you_mean(key, live)
                or "; its keys are: %s" % (", ".join(live) or "(none)")))
        value = kv_store.get(ns, key, reveal_secrets=request.reveal)
    except store.KVStoreError as exc:
        raise CatError(str(exc)) from None
    secret = functions.is_secret_ns(ns) and not request.reveal
    table = Table("KV key %s %s of %s" % (ns, key, bucket_dir), ("FIELD", "VALUE"),
                  [("namespace", ns), ("key", key), ("value", MASK if secret else value),
                   ("version", str(entry.version)), ("modified", _when(entry.modified))])
    if secret:
        table.notes.append("the value is a secret, shown as %s (-e maand_reveal=true decrypts it)" % MASK)
    return table


# --- catalog views ------------------------------------------------------------------------------

def _allocations_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Allocations of %s" % bucket_dir,
                  ("JOB", "WORKER", "ALLOC_ID", "STATE", "ZONE", "MEMORY", "CPU", "SEQ"))
    for a in sorted(doc.get("allocations", []), key=lambda a: (a["job"], a["worker"])):
        if _keep(request, a["job"], a["worker"]) and not (request.active and a.get("state") != "active"):
            table.rows.append((a["job"], a["worker"], str(a.get("alloc_id") or "-"), str(a.get("state")),
                               a.get("zone") or "-", _num(a.get("memory_mb"), "MB"), _num(a.get("cpu_mhz"), "MHz"),
                               str(a.get("deployment_seq", 0))))
    return table


def _jobs_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Jobs of %s" % bucket_dir, ("JOB", "VERSION", "ALLOCATIONS", "SEQ", "MEMORY", "CPU",
                                              "SELECTORS", "RESTART"))
    allocs = doc.get("allocations", [])
    for job in doc.get("jobs", []):
        name = job["name"]
        mine = [a for a in allocs if a["job"] == name and _keep(request, name, a["worker"])]
        if (request.jobs and name not in request.jobs) or (request.workers and not mine):
            continue
        active = sum(1 for a in mine if a.get("state") == "active")
        counts = "removed" if job.get("removed") else "%d active / %d" % (active, len(mine))
        table.rows.append((name, str(job.get("version") or "-"), counts, str(job.get("deployment_seq", 0)),
                           _num(job.get("memory_mb"), "MB"), _num(job.get("cpu_mhz"), "MHz"),
                           ",".join(job.get("selectors") or []) or "-", str(job.get("restart_policy") or "-")))
    return table


def _workers_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Workers of %s" % bucket_dir, ("WORKER", "HOSTNAME", "ZONE", "MEMORY", "CPU", "POSITION",
                                                 "LABELS", "JOBS"))
    allocs = doc.get("allocations", [])
    for w in doc.get("workers", []):
        host = w["host"]
        jobs = sorted({a["job"] for a in allocs if a["worker"] == host and a.get("state") == "active"})
        if request.workers and host not in request.workers:
            continue
        if request.jobs and not set(jobs) & set(request.jobs):
            continue
        table.rows.append((host, w.get("hostname") or "-", w.get("zone") or "-", _num(w.get("memory_mb"), "MB"),
                           _num(w.get("cpu_mhz"), "MHz"), _num(w.get("position")),
                           ",".join(w.get("labels") or []) or "-",
                           "(removed)" if w.get("removed") else ",".join(jobs) or "-"))
    return table


def _ports_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Ports of %s" % bucket_dir, ("JOB", "NAME", "PORT"))
    for job in doc.get("jobs", []):
        if request.jobs and job["name"] not in request.jobs:
            continue
        for name, port in sorted((job.get("ports") or {}).items()):
            table.rows.append((job["name"], name, _num(port)))
    if request.workers:
        table.notes.append("ports belong to jobs, not workers: the workers filter does not apply")
    return table


def _job_commands_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    """maand cat job_commands (cat/cat_job_commands.go): job, command, events, what it demands."""
    table = Table("Job commands of %s" % bucket_dir, ("JOB", "COMMAND", "EXECUTED_ON", "DEMAND_JOB",
                                                      "DEMAND_COMMAND", "DEMAND_CONFIG"))
    for job in sorted(doc.get("jobs", []), key=lambda j: j["name"]):
        if (request.jobs and job["name"] not in request.jobs) or job.get("removed"):
            continue
        for name, spec in sorted((job.get("commands") or {}).items()):
            demands = spec.get("demands") or {}
            config = demands.get("config")
            table.rows.append((job["name"], name, ",".join(spec.get("executed_on") or []) or "-",
                               demands.get("job") or "-", demands.get("command") or "-",
                               json.dumps(config, sort_keys=True) if config else "-"))
    if request.workers:
        table.notes.append("job commands belong to jobs, not workers: the workers filter does not apply")
    return table


# --- certs (maand cat certs: cat/certs.go, certs/catalog.go) -------------------------------------

def _certs_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    from .. import certs
    from ..bucket import model  # late: cryptography only for this view

    report = model.Report()  # maand.conf problems are the build's to report; only the buffer is read here
    bucket = model.Bucket(bucket_dir)
    model.load_maand_conf(bucket, report)
    buffer = bucket.conf.get("certs_renewal_buffer") if isinstance(bucket.conf.get("certs_renewal_buffer"), int) else 0
    table = Table("Certificates of %s" % bucket_dir, ("SCOPE", "JOB", "WORKER", "CERT", "COMMON_NAME", "NOT_AFTER",
                                                      "DAYS_LEFT", "STATUS"))
    ca_path = os.path.join(bucket_dir, certs.CA_CERT_REL)
    if os.path.isfile(ca_path) and not request.jobs and not request.workers:
        with open(ca_path, encoding="utf-8", errors="replace") as handle:
            table.rows.append(_cert_row("ca", "", "", "ca", certs.cert_status(handle.read(), buffer)))
    try:
        snapshot = kv_build.read_kv(bucket_dir)
    except functions.KVError as exc:
        raise CatError(str(exc)) from None
    for ns, keys in sorted(snapshot.items()):
        job, worker = namespace_owner(ns)
        if not ns.startswith("maand/job/") or worker is None or not _keep(request, job, worker):
            continue
        for key in sorted(k for k in keys if k.startswith("certs/") and k.endswith(".crt")):
            name = key[len("certs/"):-len(".crt")]
            table.rows.append(_cert_row("job", job, worker, name, certs.cert_status(keys[key], buffer)))
    table.notes.append("expiring: inside certs_renewal_buffer (%d days); the next build issues it again" % buffer)
    return table


def _cert_row(scope: str, job: str, worker: str, name: str, status: Any) -> tuple[str, ...]:
    return (scope, job or "-", worker or "-", name, status.common_name or "-", status.not_after or "-",
            status.days_left or "-", status.status)


# --- deployments --------------------------------------------------------------------------------

@dataclasses.dataclass
class RunRecord:
    """What the controller keeps of a deploy run (data/.deploy-run/<run>: failed or in progress)."""

    run_id: str
    rows: dict[tuple[str, str], dict]
    outcome: dict[tuple[str, str], str]


def last_run(bucket_dir: str) -> RunRecord | None:
    """The newest run's plan rows and per-allocation outcome, or None when there is none: the run
    folder's, or with a shared state store the newest run record there (any controller's run)."""
    kv_store = storage.store(bucket_dir)
    if kv_store.kind != "file":
        records = kv_store.runs(limit=1)
        if not records:
            return None
        run_id, plan, state = records[-1][0], _loads(records[-1][1]), _loads(records[-1][2])
        return _run_record(run_id, plan, state)
    root = run.runs_root(bucket_dir)
    try:
        names = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
    except OSError:
        return None
    if not names:
        return None
    plan, state = run.read_run(os.path.join(root, names[-1]))
    return _run_record(names[-1], plan or {}, state or {})


def _loads(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _run_record(run_id: str, plan: dict, state: dict) -> RunRecord:
    rows = {(r.get("job"), r.get("worker")): r for r in plan.get("rows") or [] if r.get("job")}
    done = {(d.get("job"), d.get("host")) for d in state.get("done") or []}
    failed = set(state.get("failed_by_job") or {})
    blocked = set(state.get("blocked") or [])
    outcome = {}
    for key, row in rows.items():
        if row.get("action") in ("skip", "hold", None):
            outcome[key] = "skipped"
        elif key in done:
            outcome[key] = "done"
        elif key[0] in failed:
            outcome[key] = "failed"
        elif key[0] in blocked:
            outcome[key] = "blocked"
        else:
            outcome[key] = "not reached"
    return RunRecord(run_id, rows, outcome)


def _short(digest: Any) -> str:
    return str(digest)[:HASH_CHARS] if digest else "-"


def rollout_state(alloc: Mapping[str, Any], job_version: str, entry: Any, deploying: bool) -> str:
    """An allocation's rollout state, maand's words where they exist (cat/cat_deployments.go rolloutStatus):
    removed / disabled from the catalog (disabled_restart when build placed another version than the one
    promoted); deploying while an unfinished run plans a change to it; new when no
    deploy record knows it; restart when build placed another version than the one promoted; else the state
    its last run left (promoted, health_failed, failed, reverted, rolled_back, stopped, held, pending,
    unreachable)."""
    state = alloc.get("state")
    if state == "disabled" and entry is not None and entry.version and entry.version != job_version:
        return "disabled_restart"  # maand: a disabled allocation whose version changed since its promotion
    if state in ("removed", "disabled"):
        return str(state)
    if deploying:
        return "deploying"
    if entry is None:
        return "new"
    if entry.state == "promoted" and entry.version and entry.version != job_version:
        return "restart"
    return entry.state


def _unfinished(bucket_dir: str, latest: Any) -> RunRecord | None:
    """The newest run that has no deploy record yet (running, or killed before its finish), or None."""
    last = last_run(bucket_dir)
    if last is None or (latest is not None and last.run_id <= latest.run_id):
        return None
    return last


def _deployments_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Deployments of %s" % bucket_dir, ("JOB", "WORKER", "ALLOC_ID", "ROLLOUT", "HASH", "FAILED_HASH",
                                                     "CURRENT_VERSION", "NEW_VERSION", "LAST_RUN", "RESULT"))
    versions = {j["name"]: str(j.get("version") or "0.0.0") for j in doc.get("jobs", [])}
    try:
        latest = record.latest(bucket_dir)
    except storage.StateStoreError as exc:
        raise CatError(str(exc)) from None
    rollout = latest.rollout if latest else {}
    unfinished = _unfinished(bucket_dir, latest)
    for a in sorted(doc.get("allocations", []), key=lambda a: (a["job"], a["worker"])):
        if not _keep(request, a["job"], a["worker"]) or (request.active and a.get("state") != "active"):
            continue
        key = "%s@%s" % (a["job"], a["worker"])
        entry = rollout.get(key)
        planned = (unfinished.rows.get((a["job"], a["worker"])) if unfinished else None) or {}
        deploying = planned.get("action") not in (None, "skip", "hold")
        table.rows.append((a["job"], a["worker"], str(a.get("alloc_id") or "-"),
                           rollout_state(a, versions.get(a["job"], "0.0.0"), entry, deploying),
                           _short(entry.hash if entry else None), _short(entry.failed_hash if entry else None),
                           (entry.version if entry else None) or "-", versions.get(a["job"], "-"),
                           entry.run_id if entry else "-", (entry.result if entry else "") or "-"))
    if latest is None:
        table.notes.append("no deploy record is kept yet: the deploy writes one when it finishes (maand.core.logs"
                           " lists them)")
    else:
        table.notes.append("from the deploy records (last: %s, %s, %s); HASH is the tree hash promoted on the worker,"
                           " FAILED_HASH the one whose rollout failed; a workspace change not yet deployed shows in"
                           " maand.core.deploy --check" % (latest.run_id, latest.outcome, latest.finished))
    if unfinished is not None:
        run_id = unfinished.run_id
        table.notes.append("run %s has not finished (running, or stopped before its finish; its plan: "
                           "data/.deploy-run/%s): its allocations read deploying" % (run_id, run_id))
    return table


# --- prometheus (maand cat prometheus [get <job> <path> | scrape]: cat/cat_prometheus.go) -------------

class _Text(Table):
    """A file or a YAML fragment printed as it is: one row per line, no title, header or rule."""

    def lines(self) -> list[str]:
        return [row[0] for row in self.rows] + self.notes


def _prometheus_table(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    if request.file and request.scrape:
        raise CatError("give either file (-e maand_file=PATH, one job's file) or scrape (-e maand_scrape=true)")
    try:
        if request.scrape:
            return _prometheus_scrape(bucket_dir, doc, request)
        if request.file:
            return _prometheus_file(bucket_dir, doc, request)
        return _prometheus_summary(bucket_dir, doc, request)
    except (prometheus.PrometheusError, functions.KVError) as exc:
        raise CatError(str(exc)) from None


def _prometheus_summary(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    table = Table("Prometheus of %s" % bucket_dir, ("JOB", "SCRAPE", "ALERTS", "RUNBOOKS", "DASHBOARDS"))
    for folder in prometheus.collect(bucket_dir, doc):
        if request.jobs and folder.job not in request.jobs:
            continue
        runbooks = [r for r in _files_under(folder.root, "runbooks") if r.endswith(".md")]
        dashboards = [r for r in _files_under(folder.root, "dashboards")
                      if os.path.basename(r) != ".dashboardignore"]
        if not (folder.scrape_file or folder.alerts or runbooks or dashboards):
            continue
        table.rows.append((folder.job, "yes" if folder.scrape_file else "-", str(len(folder.alerts)),
                           str(len(runbooks)), str(len(dashboards))))
    if not table.rows:
        raise CatError("no job%s ships a _prometheus/ folder with scrape.yaml, alerts/, runbooks/ or dashboards/"
                       " (workspace/jobs/<job>/_prometheus/, docs/templates.md)"
                       % (" of %s" % ", ".join(request.jobs) if request.jobs else ""))
    servers = prometheus.server_jobs(bucket_dir, doc)
    table.notes.append("Prometheus server job: %s" % ", ".join(servers) if servers else
                       "no job ships prometheus.yml(.tpl): build does not check _prometheus/ and deploy ships"
                       " none of it, as maand")
    table.notes.append("one file: -e maand_jobs=JOB -e maand_file=alerts/FILE.yaml; the scrape configs a deploy"
                       " renders: -e maand_scrape=true")
    if request.workers:
        table.notes.append("_prometheus/ belongs to jobs, not workers: the workers filter does not apply")
    return table


def _files_under(root: str, sub: str) -> list[str]:
    base = os.path.join(root, sub)
    found = []
    for current, dirs, files in os.walk(base):
        dirs.sort()
        found += [os.path.relpath(os.path.join(current, name), base).replace(os.sep, "/") for name in files]
    return sorted(found)


def prometheus_rel_path(path: str) -> str:
    """maand's NormalizePrometheusRelPath: "", "scrape" -> scrape.yaml; "scrape.tpl" -> scrape.yaml.tpl."""
    path = path.strip().lstrip("/")
    if path in ("", "scrape", "scrape.yaml"):
        return "scrape.yaml"
    return "scrape.yaml.tpl" if path in ("scrape.yaml.tpl", "scrape.tpl") else path


def _prometheus_file(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    if len(request.jobs) != 1:
        raise CatError("file %s: name its job, exactly one (-e maand_jobs=JOB)" % request.file)
    job = next(j for j in doc.get("jobs", []) if j["name"] == request.jobs[0])
    rel = prometheus_rel_path(request.file)
    folder = "%s/%s" % (job.get("path") or "workspace/jobs/%s" % job["name"], prometheus.FOLDER)
    root = os.path.realpath(os.path.join(bucket_dir, folder))
    target = os.path.realpath(os.path.join(root, rel))
    if not target.startswith(root + os.sep):
        raise CatError("invalid prometheus path %r: it leaves %s" % (request.file, folder))
    if not os.path.isfile(target):
        raise CatError("%s/%s not found (the files: %s)" % (folder, rel, ", ".join(_files_under(root, "")) or "none"))
    with open(target, "rb") as handle:
        text = handle.read(prometheus.MAX_FILE_BYTES).decode("utf-8", "replace")
    table = _Text("%s/%s" % (folder, rel), ("LINE",))
    table.rows = [(line,) for line in text.rstrip("\n").split("\n")]
    return table


def _prometheus_scrape(bucket_dir: str, doc: Mapping[str, Any], request: Request) -> Table:
    if request.workers:
        raise CatError("the scrape configs cover every active allocation: the workers filter does not apply")
    kv = kv_build.read_kv(bucket_dir, reveal_secrets=request.reveal, mask=None if request.reveal else MASK)
    rendered = prometheus.render_scrape(bucket_dir, doc, kv, request.jobs, reveal=request.reveal)
    text = rendered.text
    if not text.strip() and not rendered.hidden:
        raise CatError("no expanded scrape configs%s: no job with _prometheus/scrape.yaml has an active"
                       " allocation, or the bucket has no Prometheus server job (build first)"
                       % (" for %s" % ", ".join(request.jobs) if request.jobs else ""))
    table = _Text("Scrape configs of %s" % bucket_dir, ("LINE",))
    table.rows = [(line,) for line in text.lstrip("\n").rstrip("\n").split("\n")] if text.strip() else []
    if rendered.hidden:
        table.notes.append("the scrape configs of %s read a secret and are left out (-e maand_reveal=true shows them)"
                           % ", ".join(rendered.hidden))
    return table


_BUILDERS = {
    "kv": _kv_table, "allocations": _allocations_table, "jobs": _jobs_table,
    "workers": _workers_table, "ports": _ports_table, "deployments": _deployments_table,
    "certs": _certs_table, "job_commands": _job_commands_table,
    "prometheus": _prometheus_table,
}

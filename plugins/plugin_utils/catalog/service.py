# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build: workspace files -> model -> placement -> validation -> catalog.

`compute()` is read-only (the inventory plugin uses it); `build()` also writes the catalog, under
the bucket lock and never beside a running deploy (the deploy lock), only when there is no error.
"""

from __future__ import annotations

import contextlib
import gc
import uuid

from .. import certs, jobspec, kv
from .. import prometheus
from ..bucket import locks
from . import (
    catalog, fingerprint,
    kv_build, maand_db,
)
from ..placement.explain import report_shortfalls
from ..bucket.job_checks import resolve_batch_size, resolve_health
from ..bucket.model import WORKERS_FILE, data_dir_problem, load_bucket
from ..placement.place import place
from ..bucket.problems import Report
from ..placement.select import compile_rules
from .validate import assign_ports, check_capacity, check_counts, deployment_sequence


UPDATE_SEQ_FLOOR = "update_seq_floor"  # catalog key: maand's update_seq at takeover (absent otherwise)


class BuildResult:
    def __init__(self):
        self.bucket = None
        self.report = None
        self.previous = None
        self.placement = None
        self.catalog = None
        self.changes = []
        self.changed = False
        self.written = False
        self.explanations = {}  # job -> explanation lines, for jobs with fewer allocations than asked for
        self.kv = None  # kv_build.Prepared: what build writes into data/kv.json
        self.maand = None  # maand_db.MaandDB when this build takes the bucket over from maand


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector: a build allocates ~10 objects per worker and allocation and
    frees them by reference counting, so the collector's passes over the growing heap are pure cost
    (10-25% of a 10,000-worker build, bench/bench_placement.py). Restored on exit, even on error."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def compute(bucket_dir, bucket_id=None, new_bucket_id=False, inputs=None, strict=False, allow_remove_all=False):
    """See _compute; runs with the cyclic garbage collector paused (_gc_paused)."""
    with _gc_paused():
        return _compute(bucket_dir, bucket_id, new_bucket_id, inputs, strict, allow_remove_all)


def _compute(bucket_dir, bucket_id=None, new_bucket_id=False, inputs=None, strict=False, allow_remove_all=False):
    """Validate the bucket and assemble the catalog it would produce, without writing anything.
    `bucket_id` is used only when there is no previous catalog and no recorded id (None: leave it
    unset); `new_bucket_id` lets a build replace an invalid catalog (catalog.previous_for_build);
    `inputs` (the fingerprint of the workspace, taken before reading it) goes into the catalog;
    `strict` (maand_strict): whatever maand.core does not honour is an error, not a warning; `allow_remove_all`
    (maand_allow_remove_all): a job of the workspace may lose every allocation it had (check_remove_all)."""
    result = BuildResult()
    report = result.report = Report()
    result.previous, kept_id = catalog.previous_for_build(bucket_dir, report, new_bucket_id)
    bucket_id = kept_id or bucket_id
    if result.previous is None and kept_id is None:
        result.maand = _take_over(bucket_dir, report)
        bucket_id = result.maand.bucket_id if result.maand else bucket_id
    elif maand_db.exists(bucket_dir):
        report.warn("ErrInvalidMaandDB", maand_db.DB_REL, "", "not read: this bucket was taken over (maand.core keeps"
                    " %s); maand's database no longer follows the bucket" % catalog.CATALOG_REL,
                    "move data/maand.db out of data/ (keep it as a backup) and stop using maand on this bucket")
    bucket, dummy = load_bucket(bucket_dir, report, job_set_checks=(prometheus.check_prometheus,))
    compile_rules(bucket, report)  # constraints, hardware, placement (they reference other jobs)
    result.bucket = bucket
    result.kv = kv_build.check(bucket, report)  # templates parse, vars.toml reads
    specs = jobspec.check(bucket, report)  # job specs (seed 004): containers, parents, environment
    workers_loaded = not any(p.file == WORKERS_FILE for p in report.errors)
    placement = result.placement = place(bucket, result.previous, report)
    report_shortfalls(bucket, placement, report)  # placement returns shortfalls as data; explain words them
    check_remove_all(bucket, result.previous, placement.allocations, report, allow_remove_all)
    ports = assign_ports(bucket, result.previous, report)
    seq = deployment_sequence(bucket, report)
    for alloc in placement.allocations:
        if alloc.state != "removed":
            alloc.deployment_seq = seq.get(alloc.job, 0)
    if workers_loaded:
        check_capacity(bucket, placement.allocations, report)
        check_counts(bucket, placement.allocations, report)
    if strict:
        report.apply_strict()
    if report.ok:
        result.catalog = assemble(bucket, placement, ports, seq, result.previous, bucket_id, specs)
        _keep_worker_ids(result.catalog, result.previous, result.maand)
        _keep_update_seq(result.catalog, result.previous, result.maand)
        catalog.keep_departed(result.catalog, result.previous)
        if inputs is not None:
            result.catalog["inputs"] = inputs
        if not kv_build.check_prometheus(bucket_dir, result.catalog, result.kv, report):
            result.catalog = None  # scrape.yaml.tpl failed: nothing is written
        elif not certs.check(bucket_dir, result.catalog, bucket.conf, report):
            result.catalog = None  # a corrupt or half-present CA: nothing is written
        keep_warnings(result.catalog, report)
    return result


MAX_KEPT_WARNINGS = 50


def keep_warnings(cat, report):
    """The build's warnings kept in the catalog (`build_warnings`, only when there are any): the deploy plan
    repeats them (deploy/service.build_warning_lines)."""
    if cat is None or not report.warnings:
        return
    texts = [str(w) for w in report.warnings]
    more = len(texts) - MAX_KEPT_WARNINGS
    cat["build_warnings"] = texts[:MAX_KEPT_WARNINGS] + (["and %d more (run maand.core.build)" % more]
                                                         if more > 0 else [])


def check_remove_all(bucket, previous, allocations, report, allow=False):
    """A job still in the workspace that had allocations (active or disabled) and would now have none but removed
    ones: an error (a selector typo, a label dropped, its workers gone), or with `allow` a warning (issue 31)."""
    had = {}
    for alloc in (previous or {}).get("allocations") or ():
        if alloc.get("state") != "removed":
            had.setdefault(alloc.get("job"), []).append(alloc.get("worker"))
    keeps = {a.job for a in allocations if a.state != "removed"}
    for name in sorted(set(had) & set(bucket.jobs) - keeps):
        job = bucket.jobs[name]
        hosts = sorted(had[name])
        message = ("job %s had %d allocation%s (%s) and this build places it on no worker (selectors: %s): every one "
                   "would be removed" % (name, len(hosts), "" if len(hosts) == 1 else "s", ", ".join(hosts[:5])
                                         + (", ..." if len(hosts) > 5 else ""), ", ".join(job.selectors) or "none"))
        rel = "%s/manifest.json" % job.path
        if allow:
            report.warn("ErrRemoveAll", rel, "selectors", message + " (maand_allow_remove_all=true)",
                        "deploy removes them; check the selectors if that is not meant")
        else:
            report.error("ErrRemoveAll", rel, "selectors", message,
                         "check the selectors and the workers' labels (ansible-playbook maand.core.explain -e job=%s); "
                         "to remove them all, build with -e maand_allow_remove_all=true; to retire the job, delete "
                         "workspace/jobs/%s" % (name, name))


def _take_over(bucket_dir, report):
    """maand's database when there is one and no catalog yet (docs/certs.md, README: taking over)."""
    try:
        db = maand_db.read(bucket_dir)
    except maand_db.MaandDBError as exc:
        report.error("ErrInvalidMaandDB", maand_db.DB_REL, "", str(exc),
                     "see the README, Taking over a bucket from maand")
        return None
    if db is not None:
        report.warn("ErrTakeover", maand_db.DB_REL, "", "taking the bucket over from maand: bucket_id %s, update_seq"
                    " %d, %d KV keys, %d deployed allocations kept" % (
                        db.bucket_id, db.update_seq, sum(len(k) for k in db.kv.values()), len(db.deployed)),
                    "deploy next: allocations maand runs are adopted without a restart")
    return db


def _keep_worker_ids(cat, previous, maand):
    """Workers keep the worker_id maand gave them (previous catalog, else maand.db)."""
    known = dict((maand.worker_ids if maand else {}))
    for worker in (previous or {}).get("workers", []):
        if worker.get("worker_id"):
            known[worker["host"]] = worker["worker_id"]
    for worker in cat["workers"]:
        if worker["host"] in known:
            worker["worker_id"] = known[worker["host"]]


def _keep_update_seq(cat, previous, maand):
    """maand.db's update_seq, taken over once and then carried by every build: deploy's update_seq stays
    above it (deploy/plan.seen_update_seq), even where a worker reports less than maand reached."""
    floor = maand.update_seq if maand else int((previous or {}).get(UPDATE_SEQ_FLOOR) or 0)
    if floor > 0:
        cat[UPDATE_SEQ_FLOOR] = floor


def explain_short_jobs(result, limit=20):
    """Explanation text for every job that got fewer active allocations than it asked for
    (placement.count or min_allocations_count); only those, so a normal build pays nothing."""
    from ..placement import explain

    if result.placement is None or result.placement.scheduler is None:
        return {}
    out = {}
    for name in explain.short_jobs(result.bucket, result.placement):
        out[name] = explain.explain_lines(result.bucket, result.placement, name, show="rejected", limit=limit)
    result.explanations = out
    return out


def _batch_sizes(job, count):
    """({field: batch size}, {field: "N%"} of the fields written as a percentage): a percentage resolves
    over the job's `count` active allocations (rounded up, at least 1); the catalog keeps maand's ints."""
    sizes, percents = {}, {}
    for field in ("max_concurrent_starts", "max_concurrent_upgrades"):
        value = getattr(job, field)
        sizes[field] = resolve_batch_size(value, count)
        if sizes[field] != value:
            percents[field] = value
    if percents:
        percents["of"] = count
    return sizes, percents


def assemble(bucket, placement, ports, seq, previous, bucket_id=None, specs=None):
    if previous and previous.get("bucket_id"):
        bucket_id = previous["bucket_id"]
    workers = [w.as_catalog() for w in bucket.workers] + placement.removed_workers
    jobs = []
    active = {}
    for alloc in placement.allocations:
        if alloc.state == "active":
            active[alloc.job] = active.get(alloc.job, 0) + 1
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        sizes, percents = _batch_sizes(job, active.get(name, 0))
        jobs.append({
            "name": name, "version": job.version, "selectors": list(job.selectors), "path": job.path,
            "min_memory_mb": job.min_memory_mb, "max_memory_mb": job.max_memory_mb, "memory_mb": job.memory_mb,
            "memory_source": job.memory_source, "min_cpu_mhz": job.min_cpu_mhz, "max_cpu_mhz": job.max_cpu_mhz,
            "cpu_mhz": job.cpu_mhz, "cpu_source": job.cpu_source, "deployment_seq": seq.get(name, 0),
            "ports": ports.get(name, {}), "removed": False, "restart_policy": job.restart_policy,
            "restart_globs": job.restart_globs, "max_concurrent_starts": sizes["max_concurrent_starts"],
            "max_concurrent_upgrades": sizes["max_concurrent_upgrades"], "min_allocations_count": job.min_allocations_count,
            "health_check": job.health_check, "makefile": job.makefile, "vars": job.vars,
            "commands": {c.name: {"executed_on": c.executed_on,
                                  "demands": dict({"job": c.demand_job, "command": c.demand_command},
                                                  **({"config": c.demand_config} if c.demand_config else {}))}
                         for c in job.commands.values()},
        })
        gate, gate_errors = resolve_health(jobs[-1])  # port names -> the ports assigned above
        if not gate_errors:  # else deploy fails that job alone, naming the probe
            jobs[-1]["health_gate"] = gate  # the gate spec deploy runs, without re-validating
        if job.rules is not None and not job.rules.plain:
            jobs[-1].update(job.rules.as_catalog())  # added keys only for jobs that use them
        if job.certs:
            jobs[-1]["certs"] = [c.as_catalog() for c in job.certs]  # only jobs that declare certs
        if job.start_gate != "last_batch":
            jobs[-1]["start_gate"] = job.start_gate  # rollout options: only jobs that set them
        if job.auto_revert:
            jobs[-1]["auto_revert"] = True
        if job.canary:
            jobs[-1]["canary"] = job.canary
        if percents:
            jobs[-1]["batch_percent"] = percents  # {"max_concurrent_upgrades": "34%", "of": 3}: resolved above
        for key in ("min_healthy_time", "progress_deadline", "auto_promote"):
            if getattr(job, key):
                jobs[-1][key] = getattr(job, key)
        if job.shutdown_delay:
            jobs[-1]["shutdown_delay"] = job.shutdown_delay
        if specs and name in specs:
            jobs[-1]["spec"] = specs[name]  # only jobs that use job-spec fields (docs/jobspec.md)
    jobs.extend(placement.removed_jobs)
    jobs.sort(key=lambda j: j["name"])
    return {
        "format": catalog.CATALOG_FORMAT,
        "bucket_id": bucket_id,
        "job_config_selector": bucket.job_config_selector,
        "job_config_file": bucket.job_config_file,
        "bucket_vars": bucket.bucket_vars,
        "port_min": bucket.port_min,
        "port_max": bucket.port_max,
        "workers": workers,
        "jobs": jobs,
        "allocations": [a.as_catalog() for a in placement.allocations],
    }


def build(bucket_dir, check_mode=False, new_bucket_id=False, strict=False, purge_job_kv=False, allow_remove_all=False):
    """Validate and, unless check_mode, write data/catalog.json. Returns a BuildResult; nothing is
    written when result.report has errors. Raises _locks.LockBusy if another run holds the lock, and
    _locks.DeployInProgress (a LockBusy) while a deploy of the bucket runs (a check-mode build is not refused).
    purge_job_kv: maand build --purge-job-kv (kv_build.write). allow_remove_all: maand_allow_remove_all
    (check_remove_all)."""
    if check_mode or data_dir_problem(bucket_dir):  # never lock or write through a data/ symlink
        result = compute(bucket_dir, bucket_id="(new)", new_bucket_id=new_bucket_id,
                         inputs=fingerprint.compute(bucket_dir), strict=strict, allow_remove_all=allow_remove_all)
        _finish(result)
        return result
    # a running deploy (of any controller) holds the deploy lock: a writing build waits its turn (review 4, N10)
    with locks.bucket_lock(bucket_dir), locks.no_deploy_running(bucket_dir):
        # the fingerprint is taken before the workspace is read: an edit during the build makes it stale
        inputs = fingerprint.compute(bucket_dir)
        result = compute(bucket_dir, bucket_id=str(uuid.uuid4()), new_bucket_id=new_bucket_id, inputs=inputs,
                         strict=strict, allow_remove_all=allow_remove_all)
        _finish(result)
        _import_maand_kv(bucket_dir, result)
        issued = _issue_certs(bucket_dir, result)
        if result.catalog is not None and result.changed:
            catalog.write_catalog(bucket_dir, result.catalog)
            result.written = True
        if result.catalog is not None:
            _env_key(bucket_dir, result.catalog)
            result.changes.extend(issued.lines)
            kv_lines = kv_build.write(bucket_dir, result.catalog, result.kv, extra=issued.kv, purge_job_kv=purge_job_kv)
            result.changes.extend(kv_lines)
            result.changed = result.changed or bool(kv_lines)
    return result


def _env_key(bucket_dir, cat):
    """A job spec with an environment needs the bucket's KV key (the HMAC key of its digests, jobspec.env_digest_key):
    build makes secrets/kv.key when it is missing, as the first secret would; the deploy only reads it
    (deploy/stage.env_key_loader)."""
    if any(spec.get("environment") or spec.get("initial_environment") for spec in jobspec.specs_of(cat).values()):
        kv.load_key(bucket_dir, create=True)


def _import_maand_kv(bucket_dir, result):
    """On takeover, data/kv.json starts as maand's key_value table (latest versions, values as stored)."""
    from ..kv import store  # late: only a writing build

    if result.catalog is None or result.maand is None or store.KVStore.exists(bucket_dir):
        return
    spaces = {ns: {k: store.Entry(v, ver) for k, (v, ver) in keys.items()} for ns, keys in result.maand.kv.items()}
    store.KVStore(bucket_dir, spaces).save()
    result.changes.append("takeover: data/kv.json from %s (%d namespaces)" % (maand_db.DB_REL, len(spaces)))


def _issue_certs(bucket_dir, result):
    """Keep or issue the jobs' leaf certificates (certs/build.py) before anything is written."""
    if result.catalog is None:
        return certs.Issued()
    from ..kv import store  # late: only a writing build reads the store

    try:
        previous = store.KVStore.load(bucket_dir).snapshot() if store.KVStore.exists(bucket_dir) else {}
        return certs.issue(bucket_dir, result.catalog, result.bucket.conf, previous)
    except (certs.CertError, store.KVStoreError) as exc:
        result.report.error("ErrInvalidCA", certs.CA_CERT_REL, "", str(exc), "see docs/certs.md")
        result.catalog = None
        return certs.Issued()


def _finish(result):
    if result.catalog is None:
        return
    try:
        after = catalog.dumps(result.catalog)
    except ValueError as exc:  # NaN or Infinity: not JSON, never written
        result.report.error("ErrInvalidCatalog", catalog.CATALOG_REL, "", "cannot be written: %s" % exc,
                            "find the NaN or infinite number in the workspace files and replace it")
        result.catalog = None
        return
    result.changes = catalog.diff_catalogs(result.previous, result.catalog)
    before = catalog.dumps(result.previous) if result.previous is not None else None
    result.changed = before != after


def job_ports(job):
    """A job's ports as `name=port` (sorted by name, comma separated); empty when it has none."""
    return ",".join("%s=%s" % (name, port) for name, port in sorted((job.get("ports") or {}).items()))


def allocation_table(cat, limit=None):
    """Rows for humans: job, worker, state, zone, memory, cpu, seq, the job's ports (name=port)."""
    header = ("JOB", "WORKER", "STATE", "ZONE", "MEMORY", "CPU", "SEQ", "PORTS")
    rows = [header]
    allocations = cat["allocations"]
    ports = {job["name"]: job_ports(job) for job in cat.get("jobs") or []}
    shown = allocations if limit is None else allocations[:limit]
    for a in shown:
        rows.append((a["job"], a["worker"], a["state"], a["zone"] or "-", "%.0f MB" % (a["memory_mb"] or 0),
                     "%.0f MHz" % (a["cpu_mhz"] or 0), str(a["deployment_seq"]), ports.get(a["job"]) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if limit is not None and len(allocations) > limit:
        lines.append("... %d more allocations (see data/catalog.json)" % (len(allocations) - limit))
    return lines

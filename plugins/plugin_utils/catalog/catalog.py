# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The catalog: `<bucket>/data/catalog.json`, the persisted result of a build.

JSON rather than SQLite: users script against it, it diffs well, and a whole bucket's catalog is
small enough to rewrite on every build. It is a document of the bucket's state store
(_storage.store): by default the file, written atomically (temp file in the same folder, fsync,
os.replace) under an exclusive flock on `<bucket>/data/.lock`, so two runs on one bucket cannot
interleave and a crash never leaves a truncated catalog; with a PostgreSQL store (state_url) a row
written in a transaction, refused when another controller moved it since this process read it,
and a build from a checkout that lacks the commit the stored catalog was built from is refused
(check_checkout).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess

from ..worker import layout
from . import catalog_schema, fingerprint, freshness
from ..bucket import schemas
from ..bucket import storage
from ..bucket.storage import DATA_DIR
from ..errors import MaandError

CATALOG_FORMAT = 1
CATALOG_FILE = "catalog.json"
CATALOG_REL = DATA_DIR + "/" + CATALOG_FILE
BUCKET_ID_FILE = "bucket_id"  # a copy of the catalog's bucket_id, so a lost catalog does not lose the id


class CatalogError(MaandError):
    pass


def catalog_path(bucket_dir):
    return os.path.join(bucket_dir, DATA_DIR, CATALOG_FILE)


# sha256 of every catalog text this process found valid: a deploy reads the catalog once per task (the
# inventory in the controller's process, then plan, each step, finish), and every forked worker inherits what
# the inventory checked, so the same text is checked once per run; a text that differs is checked again.
_VALID_TEXTS = set()


def _reject_constant(name):
    raise ValueError("%s is not valid JSON (a number must be finite)" % name)


def loads(text):
    """Parse catalog text. Raises CatalogError naming the problem: invalid JSON, NaN or Infinity
    (Python's json accepts them, JSON does not), nesting too deep, a schema violation, or a name or job
    path build would not write (catalog_schema.name_problems: a catalog from a shared store is input)."""
    try:
        catalog = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise CatalogError("%s is nested too deeply to be a catalog" % CATALOG_REL)
    except ValueError as exc:
        raise CatalogError("%s is not valid JSON: %s" % (CATALOG_REL, exc))
    digest = hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()
    if digest in _VALID_TEXTS:
        return catalog
    problems = schemas.check(catalog, catalog_schema.CATALOG) or catalog_schema.name_problems(catalog)
    if problems:
        shown = "; ".join("%s: %s" % (path, message) for path, message in problems[:5])
        more = " (and %d more)" % (len(problems) - 5) if len(problems) > 5 else ""
        raise CatalogError("%s does not match the catalog schema: %s%s" % (CATALOG_REL, shown, more))
    _VALID_TEXTS.add(digest)
    return catalog


def read_catalog(bucket_dir):
    """The previous catalog, or None before the first build. Raises CatalogError if it is unreadable,
    not valid JSON or not a valid catalog (see catalog_schema)."""
    store = storage.store(bucket_dir)
    try:
        doc = store.read("catalog")
    except (OSError, ValueError) as exc:
        raise CatalogError("%s is unreadable: %s" % (CATALOG_REL, getattr(exc, "strerror", None) or exc))
    if doc is None:
        return None
    try:
        return loads(doc.text)
    except CatalogError as exc:
        if store.kind == "file":
            raise
        raise CatalogError("%s (%s)" % (exc, store.where("catalog"))) from None


def read_built(bucket_dir, allow_stale=False):
    """The catalog of the workspace as it is: CatalogError naming the fix when there is none yet or the
    workspace changed since it was built (maand.core.health_check, maand.core.job_command). With `allow_stale`
    (a verb whose freshness.POLICY is WARN: the inventory has warned), the last built catalog as it is."""
    catalog = read_catalog(bucket_dir)
    if catalog is None:
        raise CatalogError("%s/data/catalog.json does not exist: run ansible-playbook maand.core.build -e "
                           "maand_bucket=%s first" % (bucket_dir, bucket_dir))
    changed = [] if allow_stale else fingerprint.stale(bucket_dir, catalog)
    if changed:
        raise CatalogError("ErrStaleCatalog: %s/data/catalog.json: workspace changed since the last build (%s); run "
                           "ansible-playbook maand.core.build -e maand_bucket=%s"
                           % (bucket_dir, ", ".join(changed[:10]), bucket_dir))
    return catalog


def stale_note(bucket_dir):
    """The one warning of a read-only verb that reads the bucket itself (cat, info) when the workspace changed
    since the last build (freshness.stale_warning), else ''. Never raises: it only informs."""
    try:
        catalog = read_catalog(bucket_dir)
        changed = fingerprint.stale(bucket_dir, catalog) if catalog is not None else []
    except (CatalogError, OSError, ValueError):
        return ""
    return freshness.stale_warning(bucket_dir, changed) if changed else ""


# --- the previous catalog of a build, and its bucket_id (a lost id made deploy start every job twice) --
_FIX_INVALID = ("restore %s from a backup or git; or remove it (a bucket_id recorded in %s/%s is then kept); or pass "
                "-e maand_new_bucket_id=true to mint a new bucket_id (workers holding the old id are then "
                "refused by deploy until you clean them)" % (CATALOG_REL, DATA_DIR, BUCKET_ID_FILE))


def previous_for_build(bucket_dir, report, new_bucket_id):
    """The previous catalog for a build: (catalog or None, bucket_id to keep or None), problems added to
    `report` (a bucket/problems.Report). Never replaces a known bucket_id silently: an invalid catalog is an
    error unless new_bucket_id; a missing one keeps the id recorded in data/bucket_id, with a warning."""
    rel = CATALOG_REL
    stale = check_checkout(bucket_dir)
    if stale:
        report.error("ErrStaleCheckout", rel, "", stale, "update this checkout (git pull) and build again")
        return None, None
    try:
        previous = read_catalog(bucket_dir)
    except CatalogError as exc:
        if not new_bucket_id:
            report.error("ErrInvalidCatalog", rel, "", str(exc), _FIX_INVALID)
            return None, None
        report.warn("ErrInvalidCatalog", rel, "", "%s; replaced, as maand_new_bucket_id=true asks, by a catalog "
                    "with a new bucket_id" % exc, "stop and remove the old bucket's jobs on the workers")
        return None, None
    recorded = recorded_bucket_id(bucket_dir)
    if previous is not None or recorded is None:
        return previous, None
    if new_bucket_id:
        report.warn("ErrMissingCatalog", rel, "", "missing; a new bucket_id replaces %s (maand_new_bucket_id=true): "
                    "deploy refuses workers that hold the old id" % recorded,
                    "stop and remove %s on the workers" % layout.bucket_root(recorded))
        return None, None
    report.warn("ErrMissingCatalog", rel, "", "missing, but this bucket was built before: bucket_id %s (from %s/%s) "
                "is kept; allocations removed since the last build are forgotten and stay on their workers"
                % (recorded, DATA_DIR, BUCKET_ID_FILE),
                "restore %s from a backup or git to keep them" % rel)
    return None, recorded


def dumps(catalog):
    """The catalog's text. Raises ValueError on NaN or Infinity: they are not JSON, so never written."""
    return json.dumps(catalog, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_catalog(bucket_dir, catalog, source=None):
    """Atomically replace data/catalog.json (and data/bucket_id). Call it while holding locks.bucket_lock().

    In a PostgreSQL store the write is refused (_storage.StaleState) when another controller wrote the
    catalog since this process read it; `source` (a build: the checkout's git commit) is recorded
    with it, for check_checkout."""
    store = storage.store(bucket_dir)
    store.write("catalog", dumps(catalog), expect=store.seen.get("catalog"),
                source=checkout_commit(bucket_dir) if source is None and store.kind != "file" else (source or ""))
    if recorded_bucket_id(bucket_dir) != catalog["bucket_id"]:
        store.write("bucket_id", catalog["bucket_id"] + "\n")


def recorded_bucket_id(bucket_dir):
    """The bucket_id the last written catalog held (data/bucket_id), or None if unknown or not a UUID."""
    try:
        doc = storage.store(bucket_dir).read("bucket_id")
    except (OSError, ValueError):
        return None
    text = doc.text[:100].strip() if doc is not None else ""
    return text if re.match(catalog_schema.UUID_PATTERN, text) else None


# --- a build from a stale checkout (shared state store only) -----------------------------------------

def _git(bucket_dir, *args):
    try:
        return subprocess.run(("git", "-C", bucket_dir) + args, capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def checkout_commit(bucket_dir):
    """The git commit the bucket folder is checked out at ('' when it is not a git work tree)."""
    done = _git(bucket_dir, "rev-parse", "--verify", "-q", "HEAD")
    return done.stdout.strip() if done is not None and done.returncode == 0 else ""


def check_checkout(bucket_dir):
    """None, or why a build from this checkout is refused: the shared store's catalog was built from a
    git commit this checkout does not contain (it is behind: a build would undo the newer workspace).
    Nothing to check for the bucket folder store, outside git, or before the first build."""
    store = storage.store(bucket_dir)
    if store.kind == "file":
        return None
    doc = store.read("catalog")
    if doc is None or not doc.source:
        return None
    head = checkout_commit(bucket_dir)
    if not head or head == doc.source:
        return None
    done = _git(bucket_dir, "merge-base", "--is-ancestor", doc.source, head)
    if done is not None and done.returncode == 0:
        return None
    return ("stale checkout: %s was last built from commit %s (update_seq %s, written at %s by %s), which this "
            "checkout (at %s) does not contain: a build from here would undo that workspace"
            % (store.where("catalog"), doc.source[:12], doc.generation, doc.written_at, doc.written_by, head[:12]))


# --- departed workers: they left workers.json; gc deletes their bucket folder, then forgets them ------

DEPARTED = "departed"  # catalog key, present only when the list is not empty


def departed_hosts(catalog):
    """The hosts of the catalog's departed list, in its order."""
    return [d["host"] for d in (catalog or {}).get(DEPARTED) or ()]


def keep_departed(catalog, previous):
    """Set catalog["departed"]: every worker of the previous catalog (or of its departed list) that is not
    in workers.json any more, until maand.core.gc has deleted /opt/worker/<bucket_id> on it (it then drops
    the row). A deploy cleans a departed worker but keeps jobs/*/data and jobs/*/logs, and drops its
    `workers` row once it holds no allocation; this list is how gc still reaches it. A worker that is back
    in workers.json leaves the list (its folder is live again). Records: {host, hostname}; the connection
    is maand.conf's, as for every worker. The key is absent when the list is empty."""
    live = {w["host"] for w in catalog.get("workers", ()) if not w.get("removed")}
    found = {}
    for record in (previous or {}).get(DEPARTED) or ():
        found[record["host"]] = {"host": record["host"], "hostname": record.get("hostname")}
    for worker in (previous or {}).get("workers") or ():
        if worker["host"] not in found:
            found[worker["host"]] = {"host": worker["host"], "hostname": worker.get("hostname")}
    _set_departed(catalog, [found[host] for host in sorted(found) if host not in live])
    return catalog


def drop_departed(catalog, hosts):
    """A new catalog without the departed rows of `hosts` (gc cleaned them)."""
    hosts = set(hosts)
    new = dict(catalog)
    _set_departed(new, [d for d in catalog.get(DEPARTED) or () if d["host"] not in hosts])
    return new


def _set_departed(catalog, rows):
    """The departed list in place; no key when it is empty (catalogs without departed workers stay as they were)."""
    if rows:
        catalog[DEPARTED] = rows
    else:
        catalog.pop(DEPARTED, None)


def diff_catalogs(old, new):
    """Human-readable lines describing what a build changes in the catalog."""
    lines = []
    if old is None:
        lines.append("new catalog: bucket_id %s" % new["bucket_id"])
        old = {"workers": [], "jobs": [], "allocations": []}
    old_allocs = {(a["job"], a["worker"]): a for a in old.get("allocations", ())}
    new_allocs = {(a["job"], a["worker"]): a for a in new["allocations"]}
    for key in sorted(set(old_allocs) | set(new_allocs)):
        before, after = old_allocs.get(key), new_allocs.get(key)
        label = "allocation %s@%s" % key
        if before is None:
            lines.append("+ %s (%s)" % (label, after["state"]))
        elif after is None:
            lines.append("- %s (dropped from catalog)" % label)
        elif before.get("state") != after["state"]:
            lines.append("~ %s: %s -> %s" % (label, before.get("state"), after["state"]))
    old_jobs = {j["name"]: j for j in old.get("jobs", ())}
    for job in new["jobs"]:
        before = old_jobs.get(job["name"])
        if before is None:
            continue
        for key in ("version", "memory_mb", "cpu_mhz", "deployment_seq", "ports", "removed"):
            if before.get(key) != job.get(key):
                lines.append("~ job %s: %s %s -> %s" % (job["name"], key, before.get(key), job.get(key)))
    old_workers = {w["host"]: w for w in old.get("workers", ())}
    for worker in new["workers"]:
        before = old_workers.get(worker["host"])
        if before is None:
            lines.append("+ worker %s" % worker["host"])
            continue
        for key in ("labels", "memory_mb", "cpu_mhz", "zone", "removed"):
            if before.get(key) != worker.get(key):
                lines.append("~ worker %s: %s %s -> %s" % (worker["host"], key, before.get(key), worker.get(key)))
    for host in sorted(set(old_workers) - {w["host"] for w in new["workers"]}):
        lines.append("- worker %s (dropped from catalog)" % host)
    old_departed, new_departed = set(departed_hosts(old)), set(departed_hosts(new))
    for host in sorted(new_departed - old_departed):
        lines.append("+ departed worker %s (left workers.json; maand.core.gc deletes its bucket folder, data/ and "
                     "logs/ included)" % host)
    for host in sorted(old_departed - new_departed):
        lines.append("- departed worker %s (back in workers.json)" % host)
    return lines

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fingerprint of a build's inputs, recorded in the catalog as `inputs` (pure Python, no ansible imports).

Build records `{"digest": hex, "files": {input: hex}}` for every file it reads and every job tree
deploy ships; the inventory plugin (and the deploy) compare it with the workspace as it is now and
refuse a catalog whose inputs changed since it was built ("workspace changed since the last build").

Inputs (paths relative to the bucket, forward slashes):
- `maand.conf`, `workspace/bucket.conf`, `workspace/bucket.jobs*.conf`, `workspace/workers.json`,
  `workspace/disabled.json`: sha256 of the bytes (absent files are absent from the map);
- `workspace/jobs/<name>/` for every folder under workspace/jobs (manifest.json included): the job
  tree hash of `bucket/content.hash_tree`, the very hash deploy compares (runtime folders data/,
  logs/ and bin/ at the top of a job are left out, as deploy leaves them out);
- `workspace/containers/*` (named container specs) and `workspace/images/<name>/` (local OCI image
  layouts) that job specs inherit from.

Content hashes, not modification times: a `touch` or a fresh `git clone` does not make a build stale,
and the catalog does not churn.
"""

from __future__ import annotations

import hashlib
import os

from ..bucket import content

TOP_FILES = ("maand.conf", "workspace/bucket.conf", "workspace/workers.json", "workspace/disabled.json")
JOBS_DIR = "workspace/jobs"
CONTAINERS_DIR = "workspace/containers"
IMAGES_DIR = "workspace/images"
_CHUNK = 1 << 20


def _file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _unreadable(exc):
    """A stable stand-in digest for an input that cannot be read (build reports the error itself)."""
    return "unreadable:%s" % (getattr(exc, "strerror", None) or type(exc).__name__)


def _top_files(bucket_dir):
    rels = list(TOP_FILES)
    try:
        names = os.listdir(os.path.join(bucket_dir, "workspace"))
    except OSError:
        names = []
    rels.extend("workspace/" + n for n in sorted(names) if n.startswith("bucket.jobs") and n.endswith(".conf"))
    try:  # job specs' named containers (seed 004)
        containers = os.listdir(os.path.join(bucket_dir, CONTAINERS_DIR))
    except OSError:
        containers = []
    rels.extend("%s/%s" % (CONTAINERS_DIR, n) for n in sorted(containers) if not n.startswith("."))
    return rels


def _job_dirs(bucket_dir, under=JOBS_DIR):
    try:
        entries = sorted(os.scandir(os.path.join(bucket_dir, under)), key=lambda e: e.name)
    except OSError:
        return []
    return [e for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]


def compute(bucket_dir):
    """The fingerprint of the bucket's inputs as they are now: {"digest": hex, "files": {rel: hex}}."""
    files = {}
    for rel in _top_files(bucket_dir):
        try:
            files[rel] = _file_digest(os.path.join(bucket_dir, rel))
        except FileNotFoundError:
            continue
        except OSError as exc:
            files[rel] = _unreadable(exc)
    for entry in _job_dirs(bucket_dir):
        rel = "%s/%s/" % (JOBS_DIR, entry.name)
        try:
            files[rel] = content.hash_tree(entry.path)["hash"]
        except content.ContentError as exc:
            files[rel] = _unreadable(exc)
    for entry in _job_dirs(bucket_dir, IMAGES_DIR):  # local OCI image layouts named by job specs
        rel = "%s/%s/" % (IMAGES_DIR, entry.name)
        try:
            files[rel] = content.hash_tree(entry.path)["hash"]
        except content.ContentError as exc:
            files[rel] = _unreadable(exc)
    return {"digest": content.tree_hash(files), "files": files}


def changes(recorded, current):
    """Human-readable lines naming every input that differs between two fingerprints ([] when equal)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("files"), dict):
        return ["the catalog holds no input fingerprint (written by an older maand.core build)"]
    if recorded.get("digest") == current["digest"]:
        return []
    old, new = recorded["files"], current["files"]
    lines = []
    for rel in sorted(set(old) | set(new)):
        if rel not in old:
            lines.append("%s added" % rel)
        elif rel not in new:
            lines.append("%s removed" % rel)
        elif old[rel] != new[rel]:
            lines.append("%s changed" % rel)
    return lines or ["the input fingerprint differs"]


def job_mismatch(bucket_dir, catalog):
    """[(job, line)] for every job where the catalog and the checkout's workspace/jobs disagree ([] when they
    agree): a job of the catalog (not removed) without its folder, a job folder (with manifest.json) the
    catalog lacks, a job the catalog holds as removed whose folder is back. The catalog's `inputs` are the
    word of whoever wrote the store, so the jobs are compared with the checkout itself (issue 32 N4)."""
    here = {e.name for e in _job_dirs(bucket_dir) if os.path.isfile(os.path.join(e.path, "manifest.json"))}
    live = {j["name"] for j in catalog.get("jobs") or () if not j.get("removed")}
    removed = {j["name"] for j in catalog.get("jobs") or () if j.get("removed")} - live
    out = [(n, "job %s is in the catalog but %s/%s is not in this checkout" % (n, JOBS_DIR, n)) for n in live - here]
    out += [(n, "%s/%s is not a job of the catalog" % (JOBS_DIR, n)) for n in here - live - removed]
    out += [(n, "job %s is removed in the catalog but %s/%s is in this checkout" % (n, JOBS_DIR, n))
            for n in here & removed]
    return sorted(out)


def stale(bucket_dir, catalog):
    """What changed in the workspace since `catalog` was built, and where its jobs and the checkout's disagree
    ([] when the catalog is current)."""
    lines = changes(catalog.get("inputs"), compute(bucket_dir))
    told = {line.split(" ", 1)[0] for line in lines}  # "workspace/jobs/<name>/" of a job tree already named
    return lines + [line for name, line in job_mismatch(bucket_dir, catalog)
                    if "%s/%s/" % (JOBS_DIR, name) not in told]

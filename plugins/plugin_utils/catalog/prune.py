# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The catalog after a deploy (no Ansible imports): the allocation rows whose cleanup succeeded leave
data/catalog.json, and the jobs that left with them their KV keys (vars/job/<job>, secrets/job/<job>), all
under the bucket lock. What to drop is the deploy's to say (deploy/service.finish passes the new catalog as a
function of the current one)."""

from __future__ import annotations

import dataclasses

from ..bucket import locks
from ..kv import store
from . import catalog


def _quiet(*args, **kwargs):
    """The default screen: says nothing."""
    del args, kwargs


@dataclasses.dataclass
class Pruned:
    """prune()'s outcome: whether the catalog changed, the dropped 'job@worker's, and why it could not be
    updated (None: it could)."""

    changed: bool = False
    pruned: list = dataclasses.field(default_factory=list)
    problem: str | None = None


def prune(bucket, bucket_id, pruned_catalog, show=_quiet):
    """Replace data/catalog.json of bucket_id by pruned_catalog(catalog) and drop the KV keys of the jobs that
    left it, under the bucket lock; a catalog of another bucket_id (or none) is left alone."""
    out = Pruned()
    try:
        with locks.bucket_lock(bucket, wait=True):
            cat = catalog.read_catalog(bucket)
            if cat is None or cat.get("bucket_id") != bucket_id:
                return out
            new = pruned_catalog(cat)
            if new != cat:
                catalog.write_catalog(bucket, new)
                gone = {(a["job"], a["worker"]) for a in cat["allocations"]} - {
                    (a["job"], a["worker"]) for a in new["allocations"]}
                out.changed, out.pruned = True, sorted("%s@%s" % g for g in gone)
                show("catalog: dropped %d cleaned removed allocation(s): %s" % (len(gone), ", ".join(out.pruned)),
                     color="yellow")
                drop_job_kv(bucket, cat, new, show)
    except (OSError, catalog.CatalogError, store.KVStoreError) as exc:
        out.problem = "could not update data/catalog.json or data/kv.json: %s" % exc
    return out


def drop_job_kv(bucket, old, new, show=_quiet):
    """Jobs that left the catalog: tombstone their vars/job and secrets/job (held: bucket lock)."""
    gone = sorted({j["name"] for j in old.get("jobs", [])} - {j["name"] for j in new.get("jobs", [])})
    if gone and store.KVStore.exists(bucket):
        kv_store = store.KVStore.load(bucket)
        changes = kv_store.drop_jobs(gone)
        kv_store.save()
        if changes:
            show("KV: %d key(s) of removed job(s) %s deleted" % (len(changes), ", ".join(gone)), color="yellow")

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.info``: a summary of the bucket (maand's ``maand info``, cat/cat_info.go; pure, no Ansible).

maand's rows (bucket ID, update sequence, numbers of workers, jobs and allocations) and the controller's
own: where the state is kept, how many deploy records it keeps and the last deploy. The update sequence
lives on the workers (``worker.json``); the controller knows it from the last deploy record (or, before
any, the update_seq a takeover from maand carried into the catalog).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..bucket import storage
from ..deploy import record
from . import cat


@dataclasses.dataclass
class Info:
    bucket: str
    bucket_id: str
    update_seq: int
    update_seq_from: str  # where the number comes from
    workers: int
    removed_workers: int
    jobs: int
    removed_jobs: int
    allocations: dict  # {"total", "active", "disabled", "removed"}
    state_store: str
    records_kept: int
    last_deploy: dict | None  # run_id, outcome, finished, by, summary

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def table(self) -> cat.Table:
        allocs = self.allocations
        last = self.last_deploy
        rows = [("Bucket ID", self.bucket_id),
                ("Update Sequence", "%d (%s)" % (self.update_seq, self.update_seq_from)),
                ("Number of Workers", _count(self.workers, self.removed_workers)),
                ("Number of Jobs", _count(self.jobs, self.removed_jobs)),
                ("Number of Allocations", "%d (%d active, %d disabled, %d removed)" % (
                    allocs["total"], allocs["active"], allocs["disabled"], allocs["removed"])),
                ("State Store", self.state_store),
                ("Deploy Records", "%d kept (the newest %d are kept)" % (self.records_kept, record.KEEP)),
                ("Last Deploy", "%s: %s, finished %s by %s (%s)" % (last["run_id"], last["outcome"], last["finished"],
                                                                    last["by"], last["summary"]) if last else "-")]
        table = cat.Table("Bucket %s" % self.bucket, ("DESCRIPTION", "VALUE"), rows)
        table.notes.append("details: maand.core.cat -e maand_cat=workers|jobs|allocations|deployments; past runs: "
                           "maand.core.logs")
        return table


def _count(live: int, removed: int) -> str:
    return "%d%s" % (live, " (and %d removed)" % removed if removed else "")


def info(bucket_dir: str) -> Info:
    """The summary of the bucket; cat.CatError when it has no catalog or its store cannot be read."""
    catalog = cat.read_catalog(bucket_dir)
    try:
        records, dummy = record.read_all(bucket_dir)
        store = storage.store(bucket_dir)
    except storage.StateStoreError as exc:
        raise cat.CatError(str(exc)) from None
    last = records[-1] if records else None
    seq, where = _update_seq(catalog, last)
    states = [a.get("state") for a in catalog.get("allocations", [])]
    workers = catalog.get("workers", [])
    jobs = catalog.get("jobs", [])
    return Info(
        bucket=bucket_dir, bucket_id=str(catalog.get("bucket_id") or "-"), update_seq=seq, update_seq_from=where,
        workers=sum(1 for w in workers if not w.get("removed")), removed_workers=sum(1 for w in workers if w.get("removed")),
        jobs=sum(1 for j in jobs if not j.get("removed")), removed_jobs=sum(1 for j in jobs if j.get("removed")),
        allocations={"total": len(states), "active": states.count("active"), "disabled": states.count("disabled"),
                     "removed": states.count("removed")},
        state_store="files (%s)" % store.label if store.kind == "file" else "%s (%s)" % (store.kind, store.label),
        records_kept=len(records),
        last_deploy=None if last is None else {"run_id": last.run_id, "outcome": last.outcome,
                                               "finished": last.finished, "by": "%s@%s" % (last.user, last.controller),
                                               "summary": last.summary})


def _update_seq(catalog: Mapping[str, Any], last: Any) -> tuple[int, str]:
    if last is not None and isinstance(last.update_seq, int):
        return last.update_seq, "deploy run %s" % last.run_id
    floor = catalog.get("update_seq_floor")
    if isinstance(floor, int) and floor:
        return floor, "taken over from maand.db; no deploy recorded since"
    return 0, "no deploy recorded"

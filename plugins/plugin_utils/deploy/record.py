# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy records: what each deploy run did, kept in the bucket's state store (pure, no Ansible imports).

The deploy's finish (deploy/service.py) writes one record per run that got a run folder (not ``--check``,
not a deploy refused before its plan), while it still holds the deploy lock: the run id, who ran it from
which controller, start, end and duration, the plan hash, update_seq, the options, the outcome and its
problems, and per allocation the action, the result (the verdict's word), the tree hash it shipped, the
versions, the gate and make-target seconds. Each record also carries ``rollout``: every allocation's
state as the records know it (the hash and version it was last promoted with, a failed attempt's hash,
its rollout state, the run that last touched it), carried forward from the previous record, so that
``maand.core.cat -e maand_cat=deployments`` answers from one record however old the allocation's last
change is. The store keeps the newest ``KEEP`` records (files: ``data/deploys/<run_id>.json``;
PostgreSQL: ``maand_deploy_records``), read by ``maand.core.logs``, ``maand.core.info`` and ``cat``.

maand keeps ``logs/`` (every line of every command) and, in ``maand.db``, each allocation's
``current_hash`` / ``previous_hash``; these records are the controller's equivalent.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
from typing import Any, Iterable, Mapping

from ..bucket import storage
from . import run, view
from ..errors import MaandError

FORMAT = 1
KEEP = storage.RECORDS_KEPT

# the rollout state a verdict result leaves an allocation in (maand's cat deployments words where they exist)
PROMOTED = ("unchanged", "started", "restarted", "reloaded", "synced")
ROLLOUT_OF_RESULT = {
    "unchanged": "promoted", "started": "promoted", "restarted": "promoted", "reloaded": "promoted",
    "synced": "promoted", "rolled back": "rolled_back", "stopped": "stopped", "gate failed": "health_failed",
    "reverted": "reverted", "failed": "failed", "not promoted": "failed", "unreachable": "unreachable",
    "not run": "pending", "held": "held", "unknown": "unknown",
}
GONE = ("removed", "purged")  # results after which the allocation has nothing left on its worker


class RecordError(MaandError):
    """A record that cannot be found or read (names the run and the fix)."""


def _fields(cls, data: Mapping[str, Any]) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclasses.dataclass
class Allocation:
    """What one run did to one allocation (or, job "*", to a worker it purged)."""

    job: str
    worker: str
    action: str
    result: str
    alloc_id: str | None = None
    state: str | None = None  # the catalog state the plan saw (active, disabled, removed)
    hash: str | None = None  # the tree hash this run shipped (or, unchanged, the one the worker runs)
    from_version: str = "-"
    to_version: str = "-"
    gate_seconds: float | None = None
    seconds: float | None = None  # make-target time on the worker (the agent's measure)
    batch: str | None = None
    wave: int | None = None
    reason: str = ""

    @property
    def key(self) -> str:
        return "%s@%s" % (self.job, self.worker)


@dataclasses.dataclass
class Rollout:
    """An allocation's state as the records know it after a run (maand's hash row of the allocation)."""

    job: str
    worker: str
    state: str  # promoted, health_failed, failed, reverted, rolled_back, stopped, held, pending, unreachable
    hash: str | None = None  # the tree hash of the version promoted on the worker
    version: str | None = None  # that version
    failed_hash: str | None = None  # the hash of the attempt that failed, when the last one did
    failed_version: str | None = None
    result: str = ""  # what that run did to it (the verdict's word)
    run_id: str = ""  # the run that last touched it
    at: str = ""  # when that run ended


@dataclasses.dataclass
class DeployRecord:
    """One finished deploy run."""

    run_id: str
    bucket_id: str
    outcome: str  # ok | failed
    started: str
    finished: str
    seconds: float
    user: str
    controller: str
    pid: int
    plan_hash: str = ""
    update_seq: int | None = None
    previous_update_seq: int | None = None
    options: dict = dataclasses.field(default_factory=dict)
    summary: str = ""
    counts: dict = dataclasses.field(default_factory=dict)
    problems: list = dataclasses.field(default_factory=list)
    allocations: list = dataclasses.field(default_factory=list)  # [Allocation]
    rollout: dict = dataclasses.field(default_factory=dict)  # {"job@worker": Rollout}

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["format"] = FORMAT
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "DeployRecord":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RecordError("not a deploy record of format %d" % FORMAT)
        try:
            out = cls(**_fields(cls, data))
            out.allocations = [Allocation(**_fields(Allocation, a)) for a in data.get("allocations") or []]
            out.rollout = {k: Rollout(**_fields(Rollout, r)) for k, r in (data.get("rollout") or {}).items()}
        except TypeError as exc:
            raise RecordError("a deploy record with missing fields: %s" % exc) from None
        return out

    def touched(self, jobs: Iterable[str] = (), workers: Iterable[str] = ()) -> list:
        """The allocations of the filter (all without one)."""
        jobs, workers = set(jobs), set(workers)
        return [a for a in self.allocations if (not jobs or a.job in jobs) and (not workers or a.worker in workers)]


# --- building a record at the deploy's finish ------------------------------------------------------

def stamp(seconds: float) -> str:
    """A UTC time as 2026-11-27T07:20:23Z."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def who() -> str:
    try:
        import pwd  # pylint: disable=import-outside-toplevel
        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return "uid %d" % os.getuid()


def started_at(run_dir: str, default: float) -> float:
    """When the run began: its plan.json was written when the run folder was made."""
    try:
        return os.stat(os.path.join(run_dir, "plan.json")).st_mtime
    except OSError:
        return default


def op_seconds(run_dir: str) -> dict:
    """{"job@host": seconds} the workers' agents measured for the make targets of each allocation (its revert
    and files ops included), from the run folder's results; what cannot be read is left out (timings only)."""
    out: dict = {}
    for dummy_step, dummy_host, answer in run.iter_results(run_dir):
        for op in (answer or {}).get("ops") or []:
            seconds = op.get("seconds") if isinstance(op, dict) else None
            if isinstance(seconds, (int, float)) and isinstance(op.get("id"), str):
                key = op["id"].split("/", 1)[0]
                out[key] = round(out.get(key, 0.0) + float(seconds), 3)
    return out


def _allocation(row: Mapping[str, Any], verdict: Any, seconds: Mapping[str, float]) -> Allocation:
    job = row.get("job") or "*"
    worker = row.get("worker") or ""
    key = "%s@%s" % (job, worker) if row.get("job") else "purge@%s" % worker
    return Allocation(job=job, worker=worker, action=row.get("action") or "", alloc_id=row.get("alloc_id"),
                      result=verdict.result if verdict is not None else "unknown", state=row.get("state"),
                      hash=row.get("hash"), from_version=row.get("from_version") or "-",
                      to_version=(verdict.after if verdict is not None else row.get("to_version")) or "-",
                      gate_seconds=verdict.gate_seconds if verdict is not None else None,
                      seconds=seconds.get(key), batch=row.get("batch"), wave=row.get("wave"),
                      reason=row.get("reason") or "")


def carry_rollout(previous: Mapping[str, Rollout], allocations: Iterable[Allocation], run_id: str,
                  at: str) -> dict:
    """The allocations' rollout states after this run: the previous record's, updated by what this run did."""
    out = dict(previous)
    for a in allocations:
        if a.job == "*":  # a purged worker: nothing of this bucket is left on it
            if a.result == "purged":
                out = {k: r for k, r in out.items() if r.worker != a.worker}
            continue
        if a.result in GONE:
            out.pop(a.key, None)
            continue
        before = out.get(a.key)
        entry = Rollout(a.job, a.worker, ROLLOUT_OF_RESULT.get(a.result, a.result.replace(" ", "_")),
                        hash=before.hash if before else None, version=before.version if before else None,
                        result=a.result, run_id=run_id, at=at)
        if a.result == "unchanged" and a.state == "disabled":  # a disabled allocation that is not running
            entry.state = "stopped"
        elif a.result in PROMOTED or a.result == "rolled back":
            entry.hash = a.hash or entry.hash
            entry.version = a.to_version if a.to_version != "-" else entry.version
        elif a.result in ("stopped", "held", "not run", "unknown", "unreachable"):
            entry.version = entry.version or (a.from_version if a.from_version != "-" else None)
            if before is not None:
                entry.failed_hash, entry.failed_version = before.failed_hash, before.failed_version
        else:  # the attempt failed: the worker keeps the promoted version
            entry.version = a.from_version if a.from_version != "-" else entry.version
            entry.failed_hash, entry.failed_version = a.hash, a.to_version
        out[a.key] = entry
    return out


def build(run_id: str, plan: Mapping[str, Any], verdict: list | None, problems: list, run_dir: str,
          previous: DeployRecord | None, pid: int, now: float) -> DeployRecord:
    """The record of a run that ends now (verdict: the rows of deploy/view.verdict, one per plan row, or None
    when it could not be computed)."""
    rows = plan.get("rows") or []
    seconds = op_seconds(run_dir) if run_dir else {}
    verdicts = verdict if verdict is not None and len(verdict) == len(rows) else [None] * len(rows)
    allocations = [_allocation(r, v, seconds) for r, v in zip(rows, verdicts)]
    counts: dict = {}
    for a in allocations:
        counts[a.result] = counts.get(a.result, 0) + 1
    began = started_at(run_dir, now)
    finished = stamp(now)
    summary = view.count_words(counts)
    return DeployRecord(
        run_id=run_id, bucket_id=str(plan.get("bucket_id") or ""), outcome="failed" if problems else "ok",
        started=stamp(began), finished=finished, seconds=round(max(0.0, now - began), 3), user=who(),
        controller=socket.gethostname(), pid=int(pid or 0), plan_hash=str(plan.get("plan_hash") or ""),
        update_seq=plan.get("update_seq"), previous_update_seq=plan.get("previous_update_seq"),
        options=dict(plan.get("options") or {}), summary=summary or "nothing to do", counts=counts,
        problems=list(problems), allocations=allocations,
        rollout=carry_rollout(previous.rollout if previous else {}, allocations, run_id, finished))


# --- the store ----------------------------------------------------------------------------------

def write(bucket: str, record: DeployRecord, keep: int = KEEP) -> None:
    """Store the record (the state store keeps the newest `keep`). StateStoreError, OSError."""
    storage.store(bucket).write_record(record.run_id, json.dumps(record.to_dict(), sort_keys=True), keep)


def read_all(bucket: str, limit: int | None = None) -> tuple[list, list]:
    """([DeployRecord] oldest first, [a sentence per record that cannot be read])."""
    records, bad = [], []
    for run_id, text in storage.store(bucket).records(limit):
        try:
            records.append(DeployRecord.from_dict(json.loads(text)))
        except (ValueError, RecordError) as exc:
            bad.append("deploy record %s cannot be read (%s); it is left out" % (run_id, exc))
    return records, bad


def latest(bucket: str) -> DeployRecord | None:
    """The newest readable record, or None."""
    for dummy, text in reversed(storage.store(bucket).records(3)):
        try:
            return DeployRecord.from_dict(json.loads(text))
        except (ValueError, RecordError):
            continue
    return None


def find(records: list, wanted_run: str) -> DeployRecord:
    """The record named by wanted_run: its id, a unique prefix of it, or "last"."""
    if not records:
        raise RecordError("no deploy record is kept: no deploy has finished since records began (the deploy writes "
                          "one when it finishes)")
    wanted = str(wanted_run).strip()
    if wanted in ("last", "latest"):
        return records[-1]
    found = [r for r in records if r.run_id == wanted] or [r for r in records if r.run_id.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    ids = [r.run_id for r in records]
    if found:
        raise RecordError("run %s is ambiguous: it starts %s; give more of the run id" % (
            wanted, ", ".join(r.run_id for r in found)))
    raise RecordError("no deploy record for run %s; the kept runs are %s (or -e maand_run=last)" % (
        wanted, ", ".join(ids[-10:]) + (" and %d older" % (len(ids) - 10) if len(ids) > 10 else "")))


def record_finish(bucket: str, run_dir: str, plan: Mapping[str, Any], verdict: list | None, problems: list,
                  pid: int, now: float) -> DeployRecord:
    """Build and store the record of the run in run_dir (the deploy's finish, under the deploy lock)."""
    record = build(os.path.basename(os.path.normpath(run_dir)), plan, verdict, problems, run_dir, latest(bucket),
                   pid, now)
    write(bucket, record)
    return record

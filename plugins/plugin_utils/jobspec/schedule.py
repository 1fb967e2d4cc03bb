# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order jobs start in, after Maelstrom's broker and test runners, and the run history behind it.

- order: crates/maelstrom-broker/src/scheduler_task/scheduler.rs (QueuedJob, worker heap) and
  crates/maelstrom-util/src/duration.rs (``schedule_order``, ``BrokerModel``);
  ``lpt_plan`` is the per-worker plan of a worker running targets in ``slots`` processes;
- estimates: crates/maelstrom-test-runner (``history_hint``, test_db.rs MAX_TIMINGS_PER_CASE);
- the run history deploy keeps under the bucket's data/ (``history_record`` / ``history_lookup``)
  and a worker's plan (``plan_worker`` / ``format_plan``).

Pure Python, no Ansible imports.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Optional

from .environment import SpecError

PRIORITY_MIN, PRIORITY_MAX = -128, 127
MAX_TIMINGS = 3  # test_db.rs MAX_TIMINGS_PER_CASE


def duration_cmp(lhs: Optional[float], rhs: Optional[float]) -> int:
    """duration.rs cmp: an unknown estimate is greater than any known one. Returns -1, 0 or 1."""
    if lhs is None and rhs is None:
        return 0
    if lhs is None:
        return 1
    if rhs is None:
        return -1
    return (lhs > rhs) - (lhs < rhs)


@dataclass(frozen=True)
class QueuedJob:
    """What the broker's priority queue orders: priority, then estimate (None above all)."""

    name: str
    priority: int = 0
    estimated_duration: Optional[float] = None

    def sort_key(self) -> tuple:
        """Ascending key for Maelstrom's pop order (the BinaryHeap pops the greatest first)."""
        est = self.estimated_duration
        return (-self.priority, 0 if est is None else 1, -(est or 0))


def queued_cmp(lhs: QueuedJob, rhs: QueuedJob) -> int:
    """QueuedJob's Ord (derivative: priority, then duration::cmp; the job id ignored)."""
    if lhs.priority != rhs.priority:
        return 1 if lhs.priority > rhs.priority else -1
    return duration_cmp(lhs.estimated_duration, rhs.estimated_duration)


def schedule_order(jobs: list) -> list:
    """Jobs in the order Maelstrom's broker starts them; stable for ties (input order kept)."""
    return sorted(jobs, key=QueuedJob.sort_key)


@dataclass(frozen=True)
class SlotRun:
    """One job of an LPT plan: which slot runs it, when it starts and ends (seconds from 0)."""

    name: str
    slot: int
    start: float
    end: float
    estimated_duration: Optional[float] = None


def lpt_plan(jobs: list, slots: int, unknown: float = 0.0) -> list:
    """List-schedule ``jobs`` in schedule_order on ``slots`` parallel slots of one worker.

    Each job starts on the slot that frees first (lowest slot number on a tie) as soon as it is
    free, as a worker running up to ``slots`` targets side by side does. A job without an estimate
    counts as ``unknown`` seconds in the plan. Returns the runs in start order.
    """
    if slots < 1:
        raise SpecError(f"slots must be at least 1, not {slots}")
    free = [0.0] * slots
    runs = []
    for job in schedule_order(jobs):
        slot = min(range(slots), key=lambda s: (free[s], s))
        length = job.estimated_duration if job.estimated_duration is not None else unknown
        runs.append(SlotRun(job.name, slot, free[slot], free[slot] + length, job.estimated_duration))
        free[slot] += length
    return runs


def makespan(runs: list) -> float:
    return max((r.end for r in runs), default=0.0)


def makespan_lower_bound(durations: list, slots: int) -> float:
    """No schedule on ``slots`` slots ends before max(longest, sum / slots)."""
    return max([0.0, sum(durations) / slots, *durations])


@dataclass
class _Worker:
    wid: int
    slots: int
    pending: list = field(default_factory=list)


class BrokerModel:
    """The broker's dispatch, as scheduler.rs: a queue of QueuedJobs and a heap of workers.

    A job goes to the least subscribed worker (pending/slots, then lowest id), which holds at most
    2 x slots pending jobs; a completed job frees its worker for the next queued one. Returns the
    (worker id, job name) enqueues each event causes, in order. Used to port Maelstrom's scheduler
    tests; deploy needs only schedule_order and lpt_plan.
    """

    def __init__(self):
        self.workers: dict = {}
        self.queue: list = []
        self._seq = 0

    def _least_loaded(self) -> _Worker:
        return min(self.workers.values(), key=lambda w: (Fraction(len(w.pending), w.slots), w.wid))

    def _dispatch(self) -> list:
        sent = []
        while self.queue and self.workers:
            worker = self._least_loaded()
            if len(worker.pending) == 2 * worker.slots:
                break
            sent.append(self._start(worker))
        return sent

    def _start(self, worker: _Worker) -> tuple:
        job = heapq.heappop(self.queue)[-1]
        worker.pending.append(job.name)
        return (worker.wid, job.name)

    def job_ready(self, job: QueuedJob) -> list:
        return self.jobs_ready([job])

    def jobs_ready(self, jobs: list) -> list:
        for job in jobs:
            heapq.heappush(self.queue, (job.sort_key(), self._seq, job))
            self._seq += 1
        return self._dispatch()

    def worker_connected(self, wid: int, slots: int) -> list:
        self.workers[wid] = _Worker(wid, slots)
        return self._dispatch()

    def job_completed(self, wid: int, name: str) -> list:
        worker = self.workers[wid]
        worker.pending.remove(name)
        return [self._start(worker)] if self.queue else []


@dataclass(frozen=True)
class HistoryHint:
    """What the history of a target adds: a priority bump and an estimate (seconds or None)."""

    priority_bump: int
    estimated_duration: Optional[float]


def record_timing(timings: list, seconds: float) -> list:
    """Append a measured duration, keeping the last MAX_TIMINGS (test_db.rs add_timing)."""
    return (list(timings) + [float(seconds)])[-MAX_TIMINGS:]


def history_hint(timings: Optional[list], failed_last: bool) -> HistoryHint:
    """As maelstrom-test-runner main_app.rs: never run -> (1, None); failed -> (1, mean); else (0, mean).

    The mean is test_db.rs get_case's: the average of the kept timings.
    """
    if not timings:
        return HistoryHint(1, None)
    mean = sum(t / len(timings) for t in timings)
    return HistoryHint(1 if failed_last else 0, mean)

# --- Run history (kept by deploy under the bucket's data/) and a worker's plan ---


HISTORY_VERSION = 2


def _history_key(job: str, target: str, worker: Optional[str] = None) -> str:
    return f"{job}/{target}" if worker is None else f"{job}/{target}@{worker}"


def _history_targets(history: Optional[Mapping]) -> dict:
    targets = (history or {}).get("targets") if isinstance(history, Mapping) else None
    return targets if isinstance(targets, Mapping) else {}


def _timings(entry) -> list:
    if not isinstance(entry, Mapping):
        return []
    return [float(t) for t in entry.get("timings") or []
            if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0]


def history_record(history: Optional[Mapping], job: str, target: str, seconds: float, failed: bool,
                   worker: Optional[str] = None) -> dict:
    """A new history document with one more measured run of ``job``'s make ``target`` on ``worker``.

    The document is plain JSON: {"version": 2, "targets": {"<job>/<target>@<worker>": {"timings":
    [...], "failed": bool}}}, one entry per allocation; the last MAX_TIMINGS durations are kept.
    Version 1 documents (keys "<job>/<target>", pooled over workers) are read as they are: such an
    entry stands for every allocation of the job until one of them is measured again, when it is
    dropped (migration on read). The input is not modified.
    """
    targets = dict(_history_targets(history))
    key = _history_key(job, target, worker)
    old = targets.get(key) or {}
    targets[key] = {"timings": record_timing(_timings(old), seconds), "failed": bool(failed)}
    if worker is not None:
        targets.pop(_history_key(job, target), None)
    return {"version": HISTORY_VERSION, "targets": dict(sorted(targets.items()))}


def history_lookup(history: Optional[Mapping], job: str, target: str, worker: Optional[str] = None) -> HistoryHint:
    """The HistoryHint of the allocation ``job``@``worker``'s ``target`` from a history document.

    The allocation's own entry when it has one (its last 3 runs, its own failed flag); else a
    version-1 entry of the job; else never run here (priority +1) with the job's mean over the
    workers it ran on as the estimate (None when it never ran anywhere).
    """
    targets = _history_targets(history)
    own = targets.get(_history_key(job, target, worker)) if worker is not None else None
    if own is None:
        own = targets.get(_history_key(job, target))
    if isinstance(own, Mapping) and _timings(own):
        return history_hint(_timings(own), bool(own.get("failed")))
    prefix = _history_key(job, target, "")
    means = [sum(ts) / len(ts) for key, ts in ((k, _timings(v)) for k, v in targets.items())
             if key.startswith(prefix) and ts]
    return HistoryHint(1, sum(means) / len(means) if means else None)


@dataclass(frozen=True)
class PlannedJob:
    """One job of a worker's step as deploy sees it: manifest priority and estimate (or None)."""

    name: str
    priority: int = 0
    estimated_duration: Optional[float] = None


def plan_worker(jobs: list, target: str, slots: int, history: Optional[Mapping] = None,
                worker: Optional[str] = None) -> list:
    """The LPT plan of one worker's step: manifest priority + the allocation's history bump,
    manifest estimate else the history mean (Maelstrom's test runners), on ``slots`` parallel slots."""
    queued = []
    for job in jobs:
        hint = history_lookup(history, job.name, target, worker)
        estimate = job.estimated_duration if job.estimated_duration is not None else hint.estimated_duration
        priority = max(PRIORITY_MIN, min(PRIORITY_MAX, job.priority + hint.priority_bump))
        queued.append(QueuedJob(job.name, priority, estimate))
    return lpt_plan(queued, slots)


def format_plan(worker: str, runs: list) -> list:
    """Plan lines for --check --diff: one per job, in start order, with slot and estimate."""
    lines = [f"{worker}: {len(runs)} job(s) on {1 + max((r.slot for r in runs), default=0)} slot(s)"]
    for run in runs:
        est = run.estimated_duration
        lines.append(f"  {run.name}: slot {run.slot}, estimate " + ("unknown" if est is None else f"{est:g} s"))
    return lines

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement: which jobs run on which workers, and in which state.

Sets of workers are Python int bitsets (bit i = the worker at index i, workers sorted by position):
selector matching for 1,000 jobs over 10,000 workers is then a handful of big-int ANDs per job
instead of ten million label comparisons.

Placement returns data: allocations, and Shortfalls for jobs placed on fewer workers than they ask
for. It never words explanations: placement/explain.report_shortfalls does that, called by the build.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .bits import iter_bits
from .fleet import WorkerIndex
from .select import Scheduler, placement_order


# "89ab"[nibble & 3]: the RFC 4122 variant bits (10xx) applied to one hex digit
_VARIANT_DIGIT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def alloc_id(job, host):
    """maand's stable allocation id: an MD5-based (version 3 style) UUID of "<job>|<worker host>".

    Digit 12 of the hex digest becomes the version (3) and digit 16 gets the RFC 4122 variant bits;
    done on the hex text, which is cheaper than a bytearray round trip for 30,000 allocations."""
    h = hashlib.md5(("%s|%s" % (job, host)).encode("utf-8")).hexdigest()
    return "%s-%s-3%s-%s%s-%s" % (h[:8], h[8:12], h[13:16], _VARIANT_DIGIT[h[16]], h[17:20], h[20:])


@dataclass(slots=True)
class Allocation:
    """One job on one worker: a row of the catalog's allocations."""

    job: str
    worker: str
    alloc_id: str
    state: str  # active | disabled | removed
    zone: str
    deployment_seq: int
    memory_mb: float
    cpu_mhz: float
    worker_index: int | None  # None: the worker left workers.json
    version: str | None

    def as_catalog(self):
        return {
            "job": self.job, "worker": self.worker, "alloc_id": self.alloc_id, "state": self.state,
            "zone": self.zone, "deployment_seq": self.deployment_seq, "memory_mb": self.memory_mb,
            "cpu_mhz": self.cpu_mhz,
        }


# Why a job got fewer workers than it asks for (Shortfall.reason).
SHORT_OF_COUNT = "count"  # placement.count workers asked for, fewer eligible
NO_SELECTOR_MATCH = "selectors"  # no worker carries every selector
NO_ELIGIBLE_WORKER = "rules"  # selectors match, the job's other rules leave no worker


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A job placed on fewer workers than it asks for. Placement only records it;
    placement/explain.report_shortfalls words it (with the per-rule summary) into the build report."""

    job: str
    reason: str  # SHORT_OF_COUNT | NO_SELECTOR_MATCH | NO_ELIGIBLE_WORKER
    count: int = 0  # SHORT_OF_COUNT: placement.count
    eligible: int = 0  # SHORT_OF_COUNT: workers that could take it


@dataclass
class Placement:
    """The result: allocations in a stable order, what the previous catalog still holds, the
    shortfalls, and what explanations need (the worker index and the scheduler's traces)."""

    allocations: list = field(default_factory=list)
    eligible: dict = field(default_factory=dict)  # job -> bitset of workers every rule accepts (before capacity / count)
    placed: dict = field(default_factory=dict)  # job -> bitset of workers holding a non-removed allocation
    removed_workers: list = field(default_factory=list)  # catalog worker records of workers that left workers.json
    removed_jobs: list = field(default_factory=list)  # catalog job records of jobs that left the workspace
    shortfalls: list = field(default_factory=list)  # [Shortfall], by job name
    scheduler: Scheduler | None = None  # traces for on-demand explanations (placement/explain.py)
    index: WorkerIndex | None = None  # the one worker index (placement/fleet.py)


def place(bucket, previous, report, select=None):
    """Match jobs to workers. Every worker whose labels hold the job's selectors, as maand, narrowed by
    the job's constraints, hardware and placement block (placement/select.py) when it has them; jobs are placed
    in an order that puts with / scale_with / avoid targets first. `select(job, index, eligible_mask)
    -> placed_mask` can narrow the result further (a hook for callers and tests).

    Phases: index the workers once, place each job (bitsets), turn bitsets into allocations, record
    shortfalls (worded later by placement/explain.report_shortfalls), carry removed allocations, sort."""
    index = WorkerIndex(bucket.workers)
    result = Placement(index=index)
    scheduler = result.scheduler = Scheduler(bucket, index, previous)
    current = {}
    for name in placement_order(bucket, report):
        job = bucket.jobs[name]
        placed = _place_one(job, scheduler, result, select)
        _allocate(job, placed, scheduler.traces[name].disabled, index.workers, current)
    result.shortfalls = find_shortfalls(bucket, scheduler, result.placed)
    _carry_removed(bucket, previous, current, result)
    result.allocations = _sorted_allocations(current, len(bucket.workers), result.removed_workers)
    return result


def _place_one(job, scheduler, result, select):
    name = job.name
    placed = scheduler.place_job(job)
    trace = scheduler.traces[name]
    result.eligible[name] = trace.eligible
    if select:
        placed = trace.placed = select(job, result.index, placed)
    result.placed[name] = placed
    return placed


def _allocate(job, placed, disabled, workers, current):
    """One Allocation per worker of `placed` (disabled: drained in disabled.json, as a bitset)."""
    name, memory_mb, cpu_mhz, version = job.name, job.memory_mb, job.cpu_mhz, job.version
    for index in iter_bits(placed):
        worker = workers[index]
        host = worker.host
        state = "disabled" if disabled and disabled >> index & 1 else "active"
        current[(name, host)] = Allocation(name, host, alloc_id(name, host), state, worker.zone, 0,
                                           memory_mb, cpu_mhz, index, version)


def find_shortfalls(bucket, scheduler, placed):
    """Jobs with fewer workers than they ask for, as data (jobs with invalid rules are skipped:
    their rule errors are reported already)."""
    out = []
    for name in sorted(bucket.jobs):
        rules = bucket.jobs[name].rules
        trace = scheduler.traces[name]
        if rules is not None and rules.broken:
            continue
        if trace.short is not None:
            count, eligible = trace.short
            out.append(Shortfall(name, SHORT_OF_COUNT, count, eligible))
        elif not placed[name] and not (rules is not None and rules.count == 0):
            out.append(Shortfall(name, NO_ELIGIBLE_WORKER if trace.selector else NO_SELECTOR_MATCH))
    return out


def _sorted_allocations(current, last, removed_workers):
    """By job name, then worker (bucket order; removed workers after, in the previous catalog's order).

    A job's placed allocations enter `current` in worker order (iter_bits is ascending) and its removed
    ones after them (_carry_removed runs last), so only a job whose group ends with a removed
    allocation needs sorting."""
    removed_worker_rank = {w["host"]: i for i, w in enumerate(removed_workers)}

    def key(a):
        return (a.worker_index if a.worker_index is not None else last + removed_worker_rank.get(a.worker, 0),
                a.worker)

    groups = {}
    for alloc in current.values():
        group = groups.get(alloc.job)
        if group is None:
            groups[alloc.job] = [alloc]
        else:
            group.append(alloc)
    out = []
    for name in sorted(groups):
        group = groups[name]
        out.extend(sorted(group, key=key) if group[-1].state == "removed" else group)
    return out


def _carry_removed(bucket, previous, current, result):
    """Allocations, workers and jobs that were in the previous catalog but are gone now stay
    listed as removed until a deploy has stopped them and cleaned up."""
    if not previous:
        return
    hosts = {w.host: w.index for w in bucket.workers}
    old_workers = {w["host"]: w for w in previous.get("workers", ())}
    old_jobs = {j["name"]: j for j in previous.get("jobs", ())}
    still_held_workers, still_held_jobs = set(), set()
    for old in previous.get("allocations", ()):
        key = (old["job"], old["worker"])
        if key in current:
            continue
        job, host = key
        alloc = current[key] = Allocation(
            job, host, old.get("alloc_id") or alloc_id(*key), "removed", old.get("zone", ""),
            old.get("deployment_seq", 0), old.get("memory_mb", 0.0), old.get("cpu_mhz", 0.0), hosts.get(host),
            old.get("version") or (old_jobs.get(job) or {}).get("version"))
        if alloc.worker not in hosts:
            still_held_workers.add(alloc.worker)
        if alloc.job not in bucket.jobs:
            still_held_jobs.add(alloc.job)
    for host in sorted(still_held_workers, key=lambda h: (old_workers.get(h, {}).get("position", 0), h)):
        record = dict(old_workers.get(host) or {"host": host, "labels": [], "tags": {}, "zone": "", "position": None, "memory_mb": None, "cpu_mhz": None})
        record["removed"] = True
        result.removed_workers.append(record)
    for name in sorted(still_held_jobs):
        record = dict(old_jobs.get(name) or {"name": name, "version": "0.0.0", "selectors": []})
        record["removed"] = True
        record["ports"] = {}  # a removed job's ports go back to the pool, as in maand
        result.removed_jobs.append(record)

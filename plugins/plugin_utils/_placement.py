# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement: which jobs run on which workers, and in which state.

Sets of workers are Python int bitsets (bit i = the worker at index i, workers sorted by position):
selector matching for 1,000 jobs over 10,000 workers is then a handful of big-int ANDs per job
instead of ten million label comparisons.
"""

from __future__ import annotations

import hashlib

from ._bits import iter_bits


def alloc_id(job, host):
    """maand's stable allocation id: an MD5-based (version 3 style) UUID of "<job>|<worker host>"."""
    digest = bytearray(hashlib.md5(("%s|%s" % (job, host)).encode("utf-8")).digest())
    digest[6] = (digest[6] & 0x0F) | 0x30  # version 3
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = digest.hex()
    return "%s-%s-%s-%s-%s" % (text[:8], text[8:12], text[12:16], text[16:20], text[20:])


class Allocation:
    __slots__ = ("job", "worker", "alloc_id", "state", "zone", "deployment_seq", "memory_mb", "cpu_mhz",
                 "worker_index", "version")

    def as_catalog(self):
        return {
            "job": self.job, "worker": self.worker, "alloc_id": self.alloc_id, "state": self.state,
            "zone": self.zone, "deployment_seq": self.deployment_seq, "memory_mb": self.memory_mb,
            "cpu_mhz": self.cpu_mhz,
        }


class Fleet:
    """Label bitsets over the bucket's workers."""

    def __init__(self, workers):
        self.workers = workers
        self.all_mask = (1 << len(workers)) - 1
        self.label_masks = {}
        for worker in workers:
            bit = 1 << worker.index
            for label in worker.labels:
                self.label_masks[label] = self.label_masks.get(label, 0) | bit
        self.by_host = {w.host: w for w in workers}

    def selector_mask(self, selectors):
        mask = self.all_mask
        for selector in selectors:
            mask &= self.label_masks.get(selector, 0)
            if not mask:
                break
        return mask


class Placement:
    """The result: allocations in a stable order, and what the previous catalog still holds."""

    def __init__(self):
        self.allocations = []
        self.eligible = {}  # job -> bitset of workers every rule accepts (before capacity / count)
        self.placed = {}  # job -> bitset of workers holding a non-removed allocation
        self.removed_workers = []  # catalog worker records of workers that left workers.json
        self.removed_jobs = []  # catalog job records of jobs that left the workspace
        self.scheduler = None  # _select.Scheduler: traces for on-demand explanations (_explain.py)
        self.fleet = None


def place(bucket, previous, report, select=None):
    """Match jobs to workers. Every worker whose labels hold the job's selectors, as maand, narrowed by
    the job's constraints, hardware and placement block (_select.py) when it has them; jobs are placed
    in an order that puts with / scale_with / avoid targets first. `select(job, fleet, eligible_mask)
    -> placed_mask` can narrow the result further (a hook for callers and tests)."""
    from . import _explain, _select  # late: _select imports _model

    fleet = Fleet(bucket.workers)
    result = Placement()
    result.fleet = fleet
    scheduler = result.scheduler = _select.Scheduler(bucket, fleet, previous)
    current = {}
    for name in _select.placement_order(bucket, report):
        job = bucket.jobs[name]
        placed = scheduler.place_job(job, report)
        result.eligible[name] = scheduler.traces[name].eligible
        if select:
            placed = select(job, fleet, placed)
            scheduler.traces[name].placed = placed
        result.placed[name] = placed
        disabled = scheduler.traces[name].disabled  # drained in disabled.json, as a bitset
        workers = fleet.workers
        memory_mb, cpu_mhz, version = job.memory_mb, job.cpu_mhz, job.version
        for index in iter_bits(placed):
            worker = workers[index]
            host = worker.host
            alloc = Allocation()
            alloc.job = name
            alloc.worker = host
            alloc.alloc_id = alloc_id(name, host)
            alloc.state = "disabled" if disabled and disabled >> index & 1 else "active"
            alloc.zone = worker.zone
            alloc.deployment_seq = 0
            alloc.memory_mb = memory_mb
            alloc.cpu_mhz = cpu_mhz
            alloc.worker_index = index
            alloc.version = version
            current[(name, host)] = alloc
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        trace = scheduler.traces[name]
        rules = getattr(job, "rules", None)
        if rules is not None and rules.broken:
            continue  # its rule errors are reported already
        if trace.short is not None:
            count, available = trace.short
            report.error("ErrInsufficientAllocations", job.file, "$.placement.count",
                         "job %s needs %d workers (placement.count), only %d eligible; %s" % (
                             name, count, available, _explain.summary(bucket, result, name)),
                         "lower count, or make more workers eligible (ansible-playbook maand.core.explain "
                         "-e job=%s shows every rule that rejects each worker)" % name)
        elif not result.placed[name] and not (rules is not None and rules.count == 0):
            if not trace.selector:
                report.warn("ErrInsufficientAllocations", job.file, "selectors",
                            "job %s matches no worker (selectors: %s): %s" % (
                                name, ", ".join(job.selectors), _explain.summary(bucket, result, name)),
                            "label a worker with %s in workspace/workers.json, or change selectors" % ", ".join(
                                job.selectors))
            else:
                report.warn("ErrInsufficientAllocations", job.file, _explain.first_rejecting_field(bucket, result, name),
                            "job %s matches no worker: %s" % (name, _explain.summary(bucket, result, name)),
                            "ansible-playbook maand.core.explain -e job=%s lists every rule that rejects each worker"
                            % name)
    _carry_removed(bucket, previous, current, result)
    removed_worker_rank = {w["host"]: i for i, w in enumerate(result.removed_workers)}
    last = len(bucket.workers)
    result.allocations = sorted(current.values(), key=lambda a: (
        a.job, a.worker_index if a.worker_index is not None else last + removed_worker_rank.get(a.worker, 0), a.worker))
    return result


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
        alloc = Allocation()
        alloc.job, alloc.worker = key
        alloc.alloc_id = old.get("alloc_id") or alloc_id(*key)
        alloc.state = "removed"
        alloc.zone = old.get("zone", "")
        alloc.deployment_seq = old.get("deployment_seq", 0)
        alloc.memory_mb = old.get("memory_mb", 0.0)
        alloc.cpu_mhz = old.get("cpu_mhz", 0.0)
        alloc.version = old.get("version") or (old_jobs.get(alloc.job) or {}).get("version")
        alloc.worker_index = hosts.get(alloc.worker)
        current[key] = alloc
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

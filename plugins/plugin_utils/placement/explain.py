# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a job is (not) placed on each worker: every rule that rejects it, not only the first.

Computed on demand from the Trace the scheduler kept per job (placement/select.py), never for every
(job, worker) pair during a normal build:
  summary(bucket, placement, job)        one line, counts from bitsets:
                                         "api: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled"
  explain_worker(bucket, placement, job, i) -> (status, [reasons])   one worker, every rule
  explain_lines(bucket, placement, job, ...)                       the text the explain playbook prints
In the summary a worker rejected by two rules counts under both; N/M = active allocations / workers.
"""

from __future__ import annotations

import math

from . import constraints
from .hardware import FIELDS, KEYS, hardware_maxima, hardware_shortfalls
from .place import NO_SELECTOR_MATCH, SHORT_OF_COUNT
from .select import selectors_of


def _popcount(mask):
    return bin(mask).count("1")


def fmt_mb(value):
    """3072 -> '3G', 1536 -> '1536M', 2097152 -> '2T' (as written in manifests)."""
    if value >= 1024 * 1024 and value % (1024 * 1024) == 0:
        return "%dT" % (value // (1024 * 1024))
    if value >= 1024 and value % 1024 == 0:
        return "%dG" % (value // 1024)
    return "%gM" % value


def _fmt(key, value):
    if key in ("mem", "storage"):
        return fmt_mb(value)
    if key == "cpu":
        return "%gGHz" % (value / 1000) if value >= 1000 and value % 100 == 0 else "%gMHz" % value
    return "%g" % value


def _constraint_parts(node, index):
    """Top-level conjuncts of a compiled constraint as (label, mask of workers that pass)."""
    if isinstance(node, constraints._And):
        return [part for child in node.children for part in _constraint_parts(child, index)]
    if isinstance(node, constraints._Properties):
        out = []
        for dummy, name, neg in node.items:
            m = index.property_mask(name)
            out.append(("has excluded property %s" % name, index.all_mask ^ m) if neg else
                       ("missing property %s" % name, m))
        return out
    if isinstance(node, constraints._Group):
        return [("not in group %s" % name, index.group_mask(name, group)) for dummy, name, group in node.items]
    if isinstance(node, constraints._Hostlist):
        return [("not in hostlist %s" % ",".join(node.texts), node.mask(index))]
    if isinstance(node, constraints._Ranks):
        return [("not in ranks %s" % ",".join(node.texts), node.mask(index))]
    return [("fails %s" % node.path, node.mask(index))]


def _rejections(bucket, placement, name):
    """[(label, mask)]: each rule and the workers it rejects among those without the job; plus the
    workers where it is placed but disabled."""
    index = placement.index
    trace = placement.scheduler.traces[name]
    job = bucket.jobs[name]
    rules = job.rules
    unplaced = index.all_mask & ~trace.placed
    out = [("missing label %s" % label, unplaced & ~index.label_masks.get(label, 0)) for label in selectors_of(job)]
    counted = rules is not None and rules.count is not None
    disabled_rejected = 0
    if rules is not None and not rules.plain and not rules.broken:
        if rules.constraint is not None:
            out += [(label, unplaced & ~mask) for label, mask in _constraint_parts(rules.constraint._node, index)]
        if rules.hardware:
            hx = index
            maxima = hardware_maxima(rules.hardware, hx, trace.hw_candidates)
            for key in KEYS:
                want = rules.hardware.get(key)
                if want is None:
                    continue
                known = hx.at_least_mask(key, -math.inf)
                if want == "max":
                    best = maxima.get(key)
                    if best is None:
                        out.append(("%s max: no candidate" % key, unplaced))
                        continue
                    out.append(("%s < max %s" % (key, _fmt(key, best)), unplaced & known & ~hx.at_least_mask(key, best)))
                else:
                    out.append(("%s < %s" % (key, _fmt(key, want)), unplaced & known & ~hx.at_least_mask(key, want)))
                out.append(("%s unknown" % key, unplaced & ~known))
        target = rules.with_job or rules.scale_with
        if target:
            out.append(("%s not here" % target, unplaced & ~trace.with_mask))
        for other, mask in trace.avoid:
            out.append(("avoids %s" % other, unplaced & mask))
        if counted:
            no_fit = 0
            for i in trace.no_fit:
                no_fit |= 1 << i
            out.append(("capacity exhausted", unplaced & no_fit))
            out.append(("not chosen (count %d)" % rules.count, unplaced & trace.chosen_from))
            # drained workers that passed every rule but get no new allocation
            disabled_rejected = unplaced & trace.disabled & trace.eligible & ~no_fit & ~trace.chosen_from
    out.append(("disabled", (trace.disabled & trace.placed) | disabled_rejected))
    return out


def summary(bucket, placement, name):
    """'api: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled' (bitset counts only)."""
    trace = placement.scheduler.traces[name]
    active = _popcount(trace.placed & ~trace.disabled)
    head = "%s: %d/%d workers" % (name, active, len(bucket.workers))
    rules = bucket.jobs[name].rules
    if rules is not None and rules.count is not None:
        head += " (count %d)" % rules.count
    counts = [(_popcount(mask), label) for label, mask in _rejections(bucket, placement, name)]
    counts = sorted((c for c in counts if c[0]), key=lambda c: (-c[0], c[1]))
    if not counts:
        return head
    return head + ": " + ", ".join("%d %s" % c for c in counts)


def first_rejecting_field(bucket, placement, name):
    """The manifest field of the first rule (in evaluation order) that leaves no worker."""
    trace = placement.scheduler.traces[name]
    if not trace.selector:
        return "selectors"
    if trace.constraint is not None and not trace.selector & trace.constraint:
        return "$.constraints"
    if trace.hardware is not None and not trace.hardware:
        return "$.hardware"
    return "$.placement"


def _disabled_reason(bucket, name, host):
    if host in bucket.disabled_workers:
        return "worker %s is disabled in disabled.json" % host
    if bucket.disabled_jobs.get(name, ()) is None:
        return "job %s is disabled in disabled.json" % name
    return "allocation %s@%s is disabled in disabled.json" % (name, host)


def _reservations(placement):
    """worker index -> (active memory, active cpu) reserved: for the capacity notes."""
    totals = {}
    for alloc in placement.allocations:
        if alloc.state == "active" and alloc.worker_index is not None:
            mem, cpu = totals.get(alloc.worker_index, (0.0, 0.0))
            totals[alloc.worker_index] = (mem + (alloc.memory_mb or 0.0), cpu + (alloc.cpu_mhz or 0.0))
    return totals


class _JobContext:
    """Per-job values shared by the per-worker explanations (computed once per explain call)."""

    def __init__(self, bucket, placement, name):
        self.bucket, self.placement, self.name = bucket, placement, name
        self.job = bucket.jobs[name]
        self.rules = self.job.rules
        self.trace = placement.scheduler.traces[name]
        self.maxima = None
        if self.rules is not None and self.rules.hardware and not self.rules.broken:
            self.maxima = hardware_maxima(self.rules.hardware, placement.index, self.trace.hw_candidates)
        self._reserved = None

    @property
    def reserved(self):
        if self._reserved is None:
            self._reserved = _reservations(self.placement)
        return self._reserved


def explain_worker(bucket, placement, name, i, ctx=None):
    """(status, reasons) for workers[i]: status 'placed', 'placed, disabled' or 'not placed'; reasons
    lists every rule that rejects the worker (or notes on a placed one)."""
    ctx = ctx or _JobContext(bucket, placement, name)
    job, rules, trace = ctx.job, ctx.rules, ctx.trace
    index = placement.index
    worker = bucket.workers[i]
    bit = 1 << i
    reasons = []
    if trace.placed & bit:
        status = "placed"
        if trace.disabled & bit:
            status = "placed, disabled"
            reasons.append(_disabled_reason(bucket, name, worker.host) + ": the allocation stays but does not run")
        elif rules is not None and rules.count is not None:
            if trace.kept & bit:
                reasons.append("kept from the previous catalog (placement is sticky)")
            else:
                reasons.append("chosen by %s (%s)" % (rules.strategy, _key_text(rules, trace.keys.get(i))))
        if not trace.disabled & bit:
            reasons.extend(_capacity_notes(job, worker, ctx.reserved.get(i)))
        return status, reasons
    for label in selectors_of(job):
        if label not in worker.labels:
            reasons.append("missing label %s (selectors)" % label)
    if rules is not None and rules.broken:
        reasons.append("the job's placement rules are invalid (see the build errors)")
        return "not placed", reasons
    if rules is not None and not rules.plain:
        if rules.constraint is not None:
            reasons.extend(rules.constraint.explain(index, i))
        if rules.hardware:
            reasons.extend("hardware: " + s for s in hardware_shortfalls(rules.hardware, index.hardware_record(i),
                                                                         ctx.maxima))
        target = rules.with_job or rules.scale_with
        if target and not trace.with_mask & bit:
            key = "with" if rules.with_job else "scale_with"
            reasons.append("%s %s: %s is not active on this worker" % (key, target, target))
        for other, mask in trace.avoid:
            if mask & bit:
                reasons.append("avoid %s: %s is placed on this worker" % (other, other))
        if rules.count is not None and trace.eligible & bit:
            if i in trace.no_fit:
                reasons.append("capacity exhausted: " + _no_fit_text(job, trace.no_fit[i]))
            elif trace.disabled & bit and not trace.chosen_from & bit:
                reasons.append(_disabled_reason(bucket, name, worker.host) + ": no new allocations there")
            elif trace.chosen_from & bit:
                winners = ", ".join("%s (%s)" % (bucket.workers[w].host, _key_text(rules, trace.keys.get(w)))
                                    for w in trace.winners[:5])
                more = " and %d more" % (len(trace.winners) - 5) if len(trace.winners) > 5 else ""
                reasons.append("not chosen by count %d (%s): chosen %s%s; here %s" % (
                    rules.count, rules.strategy, winners or "none", more, _key_text(rules, trace.keys.get(i))))
    if not reasons and trace.disabled & bit:
        reasons.append(_disabled_reason(bucket, name, worker.host))
    return "not placed", reasons


def _key_text(rules, key):
    if key is None:
        return "?"
    if rules.strategy == "spread":
        return "%s=%s" % (rules.spread_by, key[0] or "(none)")
    parts = []
    for label, value, unit in (("mem", key[0], "MB"), ("cpu", key[1], "MHz"), ("storage", key[2], "MB")):
        parts.append("%s %s" % (label, "unknown" if value == math.inf else "%g %s" % (value, unit)))
    return "spare after: " + ", ".join(parts)


def _no_fit_text(job, free):
    free_mem, free_cpu = free
    parts = []
    for free_value, need, key, unit in ((free_mem, job.memory_mb, "memory", "MB"), (free_cpu, job.cpu_mhz, "cpu", "MHz")):
        if not need:
            continue
        if free_value == math.inf:  # _fits: an undeclared capacity cannot take a reservation
            parts.append("no %s declared in workers.json (the job reserves %g %s)" % (key, need, unit))
        elif free_value < need:
            parts.append("%s %g %s free < %g %s reserved" % ("mem" if key == "memory" else key, free_value, unit,
                                                             need, unit))
    return ", ".join(parts) or "the worker declares no memory/cpu for the job's reservation"


def _capacity_notes(job, worker, reserved):
    if not reserved:
        return []
    notes = []
    for value, capacity, key, unit in ((reserved[0], worker.memory_mb, "memory", "MB"),
                                       (reserved[1], worker.cpu_mhz, "cpu", "MHz")):
        if value and (capacity is None or value > capacity):
            notes.append("capacity exceeded: active reservations need %g %s %s, the worker has %s" % (
                value, unit, key, "none declared" if capacity is None else "%g %s" % (capacity, unit)))
    return notes


def rules_text(job):
    rules = job.rules
    parts = ["selectors %s" % ", ".join(selectors_of(job))]
    if rules is not None:
        extra = rules.as_catalog()
        if "constraints" in extra:
            import json
            parts.append("constraints %s" % json.dumps(extra["constraints"], sort_keys=True))
        if "hardware" in extra:
            parts.append("hardware %s" % extra["hardware"])
        if "placement" in extra:
            parts.append("placement %s" % " ".join(
                "%s=%s" % (k, ",".join(v) if isinstance(v, list) else v) for k, v in sorted(extra["placement"].items())))
    return "; ".join(parts)


def explain_lines(bucket, placement, name, hosts=None, show="all", limit=None):
    """The explanation text of one job: summary, rules, then one block per worker.
    hosts: only these workers; show: all | placed | rejected; limit: at most that many workers."""
    if name not in bucket.jobs:
        raise KeyError(name)
    ctx = _JobContext(bucket, placement, name)
    lines = [summary(bucket, placement, name), "  rules: " + rules_text(ctx.job)]
    wanted = None if hosts is None else set(hosts)
    shown = skipped = 0
    for worker in bucket.workers:
        if wanted is not None and worker.host not in wanted:
            continue
        placed = bool(ctx.trace.placed >> worker.index & 1)
        if (show == "placed" and not placed) or (show == "rejected" and placed):
            continue
        if limit is not None and shown >= limit:
            skipped += 1
            continue
        status, reasons = explain_worker(bucket, placement, name, worker.index, ctx)
        shown += 1
        lines.append("  %s (position %s): %s" % (worker.host, worker.position, status))
        lines.extend("      - " + reason for reason in reasons)
    if skipped:
        lines.append("  ... %d more workers (ansible-playbook maand.core.explain -e maand_job=%s shows them all)" % (
            skipped, name))
    return lines


def short_jobs(bucket, placement):
    """Jobs that got fewer active allocations than they asked for (placement.count or
    min_allocations_count): the build prints their explanation."""
    out = []
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        rules = job.rules
        if rules is not None and rules.broken:
            continue
        trace = placement.scheduler.traces.get(name)
        if trace is None:
            continue
        active = _popcount(trace.placed & ~trace.disabled)
        wanted = max(rules.count if rules is not None and rules.count is not None else 0,
                     job.min_allocations_count or 0)
        if active < wanted:
            out.append(name)
    return out


def report_shortfalls(bucket, placement, report):
    """Word placement's shortfalls (jobs placed on fewer workers than they ask for) into the build
    report: an error for placement.count, a warning for a job that matches no worker."""
    for short in placement.shortfalls:
        name = short.job
        job = bucket.jobs[name]
        if short.reason == SHORT_OF_COUNT:
            report.error("ErrInsufficientAllocations", job.file, "$.placement.count",
                         "job %s needs %d workers (placement.count), only %d eligible; %s" % (
                             name, short.count, short.eligible, summary(bucket, placement, name)),
                         "lower count, or make more workers eligible (ansible-playbook maand.core.explain "
                         "-e job=%s shows every rule that rejects each worker)" % name)
        elif short.reason == NO_SELECTOR_MATCH:
            selectors = ", ".join(selectors_of(job))
            report.warn("ErrInsufficientAllocations", job.file, "selectors",
                        "job %s matches no worker (selectors: %s): %s" % (
                            name, selectors, summary(bucket, placement, name)),
                        "label a worker with %s in workspace/workers.json, or change selectors" % selectors)
        else:
            report.warn("ErrInsufficientAllocations", job.file, first_rejecting_field(bucket, placement, name),
                        "job %s matches no worker: %s" % (name, summary(bucket, placement, name)),
                        "ansible-playbook maand.core.explain -e maand_job=%s lists every rule that rejects each worker"
                        % name)


__all__ = ["summary", "explain_worker", "explain_lines", "short_jobs", "first_rejecting_field", "fmt_mb", "FIELDS",
           "report_shortfalls"]

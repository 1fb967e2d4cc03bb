# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement rules beyond labels (docs/placement.md): RFC 31 `constraints` with named groups, Juju
`hardware` minimums, and the `placement` block (count, least-waste / spread, with, scale_with, avoid).

Two halves:
  compile_rules(bucket, report)   once per build, after the model is loaded: validate and compile every
                                  job's rules into job.rules (errors name file, job, JSON path and fix)
  Scheduler(bucket, index, previous)  used by placement/place.place(): computes each job's workers as int
                                  bitsets over the one worker index (placement/fleet.WorkerIndex), keeping a
                                  Trace per job that placement/explain.py reads on demand (nothing per
                                  (job, worker) pair here); placement_order orders the jobs (graphlib).

A job without any of the new fields is placed on every worker whose labels hold its selectors, as maand.
"""

from __future__ import annotations

import graphlib
import heapq
import math
from dataclasses import dataclass, field
from functools import lru_cache

from .bits import iter_bits
from .constraints import ConstraintError, compile_constraint
from .hardware import HardwareError, format_hardware, hardware_mask, merge_hardware, parse_hardware

# The file [constraint_groups] and the bucket-wide hardware default come from (bucket/model.MAAND_CONF; not
# imported from there: bucket/model.py imports this module, and the core's imports never form a cycle).
MAAND_CONF = "maand.conf"

PLACEMENT_KEYS = ("avoid", "count", "scale_with", "spread_by", "strategy", "with")
STRATEGIES = ("least-waste", "spread")
DEFAULT_STRATEGY = "least-waste"
DEFAULT_SPREAD_TAG = "zone"
_INF = math.inf


@dataclass(slots=True)
class Rules:
    """A job's compiled placement rules. `plain` = none of the new fields: maand's rule only."""

    constraint: object = None  # placement/constraints.Constraint or None
    hardware: dict = field(default_factory=dict)  # effective (bucket default merged with the job's)
    count: int | None = None
    strategy: str | None = None
    spread_by: str | None = None
    with_job: str | None = None
    scale_with: str | None = None
    avoid: tuple = ()
    broken: bool = False  # invalid rules: the build fails; the job is placed nowhere (no noise)
    plain: bool = True
    # The selectors placement uses when they differ from job.selectors (the model's, never rewritten
    # here): a with / scale_with job without selectors is placed by co-location alone ("worker").
    selectors: tuple | None = None

    def as_catalog(self):
        """Extra keys for the job's catalog record (only for jobs that use the new fields)."""
        out = {}
        if self.selectors is not None:
            out["selectors"] = list(self.selectors)
        if self.constraint is not None:
            out["constraints"] = self.constraint.expr
        if self.hardware:
            out["hardware"] = _format_hardware(tuple(self.hardware.items()))
        placement = {k: v for k, v in (("count", self.count), ("strategy", self.strategy),
                                       ("spread_by", self.spread_by), ("with", self.with_job),
                                       ("scale_with", self.scale_with), ("avoid", list(self.avoid) or None))
                     if v is not None}
        if placement:
            out["placement"] = placement
        return out


def selectors_of(job):
    """The selectors placement matches labels against: the compiled rules' when they set them, else
    the model's job.selectors."""
    rules = job.rules
    if rules is not None and rules.selectors is not None:
        return rules.selectors
    return job.selectors


@lru_cache(maxsize=256)  # jobs mostly share a few hardware settings
def _format_hardware(items):
    return format_hardware(dict(items))


def _parse_job_hardware(value):
    """parse_hardware, cached for strings (fleets of jobs share a few); the result is read-only."""
    if isinstance(value, str):
        return _parse_hardware_text(value)
    return parse_hardware(value, "hardware")


@lru_cache(maxsize=256)
def _parse_hardware_text(value):
    return parse_hardware(value, "hardware")


def _fix_for(message, what):
    """The fix part of a library message ("...; write [\"ssd\"]") or a generic one."""
    for marker in ("; write ", "; combine ", "write "):
        if marker in message:
            return message[message.index(marker) + 2:].strip() if marker.startswith(";") else \
                message[message.index(marker):].strip()
    return what


_CONSTRAINT_FIX = ("write an RFC 31 constraint such as {\"properties\": [\"ssd\"]}, {\"hostlist\": [\"node[1-3]\"]} "
                   "or {\"ranks\": [\"0-3\"]} (see docs/constraints.md)")
_HARDWARE_FIX = "write e.g. \"mem=3G cores=2 storage=20G cpu=2000\" or {\"mem\": \"3G\"} (see docs/constraints.md)"


def _group_path(name):
    return "$.constraint_groups.%s" % name if name.replace("-", "_").isidentifier() and "-" not in name \
        else "$.constraint_groups[%r]" % name


def compile_groups(bucket, report):
    """maand.conf [constraint_groups]: name -> compiled Constraint (None when invalid)."""
    raw = bucket.conf.get("constraint_groups")
    groups = {}
    if raw is None:
        return groups
    if not isinstance(raw, dict):
        report.error("ErrInvalidConstraint", MAAND_CONF, "$.constraint_groups",
                     "constraint_groups must be a table of name = constraint, got %r" % (raw,),
                     "write [constraint_groups] with lines like fast-network = {hostlist = [\"node[1-8]\"]}")
        return groups
    for name in sorted(raw):
        path = _group_path(name)
        try:
            groups[name] = compile_constraint(raw[name], path)  # no nested groups: no cycles to resolve
        except ConstraintError as exc:
            groups[name] = None
            for jpath, message in exc.errors:
                report.error("ErrInvalidConstraint", MAAND_CONF, jpath, "constraint group %s: %s" % (name, message),
                             _fix_for(message, _CONSTRAINT_FIX))
    return groups


def compile_rules(bucket, report):
    """Validate and compile every job's constraints, hardware and placement into job.rules."""
    groups = compile_groups(bucket, report)
    default_hw = {}
    if bucket.conf.get("hardware") is not None:
        try:
            default_hw = parse_hardware(bucket.conf.get("hardware"), "$.hardware")
        except HardwareError as exc:
            for jpath, message in exc.errors:
                report.error("ErrInvalidConstraint", MAAND_CONF, jpath, "bucket hardware default: %s" % message,
                             _fix_for(message, _HARDWARE_FIX))
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        job.rules = _compile_job(bucket, job, groups, default_hw, report)
    _check_references(bucket, report)


def _compile_job(bucket, job, groups, default_hw, report):
    rules = Rules()
    name, rel = job.name, job.file
    if job.constraints is not None:
        rules.plain = False
        try:
            rules.constraint = compile_constraint(job.constraints, "constraints", groups=groups)
        except ConstraintError as exc:
            rules.broken = True
            for jpath, message in exc.errors:
                report.error("ErrInvalidConstraint", rel, jpath, "job %s: %s" % (name, message),
                             _fix_for(message, _CONSTRAINT_FIX))
    try:
        own = _parse_job_hardware(job.hardware)
    except HardwareError as exc:
        rules.broken = True
        own = {}
        for jpath, message in exc.errors:
            report.error("ErrInvalidConstraint", rel, jpath, "job %s: %s" % (name, message),
                         _fix_for(message, _HARDWARE_FIX))
    rules.hardware = merge_hardware(default_hw, own)
    if rules.hardware:
        rules.plain = False
    if job.placement is not None:
        rules.plain = False
        _compile_placement(job, rules, report)
    return rules


def _placement_error(job, rules, key, message, fix):
    rules.broken = True
    path = "$.placement" + ("." + key if key else "")
    return ("ErrInvalidPlacement", job.file, path, "job %s: %s" % (job.name, message), fix)


def _compile_placement(job, rules, report):
    """The placement block, in named phases; every problem is reported (in this order)."""
    spec = job.placement
    problems = []
    if not isinstance(spec, dict):
        problems.append(_placement_error(job, rules, "", "placement must be an object, got %r" % (spec,),
                                         "write e.g. {\"count\": 2, \"strategy\": \"least-waste\"}"))
        spec = {}
    for phase in (_placement_keys, _placement_count, _placement_strategy, _placement_spread, _placement_colocation,
                  _placement_avoid):
        phase(job, rules, spec, problems)
    for problem in problems:
        report.error(*problem)


def _placement_keys(job, rules, spec, problems):
    for key in sorted(set(spec) - set(PLACEMENT_KEYS)):
        problems.append(_placement_error(job, rules, key, "unknown placement key %r" % key,
                                         "use only: %s" % ", ".join(PLACEMENT_KEYS)))


def _placement_count(job, rules, spec, problems):
    if "count" not in spec:
        return
    count = spec["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        problems.append(_placement_error(job, rules, "count", "count must be a whole number >= 0, got %r" % (count,),
                                         "write e.g. \"count\": 2 (omit count to use every eligible worker)"))
    else:
        rules.count = count


def _placement_strategy(job, rules, spec, problems):
    if "strategy" not in spec:
        if rules.count is not None:
            rules.strategy = DEFAULT_STRATEGY
        return
    strategy = spec["strategy"]
    if strategy not in STRATEGIES:
        problems.append(_placement_error(job, rules, "strategy", "unknown strategy %r" % (strategy,),
                                         "use \"least-waste\" or \"spread\""))
    elif "count" not in spec:
        problems.append(_placement_error(job, rules, "strategy", "strategy %s needs a count (without count every "
                                         "eligible worker is used, there is nothing to choose)" % strategy,
                                         "add \"count\": N or remove strategy"))
    else:
        rules.strategy = strategy


def _placement_spread(job, rules, spec, problems):
    if "spread_by" in spec:
        tag = spec["spread_by"]
        if not isinstance(tag, str) or not tag.strip():
            problems.append(_placement_error(job, rules, "spread_by", "spread_by must be a tag name, got %r" % (tag,),
                                             "write e.g. \"spread_by\": \"rack\" (default zone)"))
        elif spec.get("strategy") != "spread":
            problems.append(_placement_error(job, rules, "spread_by", "spread_by only applies with strategy spread",
                                             "set \"strategy\": \"spread\" or remove spread_by"))
        else:
            rules.spread_by = tag.lower()
    if rules.strategy == "spread" and rules.spread_by is None:
        rules.spread_by = DEFAULT_SPREAD_TAG


def _placement_colocation(job, rules, spec, problems):
    """with / scale_with, and the selectors placement uses for them."""
    for key, attr in (("with", "with_job"), ("scale_with", "scale_with")):
        if key in spec:
            value = spec[key]
            if not isinstance(value, str) or not value:
                problems.append(_placement_error(job, rules, key, "%s must be a job name, got %r" % (key, value),
                                                 "write e.g. \"%s\": \"db\"" % key))
            else:
                setattr(rules, attr, value)
    if (rules.with_job or rules.scale_with) and "selectors" not in job.manifest:
        # co-location names the workers; maand's default selector (the job's own name as a label)
        # would only get in the way, so placement uses "worker" (every worker carries it)
        rules.selectors = ("worker",)
    if "with" in spec and "scale_with" in spec:
        problems.append(_placement_error(job, rules, "scale_with", "with and scale_with exclude each other",
                                         "keep scale_with (every worker of that job) or with (some of them)"))
    if "scale_with" in spec and ("count" in spec or "strategy" in spec):
        problems.append(_placement_error(job, rules, "scale_with", "scale_with places on every worker of %s; it "
                                         "cannot be combined with count or strategy" % spec["scale_with"],
                                         "use with + count to pick some of them, or drop count"))


def _placement_avoid(job, rules, spec, problems):
    if "avoid" not in spec:
        return
    avoid = spec["avoid"]
    if isinstance(avoid, str):
        problems.append(_placement_error(job, rules, "avoid", "avoid takes a list of job names, got a string",
                                         "write [\"%s\"]" % avoid))
    elif not isinstance(avoid, list) or not all(isinstance(a, str) and a for a in avoid):
        problems.append(_placement_error(job, rules, "avoid", "avoid must be a list of job names, got %r" % (avoid,),
                                         "write e.g. \"avoid\": [\"db\"]"))
    else:
        rules.avoid = tuple(dict.fromkeys(avoid))


def _check_references(bucket, report):
    jobs = bucket.jobs
    for name in sorted(jobs):
        job = jobs[name]
        rules = job.rules
        refs = [("with", rules.with_job), ("scale_with", rules.scale_with)]
        refs += [("avoid[%d]" % k, other) for k, other in enumerate(rules.avoid)]
        for key, other in refs:
            if other is None:
                continue
            path = "$.placement." + key
            if other == name:
                rules.broken = True
                report.error("ErrInvalidPlacement", job.file, path, "job %s: %s names the job itself" % (
                    name, key.split("[")[0]), "name another job")
            elif other not in jobs:
                rules.broken = True
                close = ", ".join(sorted(jobs)[:10])
                report.error("ErrInvalidPlacement", job.file, path, "job %s: %s names unknown job %s" % (
                    name, key.split("[")[0], other),
                    "fix the job name or add workspace/jobs/%s (jobs: %s%s)" % (
                        other, close, ", ..." if len(jobs) > 10 else ""))


def placement_order(bucket, report):
    """Jobs in an order that places every with / scale_with / avoid target first; among the ready jobs
    those without count come first (so least-waste sees their reservations), then by name.
    Cycles are ErrInvalidPlacement (the jobs of a cycle are still placed, the build fails)."""
    jobs = bucket.jobs
    graph = {}
    for name in jobs:
        rules = jobs[name].rules
        if rules is None or rules.plain:
            graph[name] = set()
            continue
        deps = {d for d in (rules.with_job, rules.scale_with) if d in jobs}
        for other in rules.avoid:
            theirs = getattr(jobs.get(other), "rules", None)
            # "never together" is symmetric: when both sides declare it, one edge is enough (no cycle)
            if other in jobs and not (theirs is not None and name in theirs.avoid and other > name):
                deps.add(other)
        graph[name] = deps
    while True:
        sorter = graphlib.TopologicalSorter(graph)
        try:
            sorter.prepare()
            break
        except graphlib.CycleError as exc:
            cycle = exc.args[1]
            first = jobs[cycle[0]]
            report.error("ErrInvalidPlacement", first.file, "$.placement",
                         "placement cycle: %s (with / scale_with / avoid)" % " -> ".join(cycle),
                         "remove one of these references so the jobs can be placed one after the other")
            for node in set(cycle):
                if node in jobs and jobs[node].rules is not None:
                    jobs[node].rules.broken = True
                graph[node] = set()

    def priority(name):
        rules = getattr(jobs[name], "rules", None)
        return (rules is not None and rules.count is not None, name)

    ready = [(priority(n), n) for n in sorter.get_ready()]
    heapq.heapify(ready)
    order = []
    while ready:
        dummy, name = heapq.heappop(ready)
        order.append(name)
        sorter.done(name)
        for nxt in sorter.get_ready():
            heapq.heappush(ready, (priority(nxt), nxt))
    return order


@dataclass(slots=True)
class Trace:
    """What placement decided for one job, for on-demand explanations. Masks are int bitsets."""

    selector: int = 0
    constraint: int | None = None  # mask, None = no constraint
    hw_candidates: int = 0  # the set `max` was resolved against
    hardware: int | None = None  # mask, None = no hardware constraint
    with_mask: int | None = None  # workers where the with / scale_with target is active
    avoid: list = field(default_factory=list)  # [(job, mask of its workers)]
    eligible: int = 0  # passes every rule above (before capacity / disabled / count)
    disabled: int = 0  # workers disabled for this job (disabled.json)
    kept: int = 0  # count jobs: previous allocations kept (sticky)
    no_fit: dict = field(default_factory=dict)  # count jobs: worker index -> (free mem, free cpu) that did not fit
    chosen_from: int = 0  # count jobs: the candidates the strategy chose among
    keys: dict = field(default_factory=dict)  # count jobs: worker index -> rank key (least-waste spare, spread tag)
    placed: int = 0
    winners: tuple = ()
    short: tuple | None = None  # count jobs: (count, eligible) when fewer than count could be placed


class Scheduler:
    """Places jobs one after the other (placement_order), charging reservations as it goes.
    `index` is the one worker index (placement/fleet.WorkerIndex) built from bucket.workers."""

    def __init__(self, bucket, index, previous=None):
        self.bucket = bucket
        self.index = index
        self.n = index.size
        self.traces = {}
        self.active = {}  # job -> mask of its active allocations
        self.placed = {}  # job -> mask of its non-removed allocations
        self.charging = any(j.rules is not None and j.rules.count is not None for j in bucket.jobs.values())
        self.used_mem = [0.0] * self.n if self.charging else None
        self.used_cpu = [0.0] * self.n if self.charging else None
        self.disabled_workers = index.hosts_mask(bucket.disabled_workers)
        self.previous = self._previous_masks(previous) if self.charging else {}

    def _previous_masks(self, previous):
        """job -> mask of its non-removed allocations in the previous catalog (count jobs are sticky)."""
        out = {}
        index_of = self.index.index_of
        for alloc in (previous or {}).get("allocations", ()):
            if alloc.get("state") != "removed":
                i = index_of.get(alloc.get("worker"))
                if i is not None:
                    out[alloc.get("job")] = out.get(alloc.get("job"), 0) | (1 << i)
        return out

    def disabled_for(self, name):
        m = self.disabled_workers
        if name in self.bucket.disabled_jobs:
            hosts = self.bucket.disabled_jobs[name]
            m = self.index.all_mask if hosts is None else m | self.index.hosts_mask(hosts)
        return m

    def place_job(self, job):
        """The job's workers (bitset). Records a Trace; charges active reservations."""
        name = job.name
        rules = job.rules
        trace = self.traces[name] = Trace()
        sel = trace.selector = self.index.selector_mask(selectors_of(job))
        trace.disabled = self.disabled_for(name)
        if rules is None or rules.plain:
            placed = trace.eligible = sel
        elif rules.broken:
            placed = 0
        else:
            placed = self._place_rules(job, rules, trace, sel)
        trace.placed = placed
        self.placed[name] = placed
        active = self.active[name] = placed & ~trace.disabled
        if self.charging and active and (job.memory_mb or job.cpu_mhz):
            self._charge(active, job.memory_mb or 0.0, job.cpu_mhz or 0.0)
        return placed

    def _charge(self, active, mem, cpu):
        used_mem, used_cpu = self.used_mem, self.used_cpu
        for i in iter_bits(active):
            used_mem[i] += mem
            used_cpu[i] += cpu

    def _place_rules(self, job, rules, trace, eligible):
        if rules.constraint is not None:
            trace.constraint = rules.constraint.mask(self.index)
            eligible &= trace.constraint
        if rules.hardware:
            trace.hw_candidates = eligible
            trace.hardware = hardware_mask(rules.hardware, self.index, eligible)
            eligible &= trace.hardware
        target = rules.with_job or rules.scale_with
        if target:
            trace.with_mask = self.active.get(target, 0)
            eligible &= trace.with_mask
        if rules.avoid:
            trace.avoid = [(other, self.placed.get(other, 0)) for other in rules.avoid]
            for dummy, mask in trace.avoid:
                eligible &= ~mask
        trace.eligible = eligible
        if rules.count is None:
            return eligible
        return self._choose(job, rules, trace, eligible)

    # --- count: sticky choice ------------------------------------------------------------------

    def _fits(self, job, i):
        """(fits, free mem, free cpu): can worker i take the job's reservation on top of what is placed."""
        w = self.bucket.workers[i]
        free_mem = _INF if w.memory_mb is None else w.memory_mb - self.used_mem[i]
        free_cpu = _INF if w.cpu_mhz is None else w.cpu_mhz - self.used_cpu[i]
        ok = True
        if job.memory_mb and (w.memory_mb is None or free_mem < job.memory_mb):
            ok = False
        if job.cpu_mhz and (w.cpu_mhz is None or free_cpu < job.cpu_mhz):
            ok = False
        return ok, free_mem, free_cpu

    def _choose(self, job, rules, trace, eligible):
        name = job.name
        wholly_disabled = name in self.bucket.disabled_jobs and self.bucket.disabled_jobs[name] is None
        previous = self.previous.get(name, 0)
        fit = 0
        for i in iter_bits(eligible):
            ok, free_mem, free_cpu = self._fits(job, i)
            if ok:
                fit |= 1 << i
            else:
                trace.no_fit[i] = (free_mem, free_cpu)
        kept = previous & fit  # sticky: still valid previous allocations stay (also on drained workers)
        fresh = fit & ~kept
        if not wholly_disabled:
            fresh &= ~trace.disabled  # a drained worker gets no new allocation
        trace.chosen_from = kept | fresh
        keyf = self._least_waste_key if rules.strategy == "least-waste" else self._spread_key(rules.spread_by)
        keys = trace.keys
        for i in iter_bits(trace.chosen_from):
            keys[i] = keyf(job, i)
        kept_list = list(iter_bits(kept))
        if len(kept_list) > rules.count:
            kept_list = self._trim(rules, kept_list, keys, rules.count)
        chosen = list(kept_list)
        need = rules.count - len(chosen)
        if need > 0:
            candidates = list(iter_bits(fresh))
            if rules.strategy == "least-waste":
                chosen += heapq.nsmallest(need, candidates, key=lambda i: keys[i])
            else:
                chosen += self._spread_fill(candidates, chosen, keys, need)
        placed = 0
        for i in chosen:
            placed |= 1 << i
        trace.kept = 0
        for i in kept_list:
            trace.kept |= 1 << i
        trace.winners = tuple(sorted(chosen))
        if len(chosen) < rules.count:  # a Shortfall (placement/place.find_shortfalls), worded by placement/explain.py
            trace.short = (rules.count, len(kept_list) + bin(fresh).count("1"))
        return placed

    def _least_waste_key(self, job, i):
        """Juju's least wastage: least spare memory left, then cpu, then storage; ties by position."""
        w = self.bucket.workers[i]
        mem = _INF if w.memory_mb is None else w.memory_mb - self.used_mem[i] - (job.memory_mb or 0.0)
        cpu = _INF if w.cpu_mhz is None else w.cpu_mhz - self.used_cpu[i] - (job.cpu_mhz or 0.0)
        storage = _INF if w.storage_mb is None else w.storage_mb
        return (mem, cpu, storage, w.position)

    def _spread_key(self, tag):
        workers = self.bucket.workers

        def key(job, i):
            return (workers[i].tags.get(tag, ""), workers[i].position)
        return key

    @staticmethod
    def _trim(rules, kept, keys, count):
        """count went down: drop the difference (least-waste: the most wasteful; spread: from the
        biggest group, highest position first)."""
        if rules.strategy == "least-waste":
            return sorted(heapq.nsmallest(count, kept, key=lambda i: keys[i]))
        groups = {}
        for i in kept:
            groups.setdefault(keys[i][0], []).append(i)
        for members in groups.values():
            members.sort(key=lambda i: keys[i][1])
        total = len(kept)
        while total > count:
            tag = max(groups, key=lambda t: (len(groups[t]), keys[groups[t][-1]][1]))
            groups[tag].pop()
            total -= 1
        return sorted(i for members in groups.values() for i in members)

    @staticmethod
    def _spread_fill(candidates, chosen, keys, need):
        """Even across the tag: repeatedly take the lowest-position worker of the least-used group."""
        used = {}
        for i in chosen:
            used[keys[i][0]] = used.get(keys[i][0], 0) + 1
        pools = {}
        for i in sorted(candidates, key=lambda i: keys[i][1]):
            pools.setdefault(keys[i][0], []).append(i)
        heap = [(used.get(tag, 0), keys[members[0]][1], tag, 0) for tag, members in pools.items()]
        heapq.heapify(heap)
        out = []
        while heap and len(out) < need:
            n, dummy, tag, k = heapq.heappop(heap)
            members = pools[tag]
            out.append(members[k])
            if k + 1 < len(members):
                heapq.heappush(heap, (n + 1, keys[members[k + 1]][1], tag, k + 1))
        return out

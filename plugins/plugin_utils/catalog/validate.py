# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build validation, with maand's outcomes: capacity, ports, allocation counts and demands.

Unlike maand, every check runs and every problem is reported, not only the first.
"""

from __future__ import annotations

import graphlib

from ..bucket.model import WORKERS_FILE
from ..bucket.units import parse_version


def check_capacity(bucket, allocations, report):
    """Per worker, the sum of *active* reservations must fit the declared capacity; a worker that
    hosts a reserving job must declare that capacity."""
    need_mem = {}
    need_cpu = {}
    for alloc in allocations:
        if alloc.state != "active" or alloc.worker_index is None:
            continue
        if alloc.memory_mb:
            need_mem[alloc.worker_index] = need_mem.get(alloc.worker_index, 0.0) + alloc.memory_mb
        if alloc.cpu_mhz:
            need_cpu[alloc.worker_index] = need_cpu.get(alloc.worker_index, 0.0) + alloc.cpu_mhz
    for needs, attr, key, unit, fix_unit in ((need_mem, "memory_mb", "memory", "MB", "8 gb"),
                                             (need_cpu, "cpu_mhz", "cpu", "MHZ", "4000 mhz")):
        for index in sorted(needs):
            worker = bucket.workers[index]
            available = getattr(worker, attr)
            field = "[%d].%s" % (worker.position, key)
            if available is None:
                report.error("ErrInsufficientResource", WORKERS_FILE, field,
                             "worker_ip %s must specify %s in workers.json: its active allocations require %.2f %s"
                             % (worker.host, key, needs[index], unit),
                             "add \"%s\": \"%s\" (or run ansible-playbook maand.core.facts)" % (key, fix_unit))
            elif available < needs[index]:
                report.error("ErrInsufficientResource", WORKERS_FILE, field,
                             "worker_ip %s, available %s is %.2f %s, required %s is %.2f %s"
                             % (worker.host, key, available, unit, key, needs[index], unit),
                             "raise the worker's %s, lower a reservation in workspace/%s, or move a job (selectors, "
                             "disabled.json)" % (key, bucket.job_config_file))


class _PortAllocator:
    """maand's port allocator: pool ports stay stable across rebuilds while they stay in the pool."""

    def __init__(self, existing, low, high):
        self.low, self.high = low, high
        self.existing = {job: dict(ports) for job, ports in existing.items()}
        self.used = {}
        for job, ports in self.existing.items():
            for name, port in ports.items():
                self.used.setdefault(port, (job, name))
        self.next_free = low

    def release_missing(self, job, keep):
        for name, port in list(self.existing.get(job, {}).items()):
            if name not in keep:
                if self.used.get(port) == (job, name):
                    del self.used[port]
                del self.existing[job][name]

    def claim(self, job, name, port):
        owner = self.used.get(port)
        if owner is not None and owner != (job, name):
            return owner
        self.used[port] = (job, name)
        self.existing.setdefault(job, {})[name] = port
        return None

    def release(self, job, name):
        prev = self.existing.get(job, {}).pop(name, None)
        if prev is not None and self.used.get(prev) == (job, name):
            del self.used[prev]

    def fixed(self, job, name, port):
        """maand's assignFixed: a changed number releases the old one. Returns the (job, name) that
        already holds port (ErrPortCollision), else None."""
        if self.existing.get(job, {}).get(name) not in (None, port):
            self.release(job, name)
        return self.claim(job, name, port)

    def provisioned(self, job, name):
        prev = self.existing.get(job, {}).get(name)
        if prev is not None and self.low <= prev <= self.high and self.used.get(prev) in (None, (job, name)):
            self.used[prev] = (job, name)
            return prev
        if prev is not None:
            self.release(job, name)
        port = self.next_free
        while port <= self.high and port in self.used:
            port += 1
        if port > self.high:
            return None
        self.next_free = port + 1
        self.claim(job, name, port)
        return port


def assign_ports(bucket, previous, report):
    """Returns {job: {port_name: number}}."""
    existing = {}
    for job in (previous or {}).get("jobs", ()):
        if job.get("name") in bucket.jobs and isinstance(job.get("ports"), dict):
            existing[job["name"]] = {k: v for k, v in job["ports"].items() if isinstance(v, int)}
    needs_pool = any(p is None for job in bucket.jobs.values() for p in job.ports.values())
    if needs_pool and bucket.port_range_problem:
        key, message = bucket.port_range_problem
        report.error("ErrInvalidPortRange", "workspace/bucket.conf", key, message,
                     "set port_min <= port_max, both between 1 and 65535 (default 30000-39999)")
        return {name: {} for name in bucket.jobs}
    allocator = _PortAllocator(existing, bucket.port_min, bucket.port_max)
    # Fixed ports first, so a pool port never takes a number a manifest pins.
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        allocator.release_missing(name, set(job.ports))
        for port_name, fixed in sorted(job.ports.items()):
            if fixed is None:
                continue
            owner = allocator.fixed(name, port_name, fixed)
            if owner is not None:
                report.error("ErrPortCollision", job.file, "resources.ports.%s" % port_name,
                             "port %d (job %s port %r) is already used by job %s port %r" % (
                                 fixed, name, port_name, owner[0], owner[1]),
                             "pick another number, or use {} to take a free port from the pool")
    result = {}
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        ports = {}
        for port_name, fixed in sorted(job.ports.items()):
            if fixed is not None:
                ports[port_name] = fixed
                continue
            port = allocator.provisioned(name, port_name)
            if port is None:
                report.error("ErrPortRangeExhausted", job.file, "resources.ports.%s" % port_name,
                             "no free ports in range %d-%d" % (bucket.port_min, bucket.port_max),
                             "widen port_min/port_max in workspace/bucket.conf")
                continue
            ports[port_name] = port
        result[name] = ports
    return result


def check_counts(bucket, allocations, report):
    """min_allocations_count counts non-removed allocations (active and disabled)."""
    counts = {}
    for alloc in allocations:
        if alloc.state != "removed":
            counts[alloc.job] = counts.get(alloc.job, 0) + 1
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        if getattr(job, "rules", None) is not None and job.rules.broken:
            continue  # its rule errors explain it already
        wanted = job.min_allocations_count or 0
        if counts.get(name, 0) < wanted:
            report.error("ErrInsufficientAllocations", job.file, "min_allocations_count",
                         "job %s has %d allocation(s), min_allocations_count is %d" % (name, counts.get(name, 0), wanted),
                         "label more workers with %s, or lower min_allocations_count" % ", ".join(job.selectors))


def deployment_sequence(bucket, report):
    """Validate command demands and return {job: deployment_seq} (longest demand chain)."""
    jobs = bucket.jobs
    upstream = {name: set() for name in jobs}
    demanded = set()
    for name in sorted(jobs):
        job = jobs[name]
        for command in job.commands.values():
            field = "commands.%s.demands" % command.name
            if not command.demand_job and not command.demand_command:
                continue
            if not command.demand_job or not command.demand_command:
                report.error("ErrInvalidJobCommandDemand", job.file, field,
                             "job %s: demands.job and demands.command must be set together" % name,
                             "set both, or leave both empty")
                continue
            if command.demand_job == name:
                report.error("ErrInvalidJobCommandConfiguration", job.file, field + ".job",
                             "job %s, job_command %s invalid configuration, self referencing" % (name, command.name),
                             "demand another job's command")
                continue
            target = jobs.get(command.demand_job)
            if target is None:
                report.error("ErrInvalidJobCommandDemand", job.file, field + ".job",
                             "job %s demands unknown job %s" % (name, command.demand_job),
                             "fix the job name or add workspace/jobs/%s" % command.demand_job)
                continue
            if command.demand_command not in target.commands:
                report.error("ErrInvalidJobCommandDemand", job.file, field + ".command",
                             "job %s demands unknown command %s of job %s" % (name, command.demand_command,
                                                                              command.demand_job),
                             "use one of: %s" % (", ".join(sorted(target.commands)) or "(job has no commands)"))
                continue
            upstream[name].add(command.demand_job)
            demanded.add(command.demand_job)
            _check_demand_versions(job, command, target, field, report)
    for name in sorted(jobs):
        job = jobs[name]
        if (upstream[name] or name in demanded) and not job.version_given:
            report.error("ErrInvalidJobVersion", job.file, "version",
                         "job %s takes part in a command demand and must declare a version" % name,
                         "add \"version\": \"1.0.0\" to the manifest")
    return _longest_chains(jobs, upstream, report)


def _check_demand_versions(job, command, target, field, report):
    try:
        upstream_version = parse_version(target.version)
    except ValueError:
        return  # already reported on the upstream manifest
    for key in ("min_version", "max_version"):
        raw = getattr(command, key)
        if raw is None:
            continue
        try:
            bound = parse_version(raw)
        except ValueError as exc:
            report.error("ErrInvalidJobVersion", job.file, "%s.config.%s" % (field, key), str(exc), "write e.g. \"2.0.0\"")
            continue
        if (key == "min_version" and upstream_version < bound) or (key == "max_version" and bound < upstream_version):
            report.error("ErrJobCommandDemandVersionMismatch", job.file, "%s.config.%s" % (field, key),
                         "job %s demands %s %s %s, but %s is at %s" % (
                             job.name, command.demand_job, ">=" if key == "min_version" else "<=", bound,
                             command.demand_job, upstream_version),
                         "bump %s's version or relax the demand" % command.demand_job)


def _longest_chains(jobs, upstream, report):
    graph = {name: set(deps) for name, deps in upstream.items()}
    while True:
        try:
            order = list(graphlib.TopologicalSorter(graph).static_order())
            break
        except graphlib.CycleError as exc:
            cycle = exc.args[1]
            report.error("ErrCircularJobCommandDependency", jobs[cycle[0]].file, "commands",
                         "demand cycle: %s" % " -> ".join(cycle),
                         "remove one of these demands so the jobs can be ordered")
            for node in set(cycle):  # drop the cycle and keep looking for others
                graph[node] = set()
    seq = {}
    for name in order:
        seq[name] = max((seq[dep] + 1 for dep in graph[name]), default=0)
    return seq

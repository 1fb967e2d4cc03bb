# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drain before a stop: a job's ``before_allocation_stopped`` commands and its ``shutdown_delay``, on the
controller, before the agents of a step restart, reload or stop its allocations (pure, no Ansible imports).

maand.core's own event (maand has only after_allocation_started/stopped): before each restart or reload batch of a
job (the batch variables its gate carries: BATCH_ALLOCATIONS, BATCH_INDEX, BATCH_COUNT, DEPLOY_PHASE=update,
ROLLOUT_ORDER, ROLLOUT_ORDER_SOURCE) and before each stop of a disabled or removed allocation in step 0
(DEPLOY_PHASE=stop, the one allocation, as after_allocation_stopped gets). A command takes the batch out of a
load balancer, a service registry or a queue; a command that fails leaves its batch untouched (the job is blocked
before the step's requests are written: deploy/run.advance) and fails the job. Then the step waits the longest
``shutdown_delay`` (manifest, seconds, Nomad's) of the jobs that go on: one wait for the whole step, however
many jobs' batches share it. An auto_revert's restart (a batch that already failed) and a job_control job (its
command restarts it, in the gate) are not drained.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Iterator, Mapping

from .. import hooks

EVENT = "before_allocation_stopped"
STOPPING = ("restart", "reload")  # the make targets of a run op that stop the running process (or reload it)


@dataclasses.dataclass(frozen=True)
class Drain:
    """One batch to drain: the job, its allocations the step stops, restarts or reloads, the batch variables of
    its command (env), the batch's label, the job's shutdown_delay, whether it has the command at all."""

    job: str
    hosts: tuple
    env: Mapping[str, str]
    label: str
    delay: float = 0.0
    hooked: bool = False
    alloc_ids: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _has_event(job: Mapping[str, Any]) -> bool:
    return not job.get("removed") and any(EVENT in (c.get("executed_on") or ())
                                          for c in (job.get("commands") or {}).values())


def delay_of(job: Mapping[str, Any]) -> float:
    """The job's shutdown_delay in seconds (build checked it; 0 when unset)."""
    value = job.get("shutdown_delay") or 0
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def stopping(op: Mapping[str, Any], blocked: Iterable[str]) -> bool:
    """An op that stops (or reloads) a running allocation and will run: a stop of step 0, a restart or reload of
    a rolling batch; not an auto_revert's, not one of a blocked job."""
    if not op.get("job") or op.get("job") in blocked or op.get("revert_of") is not None:
        return False
    return op.get("kind") == "stop" or (op.get("kind") == "run" and op.get("target") in STOPPING)


def due(catalog: Mapping[str, Any], plan: Mapping[str, Any], blocked: Iterable[str],
        step: Mapping[str, Any] | None) -> list[Drain]:
    """The batches of step to drain, in job order (step 0: one per stopped allocation), of the jobs with a
    before_allocation_stopped command or a shutdown_delay."""
    if step is None:
        return []
    blocked = set(blocked)
    jobs = {j.get("name"): j for j in catalog.get("jobs") or []}
    by_job: dict[str, list] = {}
    for _host, ops in sorted((step.get("ops") or {}).items()):
        for op in ops:
            if stopping(op, blocked):
                by_job.setdefault(op["job"], []).append(op)
    labels = {(r.get("job"), r.get("worker")): r.get("batch") for r in plan.get("rows") or []}
    out = []
    for name, dummy, hooked, delay in _applying(jobs, by_job):
        ops = by_job[name]
        ids = {o["host"]: str((o.get("env") or {}).get("ALLOCATION_ID") or "") for o in ops}
        if step.get("wave") is None:  # step 0: each stop on its own, as after_allocation_stopped
            out += [Drain(name, (o["host"],), hooks.stop_env(name, o["host"]), "%s stop" % name,
                          delay, hooked, ids) for o in ops]
            continue
        hosts = [o["host"] for o in ops]
        label = labels.get((name, hosts[0])) or "%s batch" % name
        out.append(Drain(name, tuple(hosts), _batch_env(name, hosts, _hooks_of(step, name)), label, delay, hooked, ids))
    return out


def _applying(jobs: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> Iterator[tuple]:
    """(name, job, hooked, delay) of the jobs of names a drain applies to (a before_allocation_stopped command or
    a shutdown_delay), in name order."""
    for name in sorted(names):
        job = jobs.get(name) or {}
        hooked, delay = _has_event(job), delay_of(job)
        if hooked or delay:
            yield name, job, hooked, delay


def _hooks_of(step: Mapping[str, Any], job: str) -> Mapping[str, Any]:
    for gate in step.get("gates") or []:
        if gate.get("job") == job and gate.get("revert_of") is None and gate.get("hooks"):
            return gate["hooks"]
    return {}


def _batch_env(job: str, hosts: list, info: Mapping[str, Any]) -> dict:
    phase = info.get("phase") if info.get("phase") in ("new", "update") else "update"
    return hooks.batch_env(job, hosts, int(info.get("batch_index") or 0), int(info.get("batch_count") or 1),
                           phase, info.get("order") or hosts, info.get("order_source") or "default")


def run(drains: list[Drain], hook: Callable[[Drain], list[str]], say: Callable[[str], None],
        sleep: Callable[[float], None]) -> list[tuple[str, str]]:
    """Run each batch's before_allocation_stopped (hook(drain) -> failures), then one wait of the longest
    shutdown_delay of the batches that go on. [(job, message)] of the batches that must not run; a job's later
    batch of the same step (step 0: its other stops) is not drained once one failed."""
    failed: dict[str, str] = {}
    going = []
    for d in drains:
        if d.job in failed:
            continue
        problems = hook(d) if d.hooked else []
        if problems:
            failed[d.job] = ("job %s: %s failed before %s; the batch was not touched (nothing stopped or restarted "
                             "on %s): %s" % (d.job, EVENT, d.label, ", ".join(d.hosts), "\n".join(problems)))
            continue
        if d.hooked:
            say("drained: %s on %s (%s passed)" % (d.label, ", ".join(d.hosts), EVENT))
        going.append(d)
    going = [d for d in going if d.job not in failed]
    wait = max((d.delay for d in going), default=0.0)
    if wait > 0:
        batches = "; ".join("%s on %s" % (d.label, ", ".join(d.hosts)) for d in going if d.delay)
        say("shutdown_delay: waiting %s s before the stop or restart of %s" % (_seconds(wait), batches))
        sleep(wait)
    return sorted(failed.items())


def _seconds(value: float) -> str:
    return "%g" % value


def plan_notes(jobs: Mapping[str, Mapping[str, Any]], steps: Iterable[Any]) -> list[str]:
    """The plan's notes (what --check prints) for the jobs a drain applies to in this plan: their command and
    shutdown_delay before which batches."""
    seen: dict[str, list] = {}
    for step in steps:  # records.Step of the schedule (its ops records.Op), read without their JSON
        for ops in step.ops.values():
            for op in ops:
                fields = {"job": op.job, "kind": op.kind, "target": op.target, "revert_of": op.revert_of}
                if stopping(fields, ()):
                    seen.setdefault(op.job, []).append(op.host)
    notes = []
    for name, job, hooked, delay in _applying(jobs, seen):
        names = sorted(c for c, spec in (job.get("commands") or {}).items() if EVENT in (spec.get("executed_on") or ()))
        what = [("%s (%s)" % (EVENT, ", ".join(names))) if hooked else "",
                ("shutdown_delay %s s" % _seconds(delay)) if delay else ""]
        what = " then ".join(x for x in what if x)
        notes.append("job %s: before each of its restart, reload or stop batches (%d allocation(s) in this plan): %s"
                     % (name, len(set(seen[name])), what))
    return notes

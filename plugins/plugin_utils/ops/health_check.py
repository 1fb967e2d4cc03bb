# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand.core.health_check (maand's `maand health_check`, docs/reference/cli/health-check.md): pure logic,
no Ansible imports.

1. Worker health: a TCP dial to each chosen worker's SSH port.
2. Job health, for every active allocation of every chosen job on the chosen workers: the job's
   manifest probes (tcp / http(s) from the controller, ssh on the worker; deploy/gate.probe), then, on
   the allocations whose probes passed, its ``health_check`` job commands (maand: "commands run after
   probes pass"). A job with neither is skipped, as maand ("no health_check config or commands").

With ``wait``, what is not healthy yet is tried again, round after round, until healthy or out of
budget: each job's own ``wait.attempts`` x ``wait.interval_seconds`` (default 30 x 1 s, maand's
``--wait``), or ``wait_seconds`` in all when given. The rounds wait in the deploy's own wait loop
(deploy/waiter.Waiter, as its health gates; only the budgets differ). The probes, the clock, the sleep
and the job commands are passed in, so tests run them for real on loopback sockets and local processes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import socket
import time
from typing import Any, Callable, Iterable, Mapping

from ..deploy.gate import describe
from ..deploy.waiter import Budget, Pending, Waiter
from ..bucket.job_checks import DEFAULT_HEALTH, resolve_health
from ..bucket.problems import did_you_mean
from ..build import catalog as _catalog

WORKER = "(worker)"
PORT_TIMEOUT = 5.0
PORT_ATTEMPTS = DEFAULT_HEALTH["attempts"]
PORT_INTERVAL = DEFAULT_HEALTH["interval_seconds"]
PARALLEL = 8  # probes at a time (maand: 4 jobs at a time)


class HealthCheckError(Exception):
    """Bad input (an unknown job, no catalog): nothing was checked."""


@dataclasses.dataclass
class Line:
    """One check of one worker: a line of output."""

    job: str  # WORKER for the worker's SSH port
    worker: str
    what: str  # `http :30000/health`, `ssh port :22`, `command command_health`
    ok: bool = False
    ms: int | None = None
    reason: str = "not checked"

    def text(self) -> str:
        outcome = ("%d ms" % self.ms) if self.ok and self.ms is not None else self.reason if not self.ok else ""
        status = "ok" if self.ok else "FAILED"
        return ("%-6s %-16s %-15s %-30s %s" % (status, self.job, self.worker, self.what, outcome)).rstrip()


@dataclasses.dataclass
class JobPlan:
    """What to check for one job: its resolved probes and health_check commands on its workers."""

    job: str
    workers: list[str]
    checks: list[dict]
    commands: list[str]
    attempts: int = PORT_ATTEMPTS
    interval: float = PORT_INTERVAL
    timeout: float = DEFAULT_HEALTH["timeout_seconds"]
    error: str = ""  # the job's health_check cannot run (named on every worker's line)


@dataclasses.dataclass
class Outcome:
    lines: list[Line]
    skipped: dict[str, str]  # job -> why it was not checked (no probes or commands, no allocation here)
    rounds: int

    @property
    def failed(self) -> list[Line]:
        return [line for line in self.lines if not line.ok]

    def summary(self) -> str:
        bad_workers = sorted({line.worker for line in self.failed if line.job == WORKER})
        bad_jobs = sorted({line.job for line in self.failed if line.job != WORKER})
        jobs = sorted({line.job for line in self.lines if line.job != WORKER})
        head = "health_check: %d ok, %d failed" % (len(self.lines) - len(self.failed), len(self.failed))
        head += "; %d job(s) checked" % len(jobs)
        if self.skipped:
            head += ", %d skipped (%s)" % (len(self.skipped), ", ".join(sorted(self.skipped)))
        if bad_jobs:
            head += "; unhealthy jobs: %s" % ", ".join(bad_jobs)
        if bad_workers:
            head += "; unreachable workers (SSH port): %s" % ", ".join(bad_workers)
        return head


# --- what to check ----------------------------------------------------------------------------------

def split_names(value: Any) -> list[str]:
    """maand_jobs as a list or a comma-separated string -> names (blanks dropped, order kept)."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(item).strip() for item in items if str(item).strip()]


def load(bucket_dir: str, names: Iterable[str]) -> tuple[dict, list[str]]:
    """The bucket's built catalog and the jobs to check in it. HealthCheckError names a missing or
    stale catalog (with its fix) or an unknown job."""
    try:
        catalog = _catalog.read_built(bucket_dir)
    except _catalog.CatalogError as exc:
        raise HealthCheckError(str(exc)) from None
    return catalog, select_jobs(catalog, names)


def select_jobs(catalog: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The jobs to check: every job of the catalog (removed ones excluded), or the named ones;
    an unknown name is an error naming the known jobs (maand: `jobs not in this bucket`)."""
    known = sorted(j["name"] for j in catalog.get("jobs") or [] if not j.get("removed"))
    wanted = list(dict.fromkeys(split_names(names)))
    if not wanted:
        return known
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise HealthCheckError("jobs not in this bucket: %s; its jobs: %s" % (
            ", ".join("%s%s" % (name, did_you_mean(name, known)) for name in unknown), ", ".join(known) or "none"))
    return wanted


def _commands(job: Mapping[str, Any]) -> list[str]:
    return sorted(name for name, spec in (job.get("commands") or {}).items()
                  if "health_check" in ((spec or {}).get("executed_on") or ()))


NO_CONFIG = "no health_check config or commands"
NO_ALLOCATION = "no active allocation on the chosen workers"


def plan_jobs(catalog: Mapping[str, Any], jobs: Iterable[str], hosts: Iterable[str]) -> tuple[list[JobPlan], dict[str, str]]:
    """(a JobPlan per job with something to check on its active allocations among hosts, {skipped job: why})."""
    records = {j["name"]: j for j in catalog.get("jobs") or []}
    chosen = set(hosts)
    plans, skipped = [], {}
    for name in jobs:
        job = records[name]
        workers = [a["worker"] for a in catalog.get("allocations") or []
                   if a.get("job") == name and a.get("state", "active") == "active" and a.get("worker") in chosen]
        if "health_gate" in job:
            spec, errors = job["health_gate"], []
        else:
            spec, errors = resolve_health(job)
        commands = _commands(job)
        if not errors and not (spec or {}).get("checks") and not commands:
            skipped[name] = NO_CONFIG
            continue
        if not workers:
            skipped[name] = NO_ALLOCATION
            continue
        spec = spec or {}
        plans.append(JobPlan(name, workers, list(spec.get("checks") or []), commands,
                             int(spec.get("attempts") or PORT_ATTEMPTS), float(spec.get("interval_seconds", PORT_INTERVAL)),
                             float(spec.get("timeout_seconds") or DEFAULT_HEALTH["timeout_seconds"]),
                             "health_check cannot run: %s" % "; ".join(errors) if errors else ""))
    return plans, skipped


# --- checking -----------------------------------------------------------------------------------------

def tcp_port(address: str, port: int, timeout: float = PORT_TIMEOUT) -> str | None:
    """The worker health check: a TCP dial (None = it answered)."""
    try:
        with socket.create_connection((address, int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return "ssh port %s:%s: %s" % (address, port, exc)


def _timed(fn: Callable[[], str | None], clock: Callable[[], float]) -> tuple[str | None, int]:
    start = clock()
    err = fn()
    return err, int(round((clock() - start) * 1000))


class _Item:
    """One line, how to (re)check it, and its wait budget (deploy/waiter.Budget)."""

    def __init__(self, line: Line, check: Callable[[], str | None] | None, budget: Budget):
        self.line, self.check, self.budget = line, check, budget


def run(plans: list[JobPlan], workers: Mapping[str, tuple[str, int]], probe: Callable[[str, str, dict, float], str | None],
        commands: Callable[[str, list[str]], dict[str, str | None]] | None = None, *, wait: bool = False,
        wait_seconds: float = 0, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
        port_check: Callable[[str, int], str | None] = tcp_port, skipped: Mapping[str, str] | None = None,
        log: Callable[[str], None] = lambda msg: None) -> Outcome:
    """Check the workers' SSH ports and the jobs. workers: {host: (address, ssh port)}; probe(host,
    address, check, timeout) -> None | reason; commands(job, hosts) -> {host: None | reason}.
    The rounds wait in deploy/waiter.Waiter, on each job's own budget (the ports: the default one)."""
    def budget(attempts: int, interval: float, timeout: float) -> Budget:
        b = Budget(attempts, interval, timeout)
        if not wait:
            return b.once()
        return b.within(wait_seconds) if wait_seconds > 0 else b

    port_budget = budget(PORT_ATTEMPTS, PORT_INTERVAL, PORT_TIMEOUT)
    port_items = [_Item(Line(WORKER, host, "ssh port :%d" % port),
                        (lambda a=address, p=port: port_check(a, p)), port_budget)
                  for host, (address, port) in sorted(workers.items())]
    job_items: list[tuple[JobPlan, list[_Item], dict[str, _Item]]] = []
    for plan in plans:
        probes, cmds = [], {}
        job_budget = budget(plan.attempts, plan.interval, plan.timeout)
        for host in plan.workers:
            address = workers.get(host, (host, 22))[0]
            if plan.error:
                probes.append(_Item(Line(plan.job, host, "health_check", reason=plan.error), None, job_budget.once()))
                continue
            for check in plan.checks:
                probes.append(_Item(Line(plan.job, host, describe(check)),
                                    (lambda h=host, a=address, c=check, t=plan.timeout: probe(h, a, c, t)), job_budget))
            if plan.commands:
                cmds[host] = _Item(Line(plan.job, host, "command %s" % ",".join(plan.commands)), None, job_budget)
        job_items.append((plan, probes, cmds))

    def attempt(dummy_round: int) -> list[Pending]:
        return [Pending(item, item.budget, item.line.reason) for item in _round(port_items, job_items, commands, clock)]

    def on_round(dummy_round: int, elapsed: float, pending: list[Pending], retrying: bool) -> None:
        if retrying:
            log("%d check(s) not healthy yet (%s); trying again" % (
                len(pending), ", ".join(sorted({"%s@%s" % (p.key.line.job, p.key.line.worker) for p in pending}))))

    waited = Waiter(sleep, clock).wait(attempt, on_round)
    lines = [i.line for i in port_items] + [i.line for _p, probes, cmds in job_items for i in probes + list(cmds.values())]
    return Outcome(lines, dict(skipped or {}), waited.rounds)


def _retry(item: _Item, fn: Callable[[], str | None], clock: Callable[[], float]) -> bool:
    err, ms = _timed(fn, clock)
    item.line.ok, item.line.ms, item.line.reason = err is None, ms, err or ""
    return item.line.ok


def _round(port_items: list[_Item], job_items, commands, clock) -> list[_Item]:
    """One pass over what is not healthy yet; returns what is still not healthy (and may be retried).
    The port dials and probes run side by side (PARALLEL at a time), then the job commands, job by job."""
    due = [i for i in port_items if not i.line.ok] + [
        i for _p, probes, _c in job_items for i in probes if i.check is not None and not i.line.ok]
    healthy_now = []
    if due:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(PARALLEL, len(due))) as pool:
            healthy_now = list(pool.map(lambda i: _retry(i, i.check, clock), due))
    pending = [i for i, ok in zip(due, healthy_now) if not ok]
    for plan, probes, cmds in job_items:
        healthy = {host for host in plan.workers
                   if all(i.line.ok for i in probes if i.line.worker == host)}
        todo = [host for host, item in cmds.items() if not item.line.ok and host in healthy]
        for host, item in cmds.items():
            if host not in healthy and not item.line.ok:
                item.line.reason = "not run: the probes have not passed"
                pending.append(item)
        if todo and commands is not None:
            start = clock()
            answers = commands(plan.job, todo)
            ms = int(round((clock() - start) * 1000))
            for host in todo:
                item = cmds[host]
                err = answers.get(host, "no answer from the health_check command")
                item.line.ok, item.line.ms, item.line.reason = err is None, ms, err or ""
                if err is not None:
                    pending.append(item)
    return pending

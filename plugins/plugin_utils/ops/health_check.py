# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand.core.health_check (maand's `maand health_check`, docs/reference/cli/health-check.md): pure logic,
no Ansible imports.

1. Worker health: a TCP dial to each chosen worker's SSH port.
2. Job health, for every active allocation of every chosen job on the chosen workers: the job's
   manifest probes (tcp / http(s) from the controller, ssh on the worker; health/probes.probe), then, on
   the allocations whose probes passed, its ``health_check`` job commands (maand: "commands run after
   probes pass"). A job with neither is skipped, as maand ("no health_check config or commands").

With ``wait``, what is not healthy yet is tried again, round after round, until healthy or out of
budget: each job's own ``wait.attempts`` x ``wait.interval_seconds`` (default 30 x 1 s, maand's
``--wait``), or ``wait_seconds`` in all when given. The rounds wait in the deploy's own wait loop
(health/waiter.Waiter, as its health gates; only the budgets differ). While it waits, a job's `make status`
is asked on the workers whose checks still fail, as the deploy's gates ask it (health/watch.StatusWatch,
status_checker; the request as maand.core.status sends it): a job it says is not running on two checks in a
row stops being waited for on that worker (fail fast), the other jobs and workers waiting on; the failure
names the job, the worker and the status tail (health/tails.failure_notes, collect_tails). maand waits
its whole budget there. The probes, the clock, the sleep, the status checks and the job commands are passed
in, so tests run them for real on loopback sockets and local processes; ``prober``, ``fail_fast`` and
``command_runner`` build the real ones for the maand.core.health_check action.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import socket
import time
from typing import Any, Callable, Iterable, Mapping

from .status import spec_op, status_ops
from .. import health
from ..deploy import remote, rsync
from ..health import (STATUS_TIMEOUT, Budget, Pending, StatusWatch, Waiter, collect_tails, describe, failure_notes,
                      in_background, not_running, status_checker)
from ..bucket import RunLog
from ..bucket.job_checks import DEFAULT_HEALTH, resolve_health
from ..bucket.problems import did_you_mean
from ..catalog import catalog
from ..errors import MaandError
from ..hooks import points
from ..hooks.run import run_event
from ..hooks.commands import targets

WORKER = "(worker)"
PORT_TIMEOUT = 5.0
PORT_ATTEMPTS = DEFAULT_HEALTH["attempts"]
PORT_INTERVAL = DEFAULT_HEALTH["interval_seconds"]
PARALLEL = 8  # probes at a time (maand: 4 jobs at a time)


class HealthCheckError(MaandError):
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
    stopped: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)  # (job, worker) -> why not running
    notes: list[str] = dataclasses.field(default_factory=list)  # the failure's words on the jobs not running

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
        if self.stopped:
            on: dict[str, list[str]] = {}
            for job, worker in sorted(self.stopped):
                on.setdefault(job, []).append(worker)
            head += "; not running (`make status`, stopped waiting): %s" % "; ".join(
                "%s on %s" % (job, ", ".join(workers)) for job, workers in sorted(on.items()))
        return head


# --- what to check ----------------------------------------------------------------------------------

def split_names(value: Any) -> list[str]:
    """maand_jobs as a list or a comma-separated string -> names (blanks dropped, order kept)."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(item).strip() for item in items if str(item).strip()]


def load(bucket_dir: str, names: Iterable[str]) -> tuple[dict, list[str]]:
    """The bucket's built catalog and the jobs to check in it (the last built one of a stale workspace: a
    read-only verb, catalog/freshness.py). HealthCheckError names a missing catalog (with its fix) or an
    unknown job."""
    try:
        cat = catalog.read_built(bucket_dir, allow_stale=True)  # freshness.POLICY: WARN (read-only)
    except catalog.CatalogError as exc:
        raise HealthCheckError(str(exc)) from None
    return cat, select_jobs(cat, names)


def select_jobs(cat: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The jobs to check: every job of the catalog (removed ones excluded), or the named ones;
    an unknown name is an error naming the known jobs (maand: `jobs not in this bucket`)."""
    known = sorted(j["name"] for j in cat.get("jobs") or [] if not j.get("removed"))
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


def plan_jobs(cat: Mapping[str, Any], jobs: Iterable[str], hosts: Iterable[str]) -> tuple[list[JobPlan], dict[str, str]]:
    """(a JobPlan per job with something to check on its active allocations among hosts, {skipped job: why})."""
    records = {j["name"]: j for j in cat.get("jobs") or []}
    chosen = set(hosts)
    plans, skipped = [], {}
    for name in jobs:
        job = records[name]
        workers = [a["worker"] for a in cat.get("allocations") or []
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
    """One line, how to (re)check it, and its wait budget (health/waiter.Budget); stopped: its job is not
    running on its worker (`make status`), so it is not checked again."""

    def __init__(self, line: Line, check: Callable[[], str | None] | None, budget: Budget):
        self.line, self.check, self.budget = line, check, budget
        self.stopped = False

    def pending(self) -> Pending:
        return Pending(self, self.budget, self.line.reason, self.stopped, (self.line.job, self.line.worker))


def run(plans: list[JobPlan], workers: Mapping[str, tuple[str, int]], probe: Callable[[str, str, dict, float], str | None],
        commands: Callable[[str, list[str]], dict[str, str | None]] | None = None, *, wait: bool = False,
        wait_seconds: float = 0, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
        port_check: Callable[[str, int], str | None] = tcp_port, skipped: Mapping[str, str] | None = None,
        log: Callable[[str], None] = lambda msg: None,
        status: Callable[[str, str], tuple[bool | None, str]] | None = None,
        diagnose: Callable[[str, list[str]], dict[str, list[str]]] | None = None,
        submit: Callable[[Callable[[], None]], None] = in_background) -> Outcome:
    """Check the workers' SSH ports and the jobs. workers: {host: (address, ssh port)}; probe(host,
    address, check, timeout) -> None | reason; commands(job, hosts) -> {host: None | reason}.
    The rounds wait in health/waiter.Waiter, on each job's own budget (the ports: the default one).
    With wait, status(job, host) -> (running, detail) (fail_fast) is asked as a gate asks it
    (health/watch.StatusWatch; submit runs a check, in the background by default); diagnose(job, hosts) ->
    {host: lines} gives the status tails of the workers where a job was found not running."""
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
    every = [i for _p, probes, cmds in job_items for i in probes + list(cmds.values())]
    start = clock()
    watch = FailFast(plans, status, clock, submit) if wait and status is not None else None

    def attempt(n: int) -> list[Pending]:
        pending = _round(port_items, job_items, commands, clock)
        if watch is not None:
            watch.note(n, clock() - start, pending, every)
        return [item.pending() for item in [i for i in pending if not i.stopped] + [i for i in every if i.stopped]]

    def on_round(dummy_round: int, elapsed: float, pending: list[Pending], retrying: bool) -> None:
        waiting = [p for p in pending if not p.fatal]
        if retrying and waiting:
            log("%d check(s) not healthy yet (%s); trying again" % (
                len(waiting), ", ".join(sorted({"%s@%s" % (p.key.line.job, p.key.line.worker) for p in waiting}))))

    waited = Waiter(sleep, clock).wait(attempt, on_round)
    lines = [i.line for i in port_items + every]
    if watch is None:
        return Outcome(lines, dict(skipped or {}), waited.rounds)
    return Outcome(lines, dict(skipped or {}), waited.rounds, dict(watch.stopped), watch.notes(wait_seconds, diagnose))


class FailFast:
    """The jobs' `make status` while the verb waits: one health/watch.StatusWatch per job, asked for the
    workers where the job's checks still fail; a worker where it says "not running" twice in a row stops
    that job's checks there (its items turn fatal in the wait's scope (job, worker): the rest waits on)."""

    def __init__(self, plans: list[JobPlan], status: Callable[[str, str], tuple[bool | None, str]],
                 clock: Callable[[], float], submit: Callable[[Callable[[], None]], None]):
        self.plans = {p.job: p for p in plans if not p.error}
        self.watches = {job: StatusWatch(status, job, clock, submit=submit) for job in self.plans}
        self.stopped: dict[tuple[str, str], str] = {}
        self.when: dict[str, tuple[int, float]] = {}  # job -> (round, elapsed) when a worker was first found dead

    def note(self, n: int, elapsed: float, pending: list[_Item], items: list[_Item]) -> None:
        """After round n: ask the status of the failing (job, worker)s; stop the items of those found dead."""
        failing: dict[str, set[str]] = {}
        for item in pending:
            key = (item.line.job, item.line.worker)
            if item.line.job in self.watches and key not in self.stopped:
                failing.setdefault(item.line.job, set()).add(item.line.worker)
        for job, hosts in sorted(failing.items()):
            for host, why in sorted(self.watches[job].dead(sorted(hosts)).items()):
                self.stopped[(job, host)] = why
                self.when.setdefault(job, (n, elapsed))
        for item in items:
            why = self.stopped.get((item.line.job, item.line.worker))
            if why and not item.line.ok and not item.stopped:
                item.stopped = True
                item.line.reason = "%s; %s" % (item.line.reason, why) if item.line.reason else why

    def notes(self, wait_seconds: float, diagnose: Callable[[str, list[str]], dict[str, list[str]]] | None) -> list[str]:
        """What the failure says of each job found not running, in the gate's words (health/watch.not_running,
        health/tails.failure_notes): each worker, the attempts it stopped at, each worker's status tail."""
        out = []
        for job, (n, elapsed) in sorted(self.when.items()):
            plan = self.plans[job]
            dead = {host: why for (j, host), why in self.stopped.items() if j == job}
            problems = not_running(dead)
            tails = diagnose(job, sorted(dead)) if diagnose is not None else {}
            budget = {"job": job, "attempts": None if wait_seconds > 0 else plan.attempts, "interval_seconds": plan.interval}
            notes = failure_notes(budget, elapsed, n, problems, tails, "")
            out += problems + ["job %s: %s" % (job, notes[0])] + notes[1:]
        return out


def status_request(cat: Mapping[str, Any], job: str, host: str) -> str | None:
    """The worker agent's request for the `make status` of job on host, as maand.core.status sends it
    (ops/status.status_ops with the job spec's environment); None when there is no status to ask (no
    allocation there, a job_control job, an environment that cannot be expanded)."""
    allocs = [a for a in cat.get("allocations") or [] if a.get("job") == job and a.get("worker") == host]
    records = {j.get("name"): j for j in cat.get("jobs") or []}
    ops = status_ops(cat, host, allocs[:1], [job], spec_op(records))
    if not ops or not ops[0].get("target"):
        return None
    return remote.step_request(cat.get("bucket_id"), ops[:1], timeout=STATUS_TIMEOUT, tail=10)


def fail_fast(bucket_dir: str, cat: Mapping[str, Any], conns: Mapping[str, Mapping[str, Any]],
              python_of: Callable[[str], str]) -> tuple[Callable, Callable]:
    """(status, diagnose) for run(): the job's `make status` through the worker agent (health/watch.status_checker)
    and, for a worker where it is not running, the status tail a failed gate shows (health/tails.collect_tails),
    over the workers' connection settings (conns: {host: settings}) multiplexed as the deploy's gates'."""
    muxed = rsync.with_mux(dict(conns), rsync.control_dir(os.path.join(bucket_dir, "health_check")))
    status = status_checker(lambda job, host: status_request(cat, job, host), lambda: muxed, python_of,
                            agent=remote)
    root = remote.worker_root(cat.get("bucket_id"))

    def diagnose(job: str, hosts: list[str]) -> dict[str, list[str]]:
        return collect_tails(muxed, root, job, hosts)
    return status, diagnose


def prober(bucket_dir: str, conns: Mapping[str, Mapping[str, Any]]) -> Callable[[str, str, dict, float], str | None]:
    """probe(host, address, check, timeout) for run(): the deploy's probes (health/probes.probe), https verified
    against the bucket CA, ssh checks over the workers' connection settings (conns: {host: settings})."""
    by_address = health.by_address(conns)
    trust = health.Trust.for_bucket(bucket_dir)

    def probe(host: str, address: str, check: dict, timeout: float) -> str | None:
        del host
        return health.probe(address, check, timeout, by_address, trust=trust)
    return probe


def command_runner(stack: contextlib.ExitStack, bucket_dir: str, cat: Mapping[str, Any],
                   conns: Mapping[str, Mapping[str, Any]], timeout: int, tail: int,
                   log: Callable[[str], None] = lambda msg: None) -> Callable[[str, list[str]], dict[str, str | None]]:
    """commands(job, hosts) -> {host: None | reason} for run(): the job's health_check commands (maand: after the
    probes), run on the controller with the runtime API (hooks/points.session), started once, when first needed,
    and closed with ``stack``; log: the hooks' log lines."""
    holder = {}

    def run_commands(job: str, hosts: list[str]) -> dict[str, str | None]:
        if "ctx" not in holder:
            holder["ctx"] = stack.enter_context(points.session(bucket_dir, cat, conns, timeout, tail, log=log))
            holder["ctx"].runlog = RunLog.open(bucket_dir, "healthcheck")  # maand's bucket logs
        picked = [t for t in targets(cat, job) if t.worker in hosts]
        outcome = run_event(holder["ctx"], job, "health_check", picked, concurrency=4)
        out = {}
        for host in hosts:
            failed = [r for r in outcome.results if r.worker == host and not r.ok]
            out[host] = ("; ".join(outcome.errors) if outcome.errors else
                         failed[0].message().replace("\n", " | ") if failed else None)
        return out
    return run_commands


def _retry(item: _Item, fn: Callable[[], str | None], clock: Callable[[], float]) -> bool:
    err, ms = _timed(fn, clock)
    item.line.ok, item.line.ms, item.line.reason = err is None, ms, err or ""
    return item.line.ok


def _round(port_items: list[_Item], job_items, commands, clock) -> list[_Item]:
    """One pass over what is not healthy yet; returns what is still not healthy (and may be retried).
    The port dials and probes run side by side (PARALLEL at a time), then the job commands, job by job."""
    due = [i for i in port_items if not i.line.ok] + [
        i for _p, probes, _c in job_items for i in probes if i.check is not None and not i.line.ok and not i.stopped]
    healthy_now = []
    if due:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(PARALLEL, len(due))) as pool:
            healthy_now = list(pool.map(lambda i: _retry(i, i.check, clock), due))
    pending = [i for i, ok in zip(due, healthy_now) if not ok]
    for plan, probes, cmds in job_items:
        healthy = {host for host in plan.workers
                   if all(i.line.ok for i in probes if i.line.worker == host)}
        todo = [host for host, item in cmds.items() if not item.line.ok and not item.stopped and host in healthy]
        for host, item in cmds.items():
            if host not in healthy and not item.line.ok and not item.stopped:
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

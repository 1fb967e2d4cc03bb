# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy's health gates (no Ansible imports): a gate probes every check on every host of its batch
until all pass or its budget is spent (run_gate, waiting in health/waiter.py with the probes of
health/probes.py and fail fast on `make status`, health/watch.StatusWatch); GateRunner runs one with
progress records (deploy/progress.GateWatch) and, when it fails, adds what it waited, each failing worker's
status tail and a hint. The `health_check` verb (ops/health_check.py) waits in the same loop on its own
budgets. deploy/callbacks.StepCallbacks wires a step's gates (addresses, connections, trust, status).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping

from .. import health
from .. import jobspec
from . import progress, remote, run


# --- the gate ------------------------------------------------------------------------------------------

def run_gate(gate, addresses, sleep=time.sleep, probe_fn=health.probe, watch=None, clock=time.monotonic, status=None,
             submit=health.in_background, wall=time.time):
    """Probe every check on every host until all pass or the gate's budget is spent (health/waiter.py).
    Returns the problems ([] = passed).

    watch (optional, deploy/progress.GateWatch): waiting(host, check, attempt, elapsed, error) after
    each attempt that left a probe failing (the first one), ended(passed, elapsed, attempts) at the end.
    status (optional): status(job, host) -> (running, detail), the job's `make status` (health/watch.py): a host
    whose job is not running on two checks in a row while its probes fail ends the gate at once (fail fast,
    StatusWatch), and a host whose probes all passed is asked once more, so the gate passes only where the job
    runs (StatusConfirm); submit(fn) runs a fail-fast check (in the background; tests pass a plain call).
    The gate's min_healthy_time keeps probing every host that long after all passed (a failure fails the
    gate); its deadline_at (wall-clock seconds, deploy/run_state.gates_to_run: the job's progress_deadline)
    stops the wait when it comes, naming what it waited for."""
    budget = health.Budget.of(gate)
    left = None if gate.get("deadline_at") is None else float(gate["deadline_at"]) - wall()
    if left is not None:
        if left <= 0:
            return [deadline_problem(gate, 0.0, left, ["its batch's make targets (they took the whole deadline)"])]
        budget = budget.capped(left)
    checks, hosts = gate["checks"], list(gate["hosts"])
    pending = {(h, i) for h in hosts for i in range(len(checks))}
    last, dead, down, flaps = {}, {}, {}, {}
    watch_status = health.StatusWatch(status, gate["job"], clock, submit=submit) if status is not None else None
    confirm = health.StatusConfirm(status, gate["job"]) if status is not None and checks else None

    def attempt(n):
        for key in sorted(pending):
            host, i = key
            err = probe_fn(addresses.get(host, host), checks[i], gate["timeout_seconds"])
            if err is None:
                pending.discard(key)
            else:
                last[key] = err
        if watch_status is not None and pending:
            dead.update(watch_status.dead(sorted({h for h, dummy in pending})))
        if confirm is not None:  # the hosts whose probes all passed: does the job run there?
            probing = {h for h, dummy in pending}
            down.clear()
            down.update(confirm.check([h for h in hosts if h not in probing]))
        items = [health.Pending(key, budget, last.get(key, "failed"), key[0] in dead) for key in sorted(pending)]
        return items + [health.Pending((h, -1), budget, down[h], confirm.failed(h)) for h in sorted(down)]

    def on_round(n, elapsed, still, retrying):
        if watch is not None and pending:
            host, i = min(pending)
            watch.waiting(host, checks[i], n, elapsed, last.get((host, i)))

    said = []

    def recheck(n):  # min_healthy_time: every probe of every host, again
        if watch is not None and not said:
            said.append(n)
            watch.writer.say("%s: healthy on %s; min_healthy_time: probing %g s more before the gate passes"
                             % (watch.batch, ", ".join(hosts), hold_for))
        flaps.clear()
        for host in hosts:
            for i, check in enumerate(checks):
                err = probe_fn(addresses.get(host, host), check, gate["timeout_seconds"])
                if err is not None:
                    flaps[(host, i)] = err
        return [health.Pending(key, budget, err, True) for key, err in sorted(flaps.items())]

    hold_for = float(gate.get("min_healthy_time") or 0)
    hold = dataclasses.replace(budget, seconds=hold_for) if hold_for > 0 and checks else None
    waited = health.Waiter(sleep, clock).wait(attempt, on_round, hold, recheck)
    if watch is not None:
        watch.ended(waited.passed, waited.elapsed, waited.rounds)
    if waited.passed:
        return []
    if waited.flapped:
        return ["%s: %s (%.1f s into min_healthy_time %g s: the gate had passed, then this probe failed)"
                % (host, err, waited.held, hold_for) for (host, i), err in sorted(flaps.items())]
    problems = ["%s: %s" % (host, last.get((host, i), "failed")) for host, i in sorted(pending)]
    problems += ["%s: %s" % (host, down[host]) for host in sorted(down)]
    if waited.deadline:
        waits = ["%s %s (%s)" % (h, progress.check_label(checks[i]), last.get((h, i), "failed")) for h, i in sorted(pending)]
        waits += ["%s `make status` (not running)" % h for h in sorted(down)]
        problems.insert(0, deadline_problem(gate, waited.elapsed, left, waits or [
            "min_healthy_time %g s on %s (healthy for %.1f s)" % (hold_for, ", ".join(hosts), waited.held)]))
    return problems + health.not_running(dead)


def deadline_problem(gate, elapsed, left, waits):
    """The line a gate stopped by the job's progress_deadline starts with: since when there was no progress and
    what the gate waited for (at most 3 of them)."""
    total = float(gate.get("progress_deadline") or 0)
    since = total - left + elapsed if left is not None else elapsed
    more = " and %d more" % (len(waits) - 3) if len(waits) > 3 else ""
    return ("progress_deadline %g s passed: job %s made no progress for %.1f s; it was waiting for %s%s"
            % (total, gate["job"], since, "; ".join(waits[:3]), more))


class GateRunner:
    """Runs the health gates of a run: runner(gate) -> problems ([] = passed). probe(gate, watch) -> problems
    runs the gate's probes (run_gate with the run's addresses, probes and status bound: deploy/callbacks.
    StepCallbacks); the runner writes its progress records (writer: deploy/progress.Writer) and, when a gate
    fails, adds to its problems the time it waited, each failing worker's status tail (diagnose(job, hosts) ->
    {host: lines}) and a hint when a first start left the job's port closed (job_ports: {job: {name: port}},
    the catalog's); on_pass(gate) is called when one passes."""

    def __init__(self, probe, writer, plan, job_ports=None, on_pass=None, diagnose=None, clock=time.monotonic):
        self.probe, self.writer, self.plan = probe, writer, plan
        self.job_ports, self.on_pass, self.diagnose, self.clock = job_ports or {}, on_pass, diagnose, clock

    def __call__(self, gate):
        start = self.clock()
        watch = progress.GateWatch(self.writer, gate, progress.batch_label(self.plan, gate))
        problems = self.probe(gate, watch)
        if not problems:
            if self.on_pass is not None:
                self.on_pass(gate)
            return problems
        return list(problems) + self.notes(gate, problems, self.clock() - start, watch)

    def notes(self, gate, problems, elapsed, watch):
        """What a failed gate adds to its problems (health/tails.failure_notes)."""
        hosts = list(gate.get("hosts") or [])
        failing = [h for h in hosts if any(p.startswith(h + ":") for p in problems)]
        tails = self.diagnose(gate["job"], failing or hosts) if self.diagnose else {}
        hint = listen_hint(gate["job"], [c.get("port") for c in gate.get("checks") or []],
                           self.job_ports.get(gate["job"]), problems, first_deploy(self.plan, gate["job"], hosts))
        attempts = watch.rounds if watch.rounds is not None else gate.get("attempts", 0)
        return health.failure_notes(gate, elapsed, attempts, problems, tails, hint)


# --- what a failed gate adds to its message ----------------------------------------------------------

REFUSED = ("Connection refused", "Errno 111")


def listen_hint(job, check_ports, ports, problems, first_deploy):
    """A hint when a probe of a job's first deploy found nothing listening on one of its named ports.

    check_ports: the ports the gate probed; ports: the job's {name: port} (catalog)."""
    if not first_deploy or not any(r in p for p in problems for r in REFUSED):
        return ""
    names = sorted(name for name, port in (ports or {}).items() if port in set(check_ports))
    if not names:
        return ""
    name = names[0]
    return ("hint: nothing listens on port %s (%s) of job %s yet; the job must listen on its port: read it in a "
            "template with {{ get \"maand/bucket\" \"%s\" }} or in the Makefile from $%s (see docs/templates.md), "
            "and make `start` leave the server running" % (ports[name], name, job, name, name.upper()))


def first_deploy(plan, job, hosts):
    """Whether every allocation of job on hosts is being started for the first time in this run."""
    hosts = set(hosts)
    rows = [r for r in plan.get("rows") or [] if r.get("job") == job and r.get("worker") in hosts]
    return bool(rows) and all(r.get("action") == "start" and not r.get("from_version") for r in rows)


def status_request(run_ctx, job, host):
    """The worker agent's request for the `make status` of job on host in the step whose gates run (its
    run op's environment and job spec run fields, as the deploy ran `make start`; that of an earlier step of
    this run when the host's batch ran there), or None when the allocation has no such op (a job_control job:
    its status is not its Makefile's). run_ctx: the step's deploy/run.RunContext (its state names the step in
    flight)."""
    ops = []
    # the step in flight first; a gate after a job's last start batch covers hosts started in earlier steps
    for key in [run_ctx.state.in_flight] + list(reversed(run_ctx.state.steps_completed)):
        if key is None or ops:
            continue
        try:
            request = run.read_request(run_ctx.run_dir, key, host)
        except (run.RunError, OSError, ValueError):
            return None
        ops = [o for o in (request or {}).get("ops") or []
               if o.get("kind") == "run" and o.get("job") == job and o.get("target")]
    if not ops:
        return None
    try:
        op = jobspec.runtime_op(ops[0], os.environ.get)
    except (jobspec.EnvError, AttributeError, KeyError, TypeError, ValueError):
        return None  # the deploy's own agent call failed this op the same way: nothing to ask
    status = {"id": job, "kind": "status", "job": job, "host": host, "target": "status", "env": op.get("env") or {}}
    for key in ("cwd", "user", "group", "network", "mounts", "enable_writable_file_system"):
        if op.get(key) is not None:
            status[key] = op[key]
    return remote.step_request(run_ctx.plan.get("bucket_id"), [status], timeout=health.STATUS_TIMEOUT, tail=10)


# --- where the probes dial ------------------------------------------------------------------------------

class HostAddresses(Mapping):
    """{host: ansible_host or host} over Ansible's hostvars (or any mapping of host -> vars), read per host
    when asked: reading a host's vars costs Ansible a variable pass, so a gate asks only for its own hosts
    and a step without gates for none (a whole-fleet read in every step grew with the fleet)."""

    def __init__(self, hostvars):
        self._hostvars = hostvars
        self._seen = {}

    def __getitem__(self, host):
        if host not in self._seen:
            if host not in self._hostvars:
                raise KeyError(host)
            try:
                self._seen[host] = self._hostvars[host].get("ansible_host") or host
            except Exception:  # pragma: no cover - a host whose vars cannot be templated
                self._seen[host] = host
        return self._seen[host]

    def __iter__(self):
        return iter(self._hostvars)

    def __len__(self):
        return len(self._hostvars)


def host_addresses(hostvars):
    """{host: ansible_host or host} from Ansible's hostvars, read lazily (HostAddresses)."""
    return HostAddresses(hostvars)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fail fast while a health check waits (no Ansible imports): the job's `make status` on the workers whose
probes still fail (status_checker over health/probes.status_probe), in the background; a job that is not
running on two checks in a row stops being waited for there (StatusWatch). The deploy's gates
(deploy/gate.run_gate) and the `health_check` verb (ops/health_check.FailFast) watch through it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time

from .probes import Agent, status_probe

STATUS_SPACING = 1.0    # seconds at least between two status checks of one host in one gate
STATUS_STRIKES = 2      # consecutive "not running" answers that end a gate at once
STATUS_PARALLEL = 8     # hosts asked at a time
NOT_RUNNING = "is not running"


def status_checker(request_of, conns, python_of, probe=None, *, agent: Agent):
    """status(job, host) -> (running, detail) for StatusWatch: the job's `make status` on the worker through
    its agent (health/probes.status_probe), over the worker's connection settings. request_of(job, host) -> the
    agent's request, or None when there is no status to ask (asked once per job and host); conns() -> {host:
    connection settings}; python_of(host) -> the worker's python; agent: the worker agent's protocol
    (deploy/remote.py). The deploy's gates (deploy/callbacks.StepCallbacks: the run's own op,
    deploy/gate.status_request) and the health_check verb (ops/health_check.fail_fast: the catalog's, as
    maand.core.status) ask through it."""
    probe = probe or functools.partial(status_probe, agent=agent)
    requests = {}

    def status(job, host):
        if (job, host) not in requests:
            requests[(job, host)] = request_of(job, host)
        conn = conns().get(host)
        if requests[(job, host)] is None or not conn:
            return None, "no status to ask"
        return probe(conn, agent.step_command(python_of(host)), requests[(job, host)])
    return status


def not_running(dead):
    """The problem lines of the hosts StatusWatch found dead ({host: why}): `host: job api is not running: ...`."""
    return ["%s: %s" % (host, dead[host]) for host in sorted(dead)]


def in_background(fn):
    """Run fn in a daemon thread (a status check never holds up the gate's probes, nor the end of the task)."""
    threading.Thread(target=fn, daemon=True).start()


class StatusWatch:
    """Fail fast while a gate waits: status(job, host) -> (True | False | None, detail) is asked for the
    hosts whose probes still fail, at most once per spacing seconds each, in the background (submit; at
    most STATUS_PARALLEL at a time), so a slow `make status` never delays the probes; each answer counts
    in the round after it came. A host whose status says "not running" strikes times in a row is dead.
    None (no status target, a job_control job, no answer) stops asking that host: it keeps the gate's
    whole budget."""

    def __init__(self, status, job, clock=time.monotonic, strikes=STATUS_STRIKES, spacing=STATUS_SPACING,
                 submit=in_background):
        self.status, self.job, self.clock, self.submit = status, job, clock, submit
        self.strikes, self.spacing = strikes, spacing
        self.asked = {}      # host -> clock when its last check was sent
        self.in_flight = set()
        self.answers = {}    # host -> (sent at, running, detail), not noted yet
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(STATUS_PARALLEL)
        self.count = {}      # host -> consecutive "not running"
        self.first = {}      # host -> when the first of them was sent
        self.last = {}       # host -> when the last of them was sent
        self.detail = {}
        self.unknown = set()

    def dead(self, hosts):
        """{host: why it is dead} among hosts: the answers that came are noted, checks that are due sent."""
        now = self.clock()
        for host in hosts:
            if host in self.unknown or host in self.in_flight:
                continue
            if host in self.asked and now - self.asked[host] < self.spacing:
                continue
            self.asked[host] = now
            self.in_flight.add(host)
            self.submit(lambda h=host, at=now: self._ask(h, at))
        with self.lock:
            answers, self.answers = self.answers, {}
        for host, (at, running, detail) in sorted(answers.items()):
            self.in_flight.discard(host)
            self._note(host, at, running, detail)
        return {h: self._why(h) for h in hosts if h not in self.unknown and self.count.get(h, 0) >= self.strikes}

    def _ask(self, host, at):
        with self.slots:
            try:
                running, detail = self.status(self.job, host)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                # advice only: a check that breaks never fails the gate
                running, detail = None, "cannot ask: %s" % exc
        with self.lock:
            self.answers[host] = (at, running, detail)

    def _note(self, host, at, running, detail):
        if running is None:
            self.unknown.add(host)
        elif running:
            self.count[host] = 0
        else:
            self.count[host] = self.count.get(host, 0) + 1
            if self.count[host] == 1:
                self.first[host] = at
            self.last[host] = at
            self.detail[host] = detail

    def _why(self, host):
        return "job %s %s: `make status` said so %d times in a row, %.1f s apart%s" % (
            self.job, NOT_RUNNING, self.count[host], self.last[host] - self.first[host],
            (" (%s)" % self.detail[host]) if self.detail.get(host) else "")


def ask_status(status, job, hosts, parallel=STATUS_PARALLEL):
    """{host: (running, detail)}: status(job, host) for each host, side by side (at most parallel at a time); a
    check that breaks answers (None, why)."""
    def one(host):
        try:
            return status(job, host)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # advice only: a check that breaks cannot tell, and the probes alone decide there
            return None, "cannot ask: %s" % exc
    hosts = list(hosts)
    if len(hosts) <= 1:
        return {h: one(h) for h in hosts}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(parallel, len(hosts))) as pool:
        return dict(zip(hosts, pool.map(one, hosts)))


class StatusConfirm:
    """A gate that tells the truth: status(job, host) -> (True | False | None, detail) is asked of each host once
    its probes all passed, one call per host and gate, the hosts of one round side by side. Running, or None (no
    status target, a job_control job, no answer: the probes alone decide), confirms the host; "not running" is
    asked again at the next round, and strikes answers in a row fail it (failed)."""

    def __init__(self, status, job, strikes=STATUS_STRIKES):
        self.status, self.job, self.strikes = status, job, strikes
        self.confirmed = set()
        self.count = {}   # host -> consecutive "not running" after its probes passed
        self.detail = {}
        self.calls = 0

    def check(self, hosts):
        """Ask the hosts not confirmed yet; returns {host: why} of those whose job is not running."""
        todo = [h for h in hosts if h not in self.confirmed]
        self.calls += len(todo)
        for host, (running, detail) in sorted(ask_status(self.status, self.job, todo).items()):
            if running is False:
                self.count[host] = self.count.get(host, 0) + 1
                self.detail[host] = detail
            else:
                self.confirmed.add(host)
                self.count.pop(host, None)
        return {h: self._why(h) for h in todo if h not in self.confirmed}

    def failed(self, host):
        return self.count.get(host, 0) >= self.strikes

    def _why(self, host):
        return "status: its probes pass, but job %s %s there: `make status` said so %d time(s) in a row%s" % (
            self.job, NOT_RUNNING, self.count[host], (" (%s)" % self.detail[host]) if self.detail.get(host) else "")

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gates and the probes of health checks (no Ansible imports): one predicate per probe type, and
the gate loop, which waits in deploy/waiter.py (the `health_check` verb waits there too, on its own
budgets).

* tcp and http(s) dial the worker from the controller; https verifies the server's certificate
  against the bucket CA (Trust: secrets/ca.crt) and the system's CAs, unless the check says
  "insecure": true;
* ssh (maand: "one shell line on the worker over SSH") runs its command on the worker with the run's
  connection settings (adapter/support.hosts_from_hostvars: address, port, user, key, the ssh args and
  host-key policy Ansible uses, become), exit 0 = healthy;
* status: the job's `make status` through the worker agent (as maand.core.status), asked while a gate
  waits (and while the health_check verb waits: status_checker, StatusWatch are shared); a job that is not
  running on two checks in a row fails its gate at once (StatusWatch).

ssh_argv is the one ssh command line of the controller's own ssh calls to workers (probes, status,
the status tail of a failed gate): the run's options first (ssh keeps an option's first value).
"""

from __future__ import annotations

import http.client
import os
import shlex
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Mapping

from .waiter import Budget, Pending, Waiter

SSH_CONNECT_TIMEOUT = 10
OUTPUT_TAIL = 300


def ssh_argv(conn, connect_timeout=SSH_CONNECT_TIMEOUT):
    """ssh argv (without the remote command) for one host's connection settings
    {address, port, user, key, options}; the run's options come first (ssh keeps an option's first value),
    so their host-key policy wins over accept-new, trust on first use (docs/deploy.md, Security notes)."""
    argv = ["ssh"] + list(conn.get("options") or [])
    argv += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % connect_timeout, "-o", "StrictHostKeyChecking=accept-new"]
    if conn.get("key"):
        argv += ["-i", str(conn["key"])]
    if conn.get("port"):
        argv += ["-p", str(conn["port"])]
    argv.append("%s@%s" % (conn["user"], conn["address"]) if conn.get("user") else str(conn["address"]))
    return argv


def ssh_remote(command, sudo=False):
    """The remote shell line of an ssh probe (under sudo -n when the run becomes root)."""
    return "%ssh -c %s" % ("sudo -n " if sudo else "", shlex.quote(command))


def _tail(text):
    text = " ".join((text or "").split())
    return text if len(text) <= OUTPUT_TAIL else "..." + text[-OUTPUT_TAIL:]


def ssh_probe(conn, command, timeout, run=subprocess.run):
    """Run command on the worker over SSH; None when it exits 0, else the reason (exit code, output tail)."""
    argv = ssh_argv(conn, max(SSH_CONNECT_TIMEOUT, int(timeout)))
    try:
        done = run(argv + [ssh_remote(command, bool(conn.get("sudo")))], capture_output=True, text=True, check=False,
                   timeout=float(timeout) + SSH_CONNECT_TIMEOUT + max(SSH_CONNECT_TIMEOUT, int(timeout)))
    except subprocess.TimeoutExpired:
        return "ssh %s: %r timed out after %ss" % (conn["address"], command, timeout)
    except OSError as exc:
        return "ssh %s: cannot run ssh: %s" % (conn["address"], exc)
    if done.returncode == 0:
        return None
    if done.returncode == 255:
        return "ssh %s: cannot connect: %s" % (conn["address"], _tail(done.stderr) or "exit 255")
    output = _tail(done.stderr or done.stdout)
    return "ssh %s: %r exited %d%s" % (conn["address"], command, done.returncode, (": " + output) if output else "")


class Trust:
    """What an https probe trusts: the bucket CA (<bucket>/secrets/ca.crt, which build makes when a job
    declares certs, certs/ca.py) besides the system's CAs; the host name checked is the address
    dialled (maand's leaves hold the worker's IP). Built once, when the first https probe runs."""

    def __init__(self, ca_file=None):
        self.ca_file = ca_file
        self._context = None

    @classmethod
    def for_bucket(cls, bucket_dir):
        from .. import certs as _certs  # late: only https probes need the path

        return cls(_certs.ca_paths(bucket_dir)[0])

    @property
    def has_ca(self):
        return bool(self.ca_file) and os.path.isfile(self.ca_file)

    def context(self, insecure=False):
        if insecure:  # the check's "insecure": true (validated at build: https only)
            return ssl._create_unverified_context()  # nosec - opted out in the manifest
        if self._context is None:
            ctx = ssl.create_default_context()
            # maand's leaves (an empty subject with a non-critical SAN, no key identifiers) are valid for
            # OpenSSL and Go but not for the RFC 5280 strict mode some Python versions turn on
            ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
            if self.has_ca:
                ctx.load_verify_locations(cafile=self.ca_file)
            self._context = ctx
        return self._context

    def hint(self):
        where = "the bucket CA (secrets/ca.crt) or a system CA" if self.has_ca else \
            "a system CA (this bucket has no CA: secrets/ca.crt)"
        return ("the server's certificate must be signed by %s and name the address dialled; or set "
                "\"insecure\": true on the check to skip verification" % where)


# --- one predicate per probe type: None = healthy, else the reason -----------------------------------

def tcp_probe(address, check, timeout):
    """A TCP connect from the controller to address:port."""
    port = check["port"]
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return None
    except OSError as exc:
        return "tcp %s:%d: %s" % (address, port, exc)


def http_probe(address, check, timeout, trust=None):
    """A GET of path from the controller; healthy on expect_status. https verifies the server's
    certificate against trust (Trust: the bucket CA and the system's) unless the check is insecure."""
    port = check["port"]
    try:
        if check["scheme"] == "https":
            context = (trust or Trust()).context(bool(check.get("insecure")))
            conn = http.client.HTTPSConnection(address, port, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection(address, port, timeout=timeout)
        try:
            conn.request("GET", check["path"])
            status = conn.getresponse().status
        finally:
            conn.close()
        if status != check["expect_status"]:
            return "http %s://%s:%d%s returned %d, expected %d" % (
                check["scheme"], address, port, check["path"], status, check["expect_status"])
        return None
    except ssl.SSLCertVerificationError as exc:
        return "https %s:%d: %s; %s" % (address, port, exc.verify_message or exc, (trust or Trust()).hint())
    except (OSError, http.client.HTTPException) as exc:
        return "http %s:%d: %s" % (address, port, exc)


def probe(address, check, timeout, conns=None, ssh_run=subprocess.run, trust=None):
    """One health probe; returns None when healthy, else the reason. conns: {address: connection
    settings} for ssh probes (an address without settings is dialled as it is); trust: what https
    probes trust (Trust; default: the system's CAs)."""
    if check["type"] == "ssh":
        conn = (conns or {}).get(address) or {"address": address}
        return ssh_probe(conn, check["command"], timeout, ssh_run)
    if check["type"] == "tcp":
        return tcp_probe(address, check, timeout)
    return http_probe(address, check, timeout, trust)


PROBES = ("tcp", "http", "ssh")  # bucket/job_checks.GATE_PROBES: what probe() runs


# --- the job's `make status` (fail fast) -------------------------------------------------------------

STATUS_TIMEOUT = 10     # seconds `make status` may take on the worker
STATUS_SPACING = 1.0    # seconds at least between two status checks of one host in one gate
STATUS_STRIKES = 2      # consecutive "not running" answers that end a gate at once
STATUS_PARALLEL = 8     # hosts asked at a time
NOT_RUNNING = "is not running"


def status_probe(conn, command, request, timeout=STATUS_TIMEOUT, run=subprocess.run):
    """The job's `make status` on the worker through the worker agent (one read-only status op, as
    maand.core.status: exit 0 = running): (True | False | None when it cannot tell, detail).
    command: the agent's step command (deploy/remote.step_command); request: its JSON request."""
    from . import remote as _remote  # late: only gates with fail fast need it

    argv = ssh_argv(conn, SSH_CONNECT_TIMEOUT) + [ssh_remote(command, bool(conn.get("sudo")))]
    try:
        done = run(argv, input=request, capture_output=True, text=True, check=False,
                   timeout=float(timeout) + 2 * SSH_CONNECT_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "cannot run ssh: %s" % exc
    answer, err = _remote.parse_output(done.stdout, done.stderr, done.returncode, "status of %s" % conn["address"])
    ops = (answer or {}).get("ops") or []
    if not ops:
        return None, err or "no answer"
    out = ops[0]
    tail = [line for line in out.get("output_tail") or []
            if line.strip() and not line.startswith(("make: ***", "make["))]  # make's own "Error 1"
    return out.get("running"), _tail(tail[-1] if tail else out.get("note") or out.get("msg") or "")


def status_checker(request_of, conns, python_of, probe=None):
    """status(job, host) -> (running, detail) for StatusWatch: the job's `make status` on the worker through
    its agent (status_probe), over the worker's connection settings. request_of(job, host) -> the agent's
    request, or None when there is no status to ask (asked once per job and host); conns() -> {host:
    connection settings}; python_of(host) -> the worker's python. The deploy's gates
    (deploy/progress.status_checker: the run's own op) and the health_check verb (ops/health_check: the
    catalog's, as maand.core.status) ask through it."""
    from . import remote as _remote  # late: only gates with fail fast need it

    probe = probe or status_probe
    requests = {}

    def status(job, host):
        if (job, host) not in requests:
            requests[(job, host)] = request_of(job, host)
        conn = conns().get(host)
        if requests[(job, host)] is None or not conn:
            return None, "no status to ask"
        return probe(conn, _remote.step_command(python_of(host)), requests[(job, host)])
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


# --- the gate ------------------------------------------------------------------------------------------

def run_gate(gate, addresses, sleep=time.sleep, probe_fn=probe, watch=None, clock=time.monotonic, status=None,
             submit=in_background):
    """Probe every check on every host until all pass or the gate's budget is spent (deploy/waiter.py).
    Returns the problems ([] = passed).

    watch (optional, deploy/progress.GateWatch): waiting(host, check, attempt, elapsed, error) after
    each attempt that left a probe failing (the first one), ended(passed, elapsed, attempts) at the end.
    status (optional): status(job, host) -> (running, detail), the job's `make status` (StatusWatch):
    a host whose job is not running on two checks in a row ends the gate at once (fail fast); submit(fn)
    runs a check (in the background; tests pass a plain call)."""
    budget = Budget.of(gate)
    checks = gate["checks"]
    pending = {(h, i) for h in gate["hosts"] for i in range(len(checks))}
    last, dead = {}, {}
    health = StatusWatch(status, gate["job"], clock, submit=submit) if status is not None else None

    def attempt(n):
        for key in sorted(pending):
            host, i = key
            err = probe_fn(addresses.get(host, host), checks[i], gate["timeout_seconds"])
            if err is None:
                pending.discard(key)
            else:
                last[key] = err
        if health is not None and pending:
            dead.update(health.dead(sorted({h for h, dummy in pending})))
        return [Pending(key, budget, last.get(key, "failed"), key[0] in dead) for key in sorted(pending)]

    def on_round(n, elapsed, still, retrying):
        if watch is not None:
            host, i = min(pending)
            watch.waiting(host, checks[i], n, elapsed, last.get((host, i)))

    waited = Waiter(sleep, clock).wait(attempt, on_round)
    if watch is not None:
        watch.ended(waited.passed, waited.elapsed, waited.rounds)
    if waited.passed:
        return []
    problems = ["%s: %s" % (host, last.get((host, i), "failed")) for host, i in sorted(pending)]
    return problems + not_running(dead)


def describe(check):
    """A probe in a few words: `tcp :30000`, `http :30000/health`, `ssh 'systemctl is-active api'`."""
    if check["type"] == "ssh":
        return "ssh %s" % shlex.quote(check["command"])
    if check["type"] == "http":
        return "%s :%d%s" % (check.get("scheme") or "http", check["port"], check.get("path") or "/")
    return "tcp :%d" % check["port"]


def by_address(conns):
    """{host: connection settings} -> {address: connection settings} (probes are called with addresses)."""
    return {str(c.get("address") or h): dict(c, address=str(c.get("address") or h)) for h, c in (conns or {}).items()}


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


def prober(conns=None, trust=None, ssh_run=subprocess.run):
    """probe_fn(address, check, timeout) for run_gate (deploy/progress.runner_for_run). conns: {host: connection
    settings} (adapter/support.hosts_from_hostvars) for ssh probes, or a callable returning them, called once,
    when the first ssh probe runs; trust: what https probes trust (Trust.for_bucket); ssh_run: how ssh probes
    run their argv (subprocess.run)."""
    cache = {}

    def probe_fn(address, check, timeout):
        if check["type"] == "ssh" and "conns" not in cache:
            cache["conns"] = by_address(conns() if callable(conns) else conns)
        return probe(address, check, timeout, cache.get("conns"), ssh_run=ssh_run, trust=trust)
    return probe_fn

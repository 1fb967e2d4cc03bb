# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probes of health checks (no Ansible imports): one predicate per probe type, None = healthy, else
the reason. The deploy's gates (deploy/gate.run_gate) and the `health_check` verb (ops/health_check.run)
both call them, and wait between rounds in health/waiter.py.

* tcp and http(s) dial the worker from the controller; https verifies the server's certificate
  against the bucket CA (Trust: secrets/ca.crt) and the system's CAs, unless the check says
  "insecure": true;
* ssh (maand: "one shell line on the worker over SSH") runs its command on the worker with the run's
  connection settings (adapter/support.hosts_from_hostvars: address, port, user, key, the ssh args and
  host-key policy Ansible uses, become), exit 0 = healthy;
* status: the job's `make status` through the worker agent (as maand.core.status): (running, detail),
  asked while a gate or the verb waits (health/watch.py: StatusWatch).

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
from typing import Any, Protocol

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
        from ..certs import ca  # late: only https probes need the path

        return cls(ca.ca_paths(bucket_dir)[0])

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


def prober(conns=None, trust=None, ssh_run=subprocess.run):
    """probe_fn(address, check, timeout) for deploy/gate.run_gate (deploy/callbacks.StepCallbacks). conns:
    {host: connection settings} (adapter/support.hosts_from_hostvars) for ssh probes, or a callable returning
    them, called once, when the first ssh probe runs; trust: what https probes trust (Trust.for_bucket);
    ssh_run: how ssh probes run their argv (subprocess.run)."""
    cache = {}

    def probe_fn(address, check, timeout):
        if check["type"] == "ssh" and "conns" not in cache:
            cache["conns"] = by_address(conns() if callable(conns) else conns)
        return probe(address, check, timeout, cache.get("conns"), ssh_run=ssh_run, trust=trust)
    return probe_fn


# --- the job's `make status` through the worker agent (fail fast) -----------------------------------------

STATUS_TIMEOUT = 10     # seconds `make status` may take on the worker


class Agent(Protocol):
    """How the controller calls the worker agent: the module deploy/remote.py fits as it is (the agent's
    protocol sits above this package; its callers hand it in)."""

    def step_command(self, python: str) -> str:
        """The shell line that runs one step request (stdin: the JSON request) on the worker."""

    def parse_output(self, stdout: str, stderr: str, rc: int, what: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the agent's answer, None) or (None, why there is none)."""


def status_probe(conn, command, request, timeout=STATUS_TIMEOUT, run=subprocess.run, *, agent: Agent):
    """The job's `make status` on the worker through the worker agent (one read-only status op, as
    maand.core.status: exit 0 = running): (True | False | None when it cannot tell, detail).
    command: the agent's step command (agent.step_command); request: its JSON request."""
    argv = ssh_argv(conn, SSH_CONNECT_TIMEOUT) + [ssh_remote(command, bool(conn.get("sudo")))]
    try:
        done = run(argv, input=request, capture_output=True, text=True, check=False,
                   timeout=float(timeout) + 2 * SSH_CONNECT_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "cannot run ssh: %s" % exc
    answer, err = agent.parse_output(done.stdout, done.stderr, done.returncode, "status of %s" % conn["address"])
    ops = (answer or {}).get("ops") or []
    if not ops:
        return None, err or "no answer"
    out = ops[0]
    tail = [line for line in out.get("output_tail") or []
            if line.strip() and not line.startswith(("make: ***", "make["))]  # make's own "Error 1"
    return out.get("running"), _tail(tail[-1] if tail else out.get("note") or out.get("msg") or "")

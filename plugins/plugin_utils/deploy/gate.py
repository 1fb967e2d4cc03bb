# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gates: probe a job's checks until they pass (no Ansible imports). tcp and http probes dial
the worker from the controller; an ssh probe (maand: "one shell line on the worker over SSH") runs its
command on the worker with the run's connection settings (_hook_deploy.hosts_from_hostvars: address,
port, user, key, the ssh args with Ansible's ControlPath), exit 0 = healthy."""

from __future__ import annotations

import http.client
import shlex
import socket
import ssl
import subprocess
import time

SSH_CONNECT_TIMEOUT = 10
OUTPUT_TAIL = 300


def ssh_argv(conn, connect_timeout=SSH_CONNECT_TIMEOUT):
    """ssh argv (without the remote command) for one host's connection settings
    {address, port, user, key, options}; the run's options come first (ssh keeps an option's first value)."""
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


def probe(address, check, timeout, conns=None, ssh_run=subprocess.run):
    """One health probe; returns None when healthy, else the reason. conns: {address: connection
    settings} for ssh probes (an address without settings is dialled as it is)."""
    if check["type"] == "ssh":
        conn = (conns or {}).get(address) or {"address": address}
        return ssh_probe(conn, check["command"], timeout, ssh_run)
    port = check["port"]
    try:
        if check["type"] == "tcp":
            with socket.create_connection((address, port), timeout=timeout):
                return None
        if check["scheme"] == "https":
            conn = http.client.HTTPSConnection(address, port, timeout=timeout, context=ssl._create_unverified_context())
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
    except (OSError, http.client.HTTPException) as exc:
        return "%s %s:%d: %s" % (check["type"], address, port, exc)


def run_gate(gate, addresses, sleep=time.sleep, probe_fn=probe, watch=None, clock=time.monotonic):
    """Probe every check on every host until all pass or attempts run out. Returns the problems ([] = passed).

    watch (optional, _deploy_progress.GateWatch): waiting(host, check, attempt, elapsed, error) after
    each attempt that left a probe failing (the first one), ended(passed, elapsed, attempts) at the end."""
    start = clock()
    pending = {(h, i) for h in gate["hosts"] for i in range(len(gate["checks"]))}
    last = {}
    for attempt in range(gate["attempts"]):
        for key in sorted(pending):
            host, i = key
            err = probe_fn(addresses.get(host, host), gate["checks"][i], gate["timeout_seconds"])
            if err is None:
                pending.discard(key)
            else:
                last[key] = err
        if not pending:
            if watch is not None:
                watch.ended(True, clock() - start, attempt + 1)
            return []
        if watch is not None:
            host, i = min(pending)
            watch.waiting(host, gate["checks"][i], attempt + 1, clock() - start, last.get((host, i)))
        if attempt + 1 < gate["attempts"]:
            sleep(gate["interval_seconds"])
    if watch is not None:
        watch.ended(False, clock() - start, gate["attempts"])
    return ["%s: %s" % (host, last.get((host, i), "failed")) for host, i in sorted(pending)]


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


def host_addresses(hostvars):
    """{host: ansible_host or host} from Ansible's hostvars (or any mapping of host -> vars)."""
    out = {}
    for host in hostvars:
        try:
            out[host] = hostvars[host].get("ansible_host") or host
        except Exception:  # pragma: no cover - a host whose vars cannot be templated
            out[host] = host
    return out


def prober(conns=None, probe_impl=probe):
    """probe_fn(address, check, timeout) for run_gate. conns: {host: connection settings}
    (_hook_deploy.hosts_from_hostvars) for ssh probes, or a callable returning them, called once,
    when the first ssh probe runs."""
    cache = {}

    def probe_fn(address, check, timeout):
        if check["type"] == "ssh" and "conns" not in cache:
            cache["conns"] = by_address(conns() if callable(conns) else conns)
        return probe_impl(address, check, timeout, cache.get("conns"))
    return probe_fn


def runner(addresses, on_pass=None, run=run_gate, conns=None, probe_impl=probe):
    """A gate runner for _deploy_run: gate -> problems; on_pass(gate) is called for a passed gate.
    conns: {host: connection settings} (_hook_deploy.hosts_from_hostvars) for ssh probes; a callable
    returning them is called once, when the first gate with an ssh probe runs."""
    probe_fn = prober(conns, probe_impl)

    def go(gate):
        problems = run(gate, addresses, probe_fn=probe_fn)
        if not problems and on_pass is not None:
            on_pass(gate)
        return problems
    return go

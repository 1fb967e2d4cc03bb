# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gates: probe a job's checks from the controller until they pass (no Ansible imports)."""

from __future__ import annotations

import http.client
import socket
import ssl
import time


def probe(address, check, timeout):
    """One health probe from the controller; returns None when healthy, else the reason."""
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


def host_addresses(hostvars):
    """{host: ansible_host or host} from Ansible's hostvars (or any mapping of host -> vars)."""
    out = {}
    for host in hostvars:
        try:
            out[host] = hostvars[host].get("ansible_host") or host
        except Exception:  # pragma: no cover - a host whose vars cannot be templated
            out[host] = host
    return out


def runner(addresses, on_pass=None, run=run_gate):
    """A gate runner for _deploy_run: gate -> problems; on_pass(gate) is called for a passed gate."""
    def go(gate):
        problems = run(gate, addresses)
        if not problems and on_pass is not None:
            on_pass(gate)
        return problems
    return go

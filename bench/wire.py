"""What one ansible(-playbook) run costs on the wire, per fleet host (benchmark helper, stdlib only).

Two independent counters, both per host:
- the hosts' sshd logs (the fleet runs sshd with LogLevel VERBOSE): `logins` = "Accepted publickey"
  lines (SSH connections that authenticated), `sessions` = "Starting session:" lines (one per exec or
  subsystem channel, also when multiplexed over a ControlPersist master: every Ansible task's command,
  every rsync, every agent call);
- the relay (bench/relay.py, the inventory's ProxyCommand): `connections` = TCP connections, and
  `round_trips` = request/response turns on them (SSH handshakes included), with the relay's delay
  D ms each way.

Every run gets its own ControlPath folder (ANSIBLE_SSH_CONTROL_PATH_DIR), so it starts without an open
master, as a user's first run does; after the run its masters are closed (`ssh -O exit`) so the relays
of the run end and report before the next run starts.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RELAY = Path(__file__).resolve().parent / "relay.py"
LOGIN = "Accepted publickey for "
SESSION = "Starting session: "


@dataclass
class Counts:
    """Totals of one run over the fleet (divide by the hosts for the figures per host)."""

    logins: int = 0
    sessions: int = 0
    connections: int = 0
    round_trips: int = 0
    max_sessions: int = 0  # of the busiest host
    max_round_trips: int = 0
    unreported: int = 0  # relays that never reported their close (their round trips are not counted)

    def per_host(self, n):
        out = {k: round(getattr(self, k) / n, 2) for k in ("logins", "sessions", "connections", "round_trips")}
        if self.unreported:
            out["unreported_relays"] = self.unreported
        return out


class Wire:
    """The relay settings of a fleet and the counters of its runs."""

    def __init__(self, hosts, work: Path):
        self.hosts = hosts
        self.work = work
        self.relay_log = work / "relay.jsonl"
        self.delay_ms = 0

    def ssh_common_args(self, delay_ms):
        """ansible_ssh_common_args that send every ssh of a run (Ansible's, rsync's over the same
        ControlPath, synchronize's with use_ssh_args) through the relay."""
        self.delay_ms = delay_ms
        proxy = "%s -I -S %s --delay-ms %s --log %s %%h %%p" % (
            shlex.quote(sys.executable), shlex.quote(str(RELAY)), delay_ms, shlex.quote(str(self.relay_log)))
        return "-o ProxyCommand=%s" % shlex.quote(proxy)

    def group_vars(self, bucket: Path, delay_ms):
        """bucket/group_vars/all.yml next to the inventory source: every host of the bucket uses the relay."""
        path = bucket / "group_vars" / "all.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("ansible_ssh_common_args: %s\n" % json.dumps(self.ssh_common_args(delay_ms)))

    def start(self):
        """Before a run: (env for the run, marks of where the logs stand)."""
        cp_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=str(self.work)))
        marks = {h["address"]: _size(Path(h["host_dir"]) / "sshd.log") for h in self.hosts}
        return {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp_dir)}, (cp_dir, marks, _size(self.relay_log))

    def finish(self, started, wait=60.0):  # a loaded machine can take long to end a relay
        """After a run: close its masters, wait for its relays to report, and count."""
        cp_dir, marks, relay_mark = started
        closing = [subprocess.Popen(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "bench"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for sock in sorted(cp_dir.iterdir())]
        for proc in closing:
            proc.wait(timeout=30)
        deadline = time.monotonic() + wait
        while True:
            events = _relay_events(self.relay_log, relay_mark)
            opened = {_relay(e) for e in events if e["event"] == "open"}
            closed = [e for e in events if e["event"] == "close" and _relay(e) in opened]
            if opened <= {_relay(e) for e in closed} or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        counts = Counts()
        for h in self.hosts:
            text = _read_from(Path(h["host_dir"]) / "sshd.log", marks[h["address"]])
            sessions = text.count(SESSION)
            counts.logins += text.count(LOGIN)
            counts.sessions += sessions
            counts.max_sessions = max(counts.max_sessions, sessions)
        by_host = {}
        for e in closed:
            by_host[e["host"]] = by_host.get(e["host"], 0) + e["round_trips"]
        counts.connections = len(opened)  # a relay reports its open at once, its close (and round trips) at the end
        counts.round_trips = sum(by_host.values())
        counts.max_round_trips = max(by_host.values(), default=0)
        counts.unreported = len(opened - {_relay(e) for e in closed})
        if counts.unreported:  # its round trips are missing from the counts (a few per host of 128: noted)
            print("WARNING: %d relay(s) did not report their close in %.0f s: their round trips are not counted" % (
                counts.unreported, wait), file=sys.stderr)
        return counts


def _relay(event):
    """A relay is its pid and start time: a run of hundreds of hosts forks enough processes to reuse pids."""
    return event["pid"], event["start"]


def _size(path: Path):
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset):
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _relay_events(path: Path, offset):
    return [json.loads(line) for line in _read_from(path, offset).splitlines() if line.strip()]

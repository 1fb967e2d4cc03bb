# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who is on the other end of a loopback TCP connection, from Linux's /proc (no Ansible imports).

The runtime API honours a request without the hook's token only when the process that connected is
the hook or one it started. The client's end of a loopback connection is a line of /proc/net/tcp
(local port = the client's port, remote port = the API's) with a socket inode; the process holding
that inode has ``socket:[<inode>]`` among its /proc/<pid>/fd links. It belongs to a hook when the
hook's pid is among its ancestors (/proc/<pid>/stat ppid), or when its session is the hook's (hooks
start in a session of their own, so a daemon a hook left behind still counts). Only processes in
the hooks' trees are searched, so the cost follows the hooks, not the machine.

Where /proc is missing (not Linux) nothing is found: the caller then needs the hook's token.
The module also names the process listening on a port (the runtime API refuses to leave 8080 to a
stranger, and says who holds it).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from typing import Iterable

PROC = "/proc"
TCP_ESTABLISHED = "01"
TCP_LISTEN = "0A"


@dataclasses.dataclass(frozen=True)
class SocketRow:
    """One line of /proc/net/tcp{,6}."""

    local: tuple[str, int]
    remote: tuple[str, int]
    state: str
    uid: int
    inode: int


def _address(text: str) -> tuple[str, int]:
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:  # the kernel prints the __be32 as a native integer
        addr = socket.inet_ntop(socket.AF_INET, int(host, 16).to_bytes(4, sys.byteorder))
    else:
        words = b"".join(int(host[i:i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, 32, 8))
        addr = socket.inet_ntop(socket.AF_INET6, words)
    return addr, int(port, 16)


def sockets(proc: str = PROC) -> list[SocketRow]:
    """The TCP sockets of this network namespace (IPv4 and IPv6); [] without /proc."""
    rows = []
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            try:
                rows.append(SocketRow(_address(fields[1]), _address(fields[2]), fields[3], int(fields[7]),
                                      int(fields[9])))
            except (IndexError, ValueError):
                continue
    return rows


LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1")


def client_socket(client_port: int, server_port: int, proc: str = PROC) -> SocketRow | None:
    """The client's end of the loopback connection client_port -> server_port."""
    for row in sockets(proc):
        if row.state == TCP_ESTABLISHED and row.inode and row.local[1] == client_port and \
                row.remote[1] == server_port and row.local[0] in LOOPBACK and row.remote[0] in LOOPBACK:
            return row
    return None


def process_table(proc: str = PROC) -> dict[int, tuple[int, int]]:
    """{pid: (ppid, session id)} of every process this one can see."""
    table = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), "rb") as handle:
                text = handle.read().decode("ascii", "replace")
            fields = text[text.rindex(")") + 2:].split()
            table[int(name)] = (int(fields[1]), int(fields[3]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def root_of(pid: int, roots: Iterable[int], table: dict[int, tuple[int, int]]) -> int | None:
    """The one of roots that pid is, descends from, or whose session pid is in; else None."""
    wanted = set(roots)
    ppid_sid = table.get(pid)
    if ppid_sid is not None and ppid_sid[1] in wanted:
        return ppid_sid[1]
    seen = set()
    while pid > 1 and pid not in seen:
        if pid in wanted:
            return pid
        seen.add(pid)
        pid = (table.get(pid) or (0, 0))[0]
    return None


def holds(pid: int, inode: int, proc: str = PROC) -> bool:
    """True when process pid has the socket inode among its open files."""
    link = "socket:[%d]" % inode
    fd_dir = os.path.join(proc, str(pid), "fd")
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)) == link:
                return True
        except OSError:
            continue
    return False


def peer_root(client_port: int, server_port: int, roots: Iterable[int], proc: str = PROC) -> int | None:
    """The root (a hook's pid) whose process tree holds the client end of client_port -> server_port;
    None when the client is no hook's (or /proc cannot tell)."""
    roots = {r for r in roots if r}
    if not roots:
        return None
    row = client_socket(client_port, server_port, proc)
    if row is None or row.uid != os.geteuid():  # hooks run as this user
        return None
    table = process_table(proc)
    for pid in sorted(table):
        root = root_of(pid, roots, table)
        if root is not None and holds(pid, row.inode, proc):
            return root
    return None


def listener(port: int, proc: str = PROC) -> tuple[int | None, str]:
    """Who listens on TCP port on loopback or any address: (uid, "pid 123 (nginx: master), uid 33"),
    as much of it as /proc shows; (None, "") when no one is found."""
    for row in sockets(proc):
        if row.state != TCP_LISTEN or row.local[1] != port or row.local[0] not in LOOPBACK + ("0.0.0.0", "::"):
            continue
        who = ["uid %d" % row.uid]
        for pid in sorted(process_table(proc)):
            if holds(pid, row.inode, proc):
                who.insert(0, "pid %d (%s)" % (pid, _cmdline(pid, proc)))
                break
        return row.uid, ", ".join(who)
    return None, ""


def _cmdline(pid: int, proc: str = PROC) -> str:
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            text = handle.read(512).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "?"

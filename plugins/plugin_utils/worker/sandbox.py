# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the worker agent runs a job's make target (stdlib only): in the job folder or its working directory,
as the job spec's user and group (``hand_over`` gives that user its data/, logs/ and private files), in a
network namespace ("disabled", "loopback") and a private mount namespace (tmp/proc/sys/bind mounts, the root
file system read-only but for the job folder), with a timeout that kills make's whole process group.

This file runs on the workers beside the agent (Python >= 3.6, no third-party imports, no Ansible imports):
the deploy installs it as /opt/worker/.maand/sandbox-<sha12>.py next to agent-<sha12>.py (the same
sha12, deploy/remote.py), and agent.py loads it from there when a step runs make. Of the collection it imports
only the error family's base (errors/__init__.py, stdlib only), installed beside it as errors-<sha12>.py and
loaded by the agent first; the controller's unit tests import it as the collection's module.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import fcntl
import grp
import os
import pwd
import re
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

try:
    from ..errors import MaandError
except ImportError:  # on a worker (no package): the base the agent loaded from beside it (agent._load_sandbox)
    MaandError = sys.modules["maand_errors"].MaandError

KEEP = ("data", "logs")  # the job's own folders (agent.KEEP: tests/unit/plugin_utils/worker/test_layout.py)
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


class OpFailed(MaandError):
    """One operation failed; the fields go into its outcome."""

    kind = "worker"

    def __init__(self, msg, **fields):
        MaandError.__init__(self, msg)
        self.msg = msg
        self.fields = fields


# --- make ------------------------------------------------------------------------------------------

def has_makefile(folder):
    return any(os.path.isfile(os.path.join(folder, m)) for m in MAKEFILES)


def _kill_group(proc):
    """Kill a timed-out make and everything it started (its own session), so its pipes close."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


class RunAs(object):
    """Where and as whom a make target runs (job spec: working_directory, user, group)."""

    def __init__(self, cwd=None, user=None, group=None, network=None, mounts=None, read_only=False):
        self.cwd = cwd
        self.user = user
        self.group = group
        self.network = network if network in ("disabled", "loopback") else None
        self.mounts = list(mounts or ())
        self.read_only = bool(read_only)

    def namespaces(self, folder, label):
        """(mounts, read_only, writable) for private_mounts, or None; OpFailed when a mount point is missing."""
        if not self.mounts and not self.read_only:
            return None
        for mount in self.mounts:
            if mount.get("type") not in MOUNT_FS and mount.get("type") != "bind":
                raise OpFailed("%s: mount type %r is not supported on the worker" % (label, mount.get("type")))
            for key in ("mount_point", "local_path") if mount.get("type") == "bind" else ("mount_point",):
                if not os.path.isdir(mount.get(key) or ""):
                    raise OpFailed("%s: %s %s does not exist on the worker; create it or fix \"mounts\""
                                   % (label, key.replace("_", " "), mount.get(key)), reason="no_mount_point")
        return self.mounts, self.read_only, folder

    def ids(self, label):
        """(uid, gid) to switch to, or (None, None); OpFailed when the user or group does not exist."""
        if self.user is None and self.group is None:
            return None, None
        uid, gid = None, None
        if self.user is not None:
            try:
                entry = pwd.getpwuid(self.user) if isinstance(self.user, int) else pwd.getpwnam(self.user)
                uid, gid = entry.pw_uid, entry.pw_gid
            except KeyError:
                if not isinstance(self.user, int):
                    raise OpFailed("%s: user %r does not exist on the worker; create it or fix \"user\" in the job "
                                   "spec" % (label, self.user), reason="no_user")
                uid = self.user
        if self.group is not None:
            try:
                gid = (grp.getgrgid(self.group) if isinstance(self.group, int) else grp.getgrnam(self.group)).gr_gid
            except KeyError:
                if not isinstance(self.group, int):
                    raise OpFailed("%s: group %r does not exist on the worker; create it or fix \"group\" in the "
                                   "job spec" % (label, self.group), reason="no_group")
                gid = self.group
        if os.geteuid() != 0 and (uid not in (None, os.geteuid()) or gid not in (None, os.getegid())):
            raise OpFailed("%s: running as user %s / group %s needs root on the worker (use become)"
                           % (label, self.user, self.group), reason="not_root")
        return uid, gid


def _chown(path, info, uid, gid):
    want = (info.st_uid if uid is None else uid, info.st_gid if gid is None else gid)
    if (info.st_uid, info.st_gid) != want:
        os.chown(path, want[0], want[1], follow_symlinks=False)


def hand_over(folder, uid, gid):
    """What a job running as its own user (job spec user/group) gets of its tree, which rsync shipped owned by
    root without group/world write: its data/ and logs/ (created when missing), and the files only their
    owner may read (0600: rendered from a secret, a private key), so it can read them and no one else can.
    Links are never followed; bin/ and the rest of the tree stay root's."""
    for name in KEEP:
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            os.mkdir(path, 0o755)
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            _chown(path, info, uid, gid)
    for dirpath, dirnames, filenames in os.walk(folder):
        if dirpath == folder:
            dirnames[:] = [d for d in dirnames if d not in KEEP + ("bin",)]
        for name in filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077:
                _chown(path, info, uid, gid)


CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def private_network(network):
    """In the child: a new network namespace (Maelstrom's network "disabled": no interface up;
    "loopback": only lo up). Needs root (CAP_SYS_ADMIN)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "unshare(CLONE_NEWNET): %s" % os.strerror(err))
    if network == "loopback":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            flags = struct.unpack("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
            fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))
        finally:
            sock.close()


CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
KEEP_FLAGS = 0x2 | 0x4 | 0x8  # ST_NOSUID/ST_NODEV/ST_NOEXEC == MS_NOSUID/MS_NODEV/MS_NOEXEC


def _mount_points():
    """Every mount point of this mount namespace (/proc/self/mountinfo field 5, octal escapes undone)."""
    with open("/proc/self/mountinfo", "rb") as handle:
        points = [line.split()[4] for line in handle if line.strip()]
    return [re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), p) for p in points]


MOUNT_FS = {"tmp": (b"tmpfs", b"tmpfs"), "proc": (b"proc", b"proc"), "sys": (b"sysfs", b"sysfs")}


def _mount(libc, source, target, fstype, flags):
    if libc.mount(source, target, fstype, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "mount %s: %s" % (target, os.strerror(err)))


def private_mounts(mounts, read_only, writable):
    """In the child: a private mount namespace; with read_only the root file system is remounted
    read-only except the `writable` folder (the job's) and the mounts; then tmp/proc/sys/bind mounts."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "unshare(CLONE_NEWNS): %s" % os.strerror(err))
    _mount(libc, b"none", b"/", None, MS_REC | MS_PRIVATE)
    if read_only:
        path = writable.encode()
        _mount(libc, path, path, None, MS_BIND | MS_REC)
        for point in _mount_points():
            if point == path or point.startswith(path + b"/"):
                continue
            keep = os.statvfs(point).f_flag & KEEP_FLAGS  # nosuid, nodev, noexec stay as they were
            _mount(libc, None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)
    for mount in mounts or ():
        point = mount["mount_point"].encode()
        if mount["type"] == "bind":
            _mount(libc, mount["local_path"].encode(), point, None, MS_BIND | MS_REC)
            if mount.get("read_only"):
                _mount(libc, None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
            continue
        source, fstype = MOUNT_FS[mount["type"]]
        _mount(libc, source, point, fstype, 0)


def _switch(uid, gid, network=None, mounts=None):
    """preexec_fn: the job's network and mount namespaces, then drop to gid/uid, in the child before make."""
    def run():
        if network in ("disabled", "loopback"):
            private_network(network)
        if mounts is not None:
            private_mounts(*mounts)
            os.chdir(os.getcwd())  # Popen changed directory before the new mounts: enter them
        if gid is not None:
            os.setgroups([gid])
            os.setgid(gid)
        if uid is not None:
            os.setuid(uid)
    return run


def _make_argv(folder, target, run_as):
    """make as today in the job folder; with a working directory, make runs there with -f the job's Makefile."""
    if not run_as.cwd:
        return ["make", target], folder
    cwd = os.path.normpath(os.path.join(folder, run_as.cwd))
    makefile = next(m for m in MAKEFILES if os.path.isfile(os.path.join(folder, m)))
    return ["make", "-f", os.path.join(folder, makefile), target], cwd


def make(folder, target, env, label, timeout=None, tail=20, run_as=None, log=None):
    """Run `make target` in folder; returns the output tail, raises OpFailed naming the cause. log (a list):
    gets every line of stdout and stderr as [epoch seconds, "stdout"|"stderr", text] (maand's bucket logs)."""
    if not os.path.isdir(folder):
        raise OpFailed("%s: job folder %s is missing on the worker" % (label, folder))
    if not has_makefile(folder):
        raise OpFailed("%s: no Makefile in %s; every job needs a Makefile with start/stop/restart targets"
                       % (label, folder), reason="no_makefile")
    run_as = run_as or RunAs()
    argv, cwd = _make_argv(folder, target, run_as)
    if not os.path.isdir(cwd):
        raise OpFailed("%s: working directory %s is missing on the worker; create it in the job folder or fix "
                       "\"working_directory\"" % (label, cwd), reason="no_cwd")
    uid, gid = run_as.ids(label)
    if uid is not None or gid is not None:
        hand_over(folder, uid, gid)
    mounts = run_as.namespaces(folder, label)
    if (run_as.network or mounts) and os.geteuid() != 0:
        raise OpFailed("%s: the job spec's network, mounts or read-only file system need root on the worker "
                       "(use become)" % label, reason="not_root")
    full = dict(os.environ)
    full.update(env or {})
    switch = uid is not None or gid is not None or run_as.network or mounts
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_switch(uid, gid, run_as.network, mounts) if switch else None)
    except subprocess.SubprocessError as exc:  # the preexec_fn failed (namespace or ids)
        raise OpFailed("%s: cannot set up the job spec's user/group/network for make (%s)" % (label, exc),
                       reason="setup")
    except OSError as exc:
        raise OpFailed("%s: cannot run make on the worker (%s); install make" % (label, exc))
    log = [] if log is None else log
    finished = collect(proc, timeout, log)
    lines = tail_lines([entry[1:] for entry in log], int(tail or 20))
    if not finished:
        raise OpFailed("%s: make %s timed out after %s s (its process group was killed)" % (label, target, timeout),
                       rc=-1, output_tail=lines, reason="timeout")
    text = "\n".join(entry[2] for entry in log)
    if proc.returncode != 0:
        if ("No rule to make target '%s'" % target) in text or ("No rule to make target `%s'" % target) in text:
            raise OpFailed("%s: the Makefile has no '%s' target; add one (maand calls start, stop, restart and reload)"
                           % (label, target), rc=proc.returncode, output_tail=lines, reason="missing_target")
        raise OpFailed("%s: make %s failed (rc=%d)" % (label, target, proc.returncode),
                       rc=proc.returncode, output_tail=lines)
    return lines


def tail_lines(entries, n):
    """The last n lines of a process's output and its last n stderr lines, in the order they were read, from
    (stream, text) entries. stdout and stderr come on two pipes, and a burst of one can be read before the
    other: the error a process printed last may be read before its last stdout lines, and the tail keeps it
    all the same (at most 2n lines)."""
    if n <= 0:
        return []
    late = [i for i, (stream, dummy) in enumerate(entries) if stream == "stderr"][-n:]
    return [entries[i][1] for i in sorted(set(range(max(len(entries) - n, 0), len(entries))) | set(late))]


MAX_LOG_LINES = 20000  # the lines of one make target kept for the bucket logs (the newest; a note says so)


def collect(proc, timeout, log):
    """Read make's stdout and stderr line by line as they come, each as [time, stream, text] into log (the
    newest MAX_LOG_LINES), until both close and make exits; False when it ran past timeout (then killed)."""
    deadline = time.time() + timeout if timeout else None
    sel = selectors.DefaultSelector()
    rest = {}
    for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        sel.register(pipe, selectors.EVENT_READ, stream)
        rest[stream] = b""
    dropped, ok = 0, True
    while sel.get_map():
        wait = None if deadline is None else deadline - time.time()
        if wait is not None and wait <= 0:
            _kill_group(proc)
            ok, deadline = False, None
            continue
        for key, dummy in sel.select(wait):
            chunk = os.read(key.fileobj.fileno(), 65536)
            stream = key.data
            if not chunk:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                chunk, last = b"\n" if rest[stream] else b"", True
            else:
                last = False
            *whole, rest[stream] = (rest[stream] + chunk).split(b"\n")
            now = time.time()
            log.extend([now, stream, line.decode("utf-8", "replace").rstrip("\r")] for line in whole)
            if last:
                rest[stream] = b""
        if len(log) > MAX_LOG_LINES:
            dropped += len(log) - MAX_LOG_LINES
            del log[:len(log) - MAX_LOG_LINES]
    proc.wait()
    if dropped:
        log.insert(0, [log[0][0] if log else time.time(), "stderr",
                       "(maand.core: the first %d line(s) of this output were not kept)" % dropped])
    return ok

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rsync commands of a deploy step: one rsync per host and step for all of its jobs (no Ansible imports).

Job trees are copied with --delete and --checksum; each job's data/, logs/ and bin/ belong to the
worker and are excluded (so also never deleted). The controller's owner and group never travel
(``--no-owner --no-group``: files belong to the receiving user, root under sudo) and neither do
group/world write, setuid, setgid or sticky bits (``--chmod``): root runs make in these trees. A
file the controller staged 0600 (rendered from a secret, or a private key) stays 0600. The ssh command is Ansible's own for that host
(same ControlPath), so rsync rides on the SSH connection Ansible already holds open.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import threading
import time

from ..bucket import storage

WORKER_OWNED = ("data", "logs", "bin")
# what --archive would carry from the controller but must not reach a tree root runs make in
SAFE_MODES = ("--no-owner", "--no-group", "--chmod=go-w,ug-s,-t")
PREFIX_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stdin_prefix.py")
OWN_MUX = ("-o", "ControlMaster=auto", "-o", "ControlPersist=60s")
STOP_PARALLEL = 8  # masters asked to stop at a time (close_control_dir)


def control_dir(run_dir):
    """The run's folder for its own ControlPath sockets, the same for every task of the run: short (unix
    socket paths are limited to ~100 bytes), so in the temp folder. Not made here: mux_options makes it,
    or checks it is this user's own, when an ssh command needs it."""
    return os.path.join(tempfile.gettempdir(), "maand-cm-%s" % hashlib.sha256(run_dir.encode()).hexdigest()[:10])


def mux_options(folder):
    """ssh options for multiplexing with a ControlPath in folder, made 0700 or refused when it is not
    this user's own 0700 folder (bucket/storage.own_private_dir: UnsafeFolder): whoever controls that
    folder controls where ssh finds the master connection."""
    storage.own_private_dir(folder)
    return list(OWN_MUX) + ["-o", "ControlPath=%s/%%C" % folder]


def with_mux(conns, control_dir):
    """The connection settings {host: settings} with the run's own ssh multiplexing (mux_options: ControlMaster,
    a ControlPath in control_dir, as the deploy's rsync), unless their options name a ControlPath: a gate asks
    `make status` every second or so, and a new ssh handshake each time costs more than the wait. control_dir
    is made then, or refused when it is not this user's own (UnsafeFolder)."""
    out = {}
    for host, conn in conns.items():
        options = list(conn.get("options") or [])
        if not any("ControlPath" in o for o in options):
            options += mux_options(control_dir)
        out[host] = dict(conn, options=options)
    return out


def close_control_dir(folder, run=subprocess.run, sleep=time.sleep, polls=40):
    """Once the run is over (deploy/service.finish): ask every ssh master in the run's ControlPath folder to
    stop (``ssh -O stop``: it removes its socket at once, lets a session still open end, then exits) and
    remove the folder. Only this run's tasks use its masters (the name comes from the run folder's), so it
    is called after the run's last ssh call: an ssh with these options whose folder is gone fails (it
    cannot bind its socket) unless mux_options makes the folder again. A folder that is not this user's own
    is not touched; one still holding an entry after polls * 0.05 s (a master that would not stop, or was
    made meanwhile) is left. Returns whether the folder is gone."""
    try:
        if storage.folder_problem(os.lstat(folder)):
            return False
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return True
    except OSError:
        return False

    def stop(name):
        path = os.path.join(folder, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                run(["ssh", "-o", "ControlPath=%s" % path, "-O", "stop", "maand-cm"], stdin=subprocess.DEVNULL,
                    capture_output=True, check=False, timeout=10)
        except (OSError, subprocess.SubprocessError):
            pass  # the folder is left when its master keeps its socket
    with concurrent.futures.ThreadPoolExecutor(STOP_PARALLEL) as pool:  # one master per host
        list(pool.map(stop, names))
    for poll in range(polls):
        try:
            os.rmdir(folder)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if poll + 1 < polls:
                sleep(0.05)
    return False


def ssh_command(ssh_argv, verify_host=True, control_dir=None):
    """The rsync -e string: Ansible's ssh argv (+ multiplexing in control_dir when it has none)."""
    argv = list(ssh_argv)
    if not verify_host:
        argv[1:1] = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    if control_dir and not any("ControlPath" in a for a in argv):
        argv += mux_options(control_dir)
    return " ".join(shlex.quote(a) for a in argv)


def remote(host, path):
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s:%s" % (host, path)


def commands(bucket, ops, dest_root, host, ssh, sudo=False):
    """[(op ids, argv)]: one rsync for every job whose tree folder is named after the job, one more
    for each other job."""
    base = ["rsync", "--archive", *SAFE_MODES, "--checksum", "--delete", "--itemize-changes", "-e", ssh]
    jobs_dir = dest_root.rstrip("/") + "/jobs/"
    sudo_prefix = "sudo " if sudo else ""
    together, alone = [], []
    for op in ops:
        src = os.path.normpath(os.path.join(bucket, op["src"]))
        (together if os.path.basename(src) == op["job"] else alone).append((op, src))
    out = []
    if together:
        argv = base + ["--rsync-path=%smkdir -p %s && %srsync" % (sudo_prefix, shlex.quote(jobs_dir), sudo_prefix)]
        argv += ["--exclude=/*/%s" % name for name in WORKER_OWNED]
        argv += [src for dummy, src in together] + [remote(host, jobs_dir)]
        out.append(([op["id"] for op, dummy in together], argv))
    for op, src in alone:
        dest = jobs_dir + op["job"] + "/"
        argv = base + ["--rsync-path=%smkdir -p %s && %srsync" % (sudo_prefix, shlex.quote(dest), sudo_prefix)]
        argv += ["--exclude=/%s" % name for name in WORKER_OWNED]
        argv += [src + "/", remote(host, dest)]
        out.append(([op["id"]], argv))
    return out


def destination(argv):
    """The remote folder of an rsync argv from commands() (its last argument, host:path)."""
    last = argv[-1]
    if last.startswith("["):
        return last[last.index("]:") + 2:]
    return last.split(":", 1)[1]


def with_stdin_prefix(argv, fd):
    """The rsync argv whose remote shell (-e) first sends what the controller writes to its pipe ``fd``
    (the step request), then rsync's own stream (stdin_prefix.py, run with the controller's python)."""
    out = list(argv)
    i = out.index("-e")
    out[i + 1] = "%s -I -S %s %d %s" % (shlex.quote(sys.executable), shlex.quote(PREFIX_SCRIPT), fd, out[i + 1])
    return out


def with_rsync_path(argv, rsync_path):
    """The argv with its --rsync-path replaced."""
    return ["--rsync-path=%s" % rsync_path if a.startswith("--rsync-path=") else a for a in argv]


def run_with_request(argv, prefix, timeout=None):
    """Run an rsync whose remote command reads ``prefix`` (bytes) on stdin before rsync's stream (argv as
    from with_rsync_path; the -e is wrapped here). (rc, stdout, stderr); rc None when it could not run."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(with_stdin_prefix(argv, read_fd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(read_fd,))
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return None, "", "rsync could not run: %s (is rsync installed on the controller?)" % exc
    os.close(read_fd)
    writer = threading.Thread(target=_write_all, args=(write_fd, prefix), daemon=True)
    writer.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += b"\nrsync timed out after %s s" % str(timeout).encode()
    writer.join()
    return proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


def _write_all(fd, data):
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:  # the remote shell ended before it read it (BrokenPipe): rsync reports why
        pass
    finally:
        os.close(fd)


def failure(rc, stdout, stderr):
    tail = (stderr or stdout or "").strip().splitlines()[-5:]
    return "rsync failed (rc=%s): %s" % (rc, " | ".join(tail))


def execute(argv, stdin=None, timeout=None):
    """(rc, stdout, stderr) of one rsync on the controller; rc None when it could not run (stderr says why).
    stdin: what its remote command reads before rsync's stream (run_with_request), or None. The controller's
    side of deploy/agent_step.Transport.rsync."""
    if stdin is not None:
        return run_with_request(argv, stdin, timeout)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "", "rsync could not run: %s (is rsync installed on the controller?)" % exc
    return proc.returncode, proc.stdout, proc.stderr


def outcome(rc, stdout, stderr):
    """(ok, changed, message) of an rsync that ran as execute() (without stdin) reports it."""
    if rc is None:
        return False, False, stderr
    if rc != 0:
        return False, False, failure(rc, stdout, stderr)
    return True, bool(stdout.strip()), ""


def run(argv, timeout=None):
    """(ok, changed, message) of one rsync."""
    return outcome(*execute(argv, timeout=timeout))

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

import hashlib
import os
import shlex
import subprocess
import tempfile

WORKER_OWNED = ("data", "logs", "bin")
# what --archive would carry from the controller but must not reach a tree root runs make in
SAFE_MODES = ("--no-owner", "--no-group", "--chmod=go-w,ug-s,-t")
OWN_MUX = ("-o", "ControlMaster=auto", "-o", "ControlPersist=60s")


def control_dir(run_dir):
    """A short folder for rsync's own ControlPath sockets (unix socket paths are limited to ~100 bytes)."""
    path = os.path.join(tempfile.gettempdir(), "maand-cm-%s" % hashlib.sha256(run_dir.encode()).hexdigest()[:10])
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def ssh_command(ssh_argv, verify_host=True, control_dir=None):
    """The rsync -e string: Ansible's ssh argv (+ multiplexing when it has none)."""
    argv = list(ssh_argv)
    if not verify_host:
        argv[1:1] = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    if control_dir and not any("ControlPath" in a for a in argv):
        argv += list(OWN_MUX) + ["-o", "ControlPath=%s/%%C" % control_dir]
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


def run(argv, timeout=None):
    """(ok, changed, message) of one rsync."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, False, "rsync could not run: %s (is rsync installed on the controller?)" % exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
        return False, False, "rsync failed (rc=%d): %s" % (proc.returncode, " | ".join(tail))
    return True, bool(proc.stdout.strip()), ""

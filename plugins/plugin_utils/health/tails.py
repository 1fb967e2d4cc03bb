# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a failed health check adds to its message (no Ansible imports): the time it waited (and, when
`make status` ended it early, that it did not wait out its budget: failure_notes) and each failing worker's
status tail, the last lines of `make status` and of the job's newest log, read over ssh (collect_tails).
The deploy's gates (deploy/gate.GateRunner) and the `health_check` verb (ops/health_check) say it alike.
"""

from __future__ import annotations

import shlex

from . import probes
from .watch import NOT_RUNNING


# The newest entry of logs/ (as `ls -t`: lstat's mtime, no dot files), read without following a link at any
# step: logs/ opened O_DIRECTORY|O_NOFOLLOW, the entry O_NOFOLLOW relative to it, then fstat'ed (a regular
# file with one link only), so a link the job's user swaps in between a check and the read is never followed
# (security review 4, L4). Python 3 is on every worker (the deploy agent runs on it); -I: no cwd on sys.path.
# argv: the number of lines, then (maand.core.job_logs) the job folder to read logs/ in (else the cwd).
READ_NEWEST_LOG = r"""
import errno, os, stat, sys
n = int(sys.argv[1])
if len(sys.argv) > 2:
    try:
        os.chdir(sys.argv[2])
    except OSError:
        print("--- no job folder %s" % sys.argv[2])
        sys.exit(0)
try:
    d = os.open("logs", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
except OSError:
    if os.path.islink("logs"):
        print("--- logs: a symlink, not read")
    sys.exit(0)
entries = []
for e in os.scandir(d):
    if not e.name.startswith("."):
        try:
            entries.append((-e.stat(follow_symlinks=False).st_mtime_ns, e.name))
        except OSError:
            pass
if not entries:
    sys.exit(0)
f = min(entries)[1]
try:
    fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=d)
except OSError as exc:
    if exc.errno == errno.ELOOP or stat.S_ISLNK(os.lstat(f, dir_fd=d).st_mode):
        print("--- logs/%s: a symlink, not read" % f)
    sys.exit(0)
st = os.fstat(fd)
if not stat.S_ISREG(st.st_mode):
    sys.exit(0)
if st.st_nlink > 1:
    print("--- logs/%s: a hard link, not read" % f)
    sys.exit(0)
os.lseek(fd, max(0, st.st_size - 65536), 0)
data = b""
while len(data) < 65536:
    chunk = os.read(fd, 65536 - len(data))
    if not chunk:
        break
    data += chunk
print("--- logs/%s:" % f)
for line in data.decode("utf-8", "replace").splitlines()[-n:] if n > 0 else []:
    print(line)
"""


def status_command(worker_root, job, lines=10):
    """The shell command run on a worker after a failed gate: the tail of `make status` and of the
    newest file in the job's logs/. The command may run as root in a folder the job's user writes: the log
    is read by READ_NEWEST_LOG, which never follows a link (logs/ itself or the newest entry, even one swapped
    in while it runs) and names a symlink or a hard link instead of reading it, so it cannot leak other files."""
    folder = shlex.quote("%s/jobs/%s" % (worker_root, job))
    n = int(lines)
    return ("cd %s 2>/dev/null || { echo '(no job folder %s)'; exit 0; }; "
            "out=$(timeout 10 make -s status 2>&1); rc=$?; echo \"--- make status (exit $rc):\"; "
            "printf '%%s\\n' \"$out\" | tail -n %d; "
            "if command -v python3 >/dev/null 2>&1; then python3 -I -c %s %d; "
            "else echo '--- logs: not read (no python3 on the worker)'; fi"
            % (folder, folder, n, shlex.quote(READ_NEWEST_LOG), n))


def ssh_argv(host_info, command, connect_timeout=5):
    """ssh argv for one worker from adapter/support.hosts_from_hostvars()'s entry: the same command line as
    the gate's own probes (health/probes.ssh_argv: the run's ssh args and host-key policy, user, key, port),
    the command under sudo -n when the run becomes root."""
    return probes.ssh_argv(host_info, connect_timeout) + [probes.ssh_remote(command, bool(host_info.get("sudo")))]


def failure_notes(gate, elapsed, attempts, problems, tails, hint):
    """The lines a failed gate adds to its problems: elapsed time (and, when `make status` ended it
    early, that it did not wait out its budget), each worker's status tail, the hint. gate: {job, attempts,
    interval_seconds} (attempts None: a budget in seconds, maand_wait_seconds of the health_check verb)."""
    if any(NOT_RUNNING in p for p in problems):
        of = " of %s" % gate["attempts"] if gate.get("attempts") is not None else ""
        notes = ["stopped waiting after %.1f s (%d%s attempt(s), %s s apart): `make status` says the job is not "
                 "running" % (elapsed, attempts, of, gate.get("interval_seconds"))]
    else:
        notes = ["gave up after %.1f s (%d attempt(s), %s s apart)" % (elapsed, attempts, gate.get("interval_seconds"))]
    for host in sorted(tails):
        if tails[host]:
            notes.append("%s: last lines of job %s:\n%s" % (host, gate["job"], "\n".join("    " + l for l in tails[host])))
    if hint:
        notes.append(hint)
    return notes


def collect_tails(host_infos, worker_root, job, hosts, lines=10, run=None):
    """{host: last lines of `make status` and logs/} of job on hosts, over ssh ([] when unreachable)."""
    import subprocess  # late: only a failed gate needs it

    run = run or subprocess.run
    out = {}
    for host in hosts:
        info = host_infos.get(host)
        if not info:
            continue
        try:
            proc = run(ssh_argv(info, status_command(worker_root, job, lines)), capture_output=True, text=True,
                       timeout=40, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            out[host] = ["(could not read the job's status: %s)" % exc]
            continue
        text = (proc.stdout or "").rstrip("\n")
        if proc.returncode == 255:
            text = "(could not reach the worker: %s)" % (proc.stderr or "").strip()[-200:]
        out[host] = text.splitlines()[-(2 * lines + 4):] if text else []
    return out

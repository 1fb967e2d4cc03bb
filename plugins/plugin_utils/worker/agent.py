# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maand.core worker agent: everything one worker does in one deploy step (stdlib only).

This file runs on the workers (Python >= 3.6, no third-party imports, no Ansible imports) and is
imported by the controller's unit tests. The deploy copies it once per run to
/opt/worker/.maand/agent-<sha12>.py, with sandbox.py (how a make target runs) beside it as sandbox-<sha12>.py,
journal.py as journal-<sha12>.py and the error family's base (errors/__init__.py) as errors-<sha12>.py, then calls it
once per host per step:

    python3 agent.py read <root> [status] -> the worker's promoted state (JSON on stdout); with status,
                                      also `make status` of each running job a deploy started (read_statuses)
    python3 agent.py < request.json   -> apply one step for this host (JSON on stdout)
    python3 agent.py sync rsync --server ...  (stdin: "MAAND-REQUEST <n>\n" + n bytes of request, then rsync's
                                      stream) -> receive the files, then apply the step, in one SSH session
                                      (the answer on stderr, see sync_step)

maand.core.status sends a step request with only "status" ops (one per job: the promoted record's
version and time, then `make status`, exit code 0 = running); nothing on the worker changes.

A step request is {"root", "keep", "timeout", "tail", "slots", "promote": [promotion], "ops": [op]}:
the pending promotions of earlier steps are written first, then the ops run in order, consecutive
run ops side by side in up to `slots` processes. An op may carry its job spec's run fields: "env",
"cwd" (working directory inside the job folder), "user", "group", "network" ("disabled": a new
network namespace without interfaces up; "loopback": only lo up), "mounts" (tmp/proc/sys/bind in a private
mount namespace), "enable_writable_file_system" (false: the root file system read-only except the job
folder and the mounts), "timeout" (seconds, 0 = none).
Every op and promotion gets its own outcome, with "started" and "seconds" for a make target; one
failing op does not stop the others (they belong to other jobs).

Worker layout (as maand): /opt/worker/<bucket_id>/
    worker.json          bucket_id, worker host, labels, update_seq
    jobs.json            jobs allocated on this worker, with a disabled flag
    jobs/<job>/          the job tree (rsync'd); data/, logs/, bin/ inside it belong to the worker
    deploy/<job>.json    the promoted state of this allocation (written only after its gate passed)
    deploy/<job>.pending a start ran but was not promoted yet: the next start stops it first
    deploy/<job>.rollback a rollback restored the previous tree but was not promoted yet
    history/<job>/current/   a copy of the promoted tree (the files of its record) + record.json
    history/<job>/previous/  the tree and record promoted before it (one only): what a rollback restores
    history/<job>/incoming/  the files as shipped, copied before make ran (becomes current at promotion,
                             so what the job's start changes or deletes in its tree is not what a rollback gets)
/opt/worker/.maand/journal/<bucket_id>/<run_id>/<step>.json: each step's answer, kept for a resend (journal.py)

    python3 - files <root> <JSON {"current": {job: [rel]}, "previous": {...}}> -> the promoted text of those files (--diff)
"""

from __future__ import absolute_import, division, print_function

import glob
import grp
import hashlib
import importlib.util
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

KEEP = ("data", "logs")


def _load_beside(path, role, module_name):
    """The module installed beside the agent file at path for role ("sandbox", "journal", "errors": <role>-<sha12>.py next
    to agent-<sha12>.py), or None when there is none."""
    folder, name = os.path.split(os.path.abspath(path))
    beside = os.path.join(folder, name.replace("agent", role, 1))
    if not (name.startswith("agent") and name.endswith(".py")) or not os.path.isfile(beside):
        return None
    spec = importlib.util.spec_from_file_location(module_name, beside)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _load_companions():
    """(sandbox.py: how a make target runs, journal.py: each step of a run applied once): the collection's modules
    when the agent is imported (the controller, its tests); on the worker the files installed beside this one
    (<role>-<sha12>.py next to agent-<sha12>.py, checked by their sha256 with the agent before any runs), after the
    error family's base the sandbox derives (errors-<sha12>.py, checked the same way); (None, None) when the agent
    runs from stdin (`python3 - read|files`: no step, no make). Never a path of the caller's: no sys.path lookup."""
    if __package__:
        from . import journal, sandbox
        return sandbox, journal
    path = globals().get("__file__") or ""  # "<stdin>" for `python3 -`
    if _load_beside(path, "errors", "maand_errors") is None:
        return None, None
    return _load_beside(path, "sandbox", "maand_sandbox"), _load_beside(path, "journal", "maand_journal")


_sandbox, _journal = _load_companions()


# --- read ------------------------------------------------------------------------------------------

def _load(path, bad):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError):
        return None
    except ValueError:
        bad.append(path)
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def other_buckets(root):
    """[{"bucket_id", "path"}] for every other bucket tree with a worker.json next to root."""
    parent = os.path.dirname(root.rstrip("/")) or "/"
    mine = os.path.basename(root.rstrip("/"))
    out = []
    for path in sorted(glob.glob(os.path.join(parent, "*", "worker.json"))):
        folder = os.path.basename(os.path.dirname(path))
        if folder == mine or folder.startswith("."):
            continue
        data = _load(path, [])
        bucket_id = data.get("bucket_id") if isinstance(data, dict) else None
        out.append({"bucket_id": bucket_id or folder, "path": os.path.dirname(path)})
    return out


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def read_state(root, status=False):
    """What a worker holds for one bucket: worker.json, jobs.json, promoted records, job trees; with status,
    whether each running job still runs (read_statuses)."""
    bad = []
    out = {"exists": os.path.isdir(root), "worker": None, "jobs": None, "deployed": {}, "trees": [],
           "pending": [], "bad": bad, "others": other_buckets(root),
           # the names job specs may run as (the plan refuses an unknown user or group before touching anything)
           "users": sorted(set(p.pw_name for p in pwd.getpwall())), "groups": sorted(set(g.gr_name for g in grp.getgrall())),
           # who the agent runs as: the plan refuses job specs that need root (network, mounts, a
           # read-only file system, another user or group) on a worker whose agent is not root
           "euid": os.geteuid(), "egid": os.getegid(), "euser": _user_name(os.geteuid()),
           "egroup": _group_name(os.getegid())}
    if not out["exists"]:
        return out
    out["worker"] = _load(os.path.join(root, "worker.json"), bad)
    out["jobs"] = _load(os.path.join(root, "jobs.json"), bad)
    for name in _listdir(os.path.join(root, "deploy")):
        if name.startswith("."):
            continue
        if name.endswith(".json"):
            rec = _load(os.path.join(root, "deploy", name), bad)
            if isinstance(rec, dict):
                out["deployed"][name[:-5]] = rec
        elif name.endswith(".pending"):
            out["pending"].append(name[:-8])
    jobs = os.path.join(root, "jobs")
    out["trees"] = [n for n in _listdir(jobs) if os.path.isdir(os.path.join(jobs, n))]
    for name in _listdir(os.path.join(root, "deploy")):
        if name.endswith(".rollback"):
            out.setdefault("rollback_pending", []).append(name[:-9])
    previous, attempts, kept = {}, {}, []
    for name in _listdir(os.path.join(root, HISTORY)):
        rec = _load(os.path.join(root, HISTORY, name, "previous", "record.json"), bad)
        if isinstance(rec, dict):
            previous[name] = rec
        rec = _load(os.path.join(root, HISTORY, name, "incoming", "record.json"), bad)
        if isinstance(rec, dict):  # shipped and started, never promoted: a failed (or interrupted) attempt
            info = _load(os.path.join(root, HISTORY, name, "incoming", ATTEMPT), bad)
            attempts[name] = dict(rec, attempt=info if isinstance(info, dict) else {})
        if os.path.isdir(os.path.join(root, HISTORY, name, "current", "files")):
            kept.append(name)
    if previous:
        out["previous"] = previous
    if attempts:
        out["attempts"] = attempts
    if kept:
        out["kept"] = kept
    if status:
        statuses = read_statuses(root, out)
        if statuses:
            out["status"] = statuses
    return out


# --- the running check that rides the state read (a deploy converges on running) --------------------

STATUS_FILE = ".status"  # deploy/<job>.status: how the deploy's last make start/restart/reload ran (env, run fields)
STATUS_READ_TIMEOUT = 5  # seconds for each job's `make status` in the state read (they run side by side)
STATUS_READ_PARALLEL = 8
RUN_FIELDS = ("cwd", "user", "group", "network", "mounts", "enable_writable_file_system")
_TARGET_LINE = re.compile(r"^([^\s:#=][^:#=]*?)\s*::?(?!=)")


def has_status_target(folder):
    """Whether the job's Makefile defines a `status` target (a rule line naming it; not through an include)."""
    for name in ("GNUmakefile", "makefile", "Makefile"):
        try:
            with open(os.path.join(folder, name)) as handle:
                lines = handle.read(1 << 20).splitlines()
        except (IOError, OSError, UnicodeDecodeError):
            continue
        return any("status" in match.group(1).split() for match in map(_TARGET_LINE.match, lines) if match)
    return False


def note_status_op(root, op):
    """After a deploy's make start/restart/reload succeeded: keep how it ran (0600), for read_statuses; never
    the job spec's environment (op["spec_env"]: values from the controller, secrets among them), which the
    state read's `make status` then runs without."""
    spec_env = set(op.get("spec_env") or ())
    keep = {"env": {k: v for k, v in (op.get("env") or {}).items() if k not in spec_env},
            "run": {k: op[k] for k in RUN_FIELDS if op.get(k) is not None}}
    version = keep["env"].get("NEW_VERSION")
    if version is not None:
        keep["env"]["CURRENT_VERSION"] = version
    path = os.path.join(root, "deploy", op["job"] + STATUS_FILE)
    atomic_write(path, json.dumps(keep, sort_keys=True))
    os.chmod(path, 0o600)


def _status_of(root, job, how):
    """{"running": True | False | None, "rc", "tail", "seconds"} of one job's `make status`."""
    run = how.get("run") or {}
    run_as = _sandbox.RunAs(run.get("cwd"), run.get("user"), run.get("group"), run.get("network"), run.get("mounts"),
                            run.get("enable_writable_file_system") is False)
    began = time.time()
    answer = {"running": None}
    try:
        _sandbox.make(os.path.join(root, "jobs", job), "status", how.get("env"), job, STATUS_READ_TIMEOUT, 3, run_as)
        answer["running"] = True
    except _sandbox.OpFailed as exc:
        answer["tail"] = (exc.fields.get("output_tail") or [])[-3:]
        rc = exc.fields.get("rc")
        if exc.fields.get("reason") is None and isinstance(rc, int) and rc > 0:
            answer.update(running=False, rc=rc)
        else:
            answer["note"] = exc.msg[-200:]
    answer["seconds"] = round(time.time() - began, 3)
    return answer


def read_statuses(root, state):
    """{job: status} for every job whose promoted record says running, that is enabled in jobs.json, whose
    Makefile has a `status` target and that a deploy of this agent started (deploy/<job>.status): their
    `make status` side by side, each bounded by STATUS_READ_TIMEOUT. Nothing else is run or written."""
    if _sandbox is None:  # run from stdin (`python3 - read`): no sandbox, no make
        return {}
    disabled = set(e.get("job") for e in state.get("jobs") or [] if isinstance(e, dict) and e.get("disabled"))
    todo = {}
    for job, record in sorted(state["deployed"].items()):
        if not record.get("running") or job in disabled or not has_status_target(os.path.join(root, "jobs", job)):
            continue
        how = _load(os.path.join(root, "deploy", job + STATUS_FILE), [])
        if isinstance(how, dict):
            todo[job] = how
    out = {}

    def ask(job):
        out[job] = _status_of(root, job, todo[job])

    names = sorted(todo)
    for first in range(0, len(names), STATUS_READ_PARALLEL):
        threads = [threading.Thread(target=ask, args=(job,)) for job in names[first:first + STATUS_READ_PARALLEL]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return out


# --- history: the promoted tree and the one before it (rollback) ------------------------------------

HISTORY = "history"
ATTEMPT = "attempt.json"  # history/<job>/incoming/attempt.json: {"target", "ok"} of the make that ran the shipped tree
ENV_PREFIX = ".maand-env/"  # pseudo paths of a job spec's environment in a record's files (not files)


def _record_files(record):
    return sorted(rel for rel in (record.get("files") or {}) if not rel.startswith(ENV_PREFIX)
                  and not rel.startswith("/") and ".." not in rel.split("/"))


def _same_version(a, b):
    return isinstance(a, dict) and isinstance(b, dict) and a.get("hash") == b.get("hash") \
        and a.get("version") == b.get("version")


def snapshot(tree, record, dest):
    """Copy the files of record (as they are in tree) to dest/files and write dest/record.json."""
    _remove(dest)
    os.makedirs(os.path.join(dest, "files"), 0o700)
    for rel in _record_files(record):
        src = os.path.join(tree, rel)
        if not os.path.lexists(src) or (os.path.isdir(src) and not os.path.islink(src)):
            continue
        target = os.path.join(dest, "files", rel)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        if os.path.islink(src):
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    atomic_write(os.path.join(dest, "record.json"), json.dumps(record, sort_keys=True))


def keep_incoming(root, job, record):
    """Before make: copy the files of record as they were shipped to history/<job>/incoming (not
    when history/<job>/current already holds this version: its promotion only updates the record).
    True when incoming holds record (its attempt is then noted there, note_attempt)."""
    if _same_version(_load(os.path.join(root, HISTORY, job, "current", "record.json"), []), record):
        return False
    snapshot(os.path.join(root, "jobs", job), record, os.path.join(root, HISTORY, job, "incoming"))
    return True


def note_attempt(root, job, target, ok):
    """history/<job>/incoming/attempt.json: which make target ran the shipped tree and whether it succeeded
    (a tree shipped, made and never promoted failed its gate; maand_rollback says so)."""
    atomic_write(os.path.join(root, HISTORY, job, "incoming", ATTEMPT), json.dumps({"target": target, "ok": ok}))


def keep_history(root, job, record):
    """After a promotion: history/<job>/current follows the promoted record. A new version (hash or
    version) moves current to previous first (the one before is dropped) and becomes the copy kept
    before make (incoming) when it is of this record, else a copy of the tree as it is now;
    promoting the previous version again (a rollback) swaps the two. Same version: only the record
    is updated."""
    base = os.path.join(root, HISTORY, job)
    current, previous = os.path.join(base, "current"), os.path.join(base, "previous")
    incoming = os.path.join(base, "incoming")
    shipped = _same_version(_load(os.path.join(incoming, "record.json"), []), record)
    _remove(os.path.join(incoming, ATTEMPT))
    try:
        _keep_history(root, job, record, current, previous, incoming if shipped else None)
    finally:
        _remove(incoming)


def _keep_history(root, job, record, current, previous, incoming):
    base = os.path.dirname(current)
    have = _load(os.path.join(current, "record.json"), [])
    if _same_version(have, record):
        atomic_write(os.path.join(current, "record.json"), json.dumps(record, sort_keys=True))
        return
    if not os.path.isdir(base):
        os.makedirs(base, 0o700)
    if _same_version(_load(os.path.join(previous, "record.json"), []), record) and isinstance(have, dict):
        swap = os.path.join(base, ".swap")
        _remove(swap)
        os.rename(previous, swap)
        os.rename(current, previous)
        os.rename(swap, current)
        atomic_write(os.path.join(current, "record.json"), json.dumps(record, sort_keys=True))
        return
    if isinstance(have, dict):
        _remove(previous)
        os.rename(current, previous)
    else:
        _remove(current)
    if incoming:
        os.rename(incoming, current)
        atomic_write(os.path.join(current, "record.json"), json.dumps(record, sort_keys=True))
    else:
        snapshot(os.path.join(root, "jobs", job), record, current)


def restore_previous(root, job, keep, which="previous"):
    """Put the previous promoted tree of job (which="current": the promoted one) back in jobs/<job>
    (everything but keep and bin/ is replaced)."""
    source = os.path.join(root, HISTORY, job, which, "files")
    if not os.path.isdir(source):
        raise _sandbox.OpFailed("%s: no %s version on this worker (history/%s/%s is missing); nothing to roll "
                                "back to" % (job, "previous" if which == "previous" else "promoted", job, which),
                                reason="no_previous")
    folder = os.path.join(root, "jobs", job)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    for name in _listdir(folder):
        if name not in tuple(keep) + ("bin",):
            _remove(os.path.join(folder, name))
    for current, dirs, files in os.walk(source):
        rel_dir = os.path.relpath(current, source)
        dest_dir = folder if rel_dir == "." else os.path.join(folder, rel_dir)
        if not os.path.isdir(dest_dir):
            os.makedirs(dest_dir)
        for name in list(files) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            src, dest = os.path.join(current, name), os.path.join(dest_dir, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dest)
            else:
                shutil.copy2(src, dest)


# --- files: the promoted text of changed files (--diff) ----------------------------------------------

MAX_FILE_BYTES = 256 * 1024


def read_file_text(path, limit=MAX_FILE_BYTES):
    """{"text"} of a UTF-8 file, or {"missing"}, {"binary"} or {"too_large": size}."""
    try:
        if os.path.islink(path):
            return {"text": "symlink -> %s\n" % os.readlink(path)}
        size = os.path.getsize(path)
        if size > limit:
            return {"too_large": size}
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return {"missing": True}
    return text_or_binary(data)


def text_or_binary(data):
    """{"text"} of UTF-8 bytes without NUL, else {"binary"} (--diff's view of a file's content)."""
    if b"\0" in data:
        return {"binary": True}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"binary": True}


def read_files(root, wanted, previous=None, live=None):
    """{"files": {job: {rel: read_file_text}}} from the recorded copy of the promoted tree
    (history/<job>/current), else the job folder; "previous": the same from history/<job>/previous;
    "live": from the job folder itself (a failed attempt's tree, which a rollback replaces)."""
    answer = {"ok": True, "files": _read_copies(root, wanted, "current")}
    if previous:
        answer["previous"] = _read_copies(root, previous, "previous")
    if live:
        answer["live"] = _read_copies(root, live, "live")
    return answer


def _read_copies(root, wanted, which):
    out = {}
    for job, rels in sorted((wanted or {}).items()):
        copy = os.path.join(root, HISTORY, job, which, "files")
        base = copy if which != "live" and (os.path.isdir(copy) or which == "previous") else os.path.join(root, "jobs", job)
        out[job] = {}
        for rel in rels:
            if rel.startswith("/") or ".." in rel.split("/"):
                continue
            entry = read_file_text(os.path.join(base, rel))
            if "text" in entry:
                entry["digest"] = file_digest(os.path.join(base, rel))
            out[job][rel] = entry
    return out


def file_digest(path):
    """The controller's digest of a shipped file (bucket/content.py): sha256 of b"l" + a link's target, else of
    b"x" (executable) or b"-" + the bytes. A secret-bearing output's recorded digest is an HMAC: never equal."""
    if os.path.islink(path):
        return hashlib.sha256(b"l" + os.readlink(path).encode("utf-8", "surrogateescape")).hexdigest()
    digest = hashlib.sha256(b"x" if os.stat(path).st_mode & 0o100 else b"-")
    with open(path, "rb") as handle:
        digest.update(handle.read())
    return digest.hexdigest()


# --- files -----------------------------------------------------------------------------------------

def atomic_write(path, text):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:  # never written or gone: the error that brought us here is the one to raise
            pass
        raise


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def clean_job(folder, keep=KEEP):
    """Delete a job tree except its kept folders (data/, logs/). Returns True when it deleted anything."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    changed = False
    for name in _listdir(folder):
        if name not in keep:
            _remove(os.path.join(folder, name))
            changed = True
    try:
        os.rmdir(folder)
    except OSError:  # the kept folders (data/, logs/) are still in it: the folder stays
        pass
    return changed


def purge(root, keep=KEEP):
    """Delete a bucket tree except jobs/*/data and jobs/*/logs. Returns True when it deleted anything."""
    if not os.path.isdir(root):
        return False
    changed = False
    jobs = os.path.join(root, "jobs")
    for name in _listdir(jobs):
        changed = clean_job(os.path.join(jobs, name), keep) or changed
    for name in _listdir(root):
        if name != "jobs":
            _remove(os.path.join(root, name))
            changed = True
    for folder in (jobs, root):
        try:
            os.rmdir(folder)
            changed = True
        except OSError:  # kept folders (jobs/*/data, logs) are still in it: the folder stays
            pass
    return changed


# --- one step ---------------------------------------------------------------------------------------

class Step(object):
    """The paths and options of one step request."""

    def __init__(self, request):
        self.root = request["root"]
        self.keep = tuple(request.get("keep") or KEEP)
        self.timeout = request.get("timeout")
        self.tail = request.get("tail") or 20
        self.slots = max(1, int(request.get("slots") or 1))
        self.began = time.time()

    def job_dir(self, job):
        return os.path.join(self.root, "jobs", job)

    def record(self, job):
        return os.path.join(self.root, "deploy", "%s.json" % job)

    def marker(self, job):
        return os.path.join(self.root, "deploy", "%s.pending" % job)

    def rollback_marker(self, job):
        return os.path.join(self.root, "deploy", "%s.rollback" % job)


def promote(step, job, record):
    """Write the promoted record of one allocation, drop its markers, keep the tree's history."""
    atomic_write(step.record(job), json.dumps(record, sort_keys=True))
    for marker in (step.marker(job), step.rollback_marker(job)):
        if os.path.exists(marker):
            os.unlink(marker)
    keep_history(step.root, job, record)


def _run_make(step, op, target, out, label):
    """make target with the op's environment, run fields and timeout (the op's own, 0 = none, else the
    step's); the measured seconds go into the outcome (the controller keeps them as estimates)."""
    timeout = op["timeout"] if op.get("timeout") is not None else step.timeout
    run_as = _sandbox.RunAs(op.get("cwd"), op.get("user"), op.get("group"), op.get("network"), op.get("mounts"),
                            op.get("enable_writable_file_system") is False)
    began = time.time()
    out["started"] = round(began - step.began, 3)
    entry = {"target": target, "began": began, "rc": None, "lines": []}
    out.setdefault("commands", []).append(entry)  # every line, for the bucket logs (bucket/runlog.py)
    try:
        lines = _sandbox.make(step.job_dir(op["job"]), target, op.get("env"), label, timeout, step.tail, run_as,
                              entry["lines"])
        entry["rc"] = 0
    except _sandbox.OpFailed as exc:
        entry["rc"] = exc.fields.get("rc")
        raise
    finally:
        out["seconds"] = entry["seconds"] = round(time.time() - began, 3)
    out["steps"].append("make %s" % target)
    out["output_tail"] = lines
    out["changed"] = True


def do_run(step, op, out, label):
    """run/stop: the make target (a start first stops a start that was never promoted), then promote."""
    target = op.get("target")
    job = op["job"]
    attempt = False
    if op.get("restore"):  # a rollback: the previous promoted tree ("current": the promoted one) goes back
        which = "current" if op["restore"] == "current" else "previous"
        atomic_write(step.rollback_marker(job), json.dumps({"alloc_id": (op.get("record") or {}).get("alloc_id")}))
        restore_previous(step.root, job, step.keep, which)
        out["steps"].append("restore %s tree" % ("promoted" if which == "current" else "previous"))
        out["changed"] = True
    if op.get("record") is not None and not op.get("restore"):  # a deploy (the job playbook has no record)
        attempt = keep_incoming(step.root, job, op["record"]) and bool(target)
        if attempt:
            note_attempt(step.root, job, target, False)
    if target == "start" and op.get("record") is not None:  # a deploy start (the job playbook has no record)
        if os.path.exists(step.marker(job)):
            try:
                _run_make(step, op, "stop", out, label)
            except _sandbox.OpFailed as exc:
                out["steps"].append("stop of the unpromoted start failed (ignored): %s" % exc.msg)
        atomic_write(step.marker(job), json.dumps({"alloc_id": (op.get("record") or {}).get("alloc_id")}))
    if target:
        _run_make(step, op, target, out, label)
        if attempt:
            note_attempt(step.root, job, target, True)
        if op.get("record") is not None and target in ("start", "restart", "reload"):
            note_status_op(step.root, op)
    if op.get("promote_now") and op.get("record") is not None:
        promote(step, job, op["record"])
        out["steps"].append("promote")
        out["changed"] = True


def do_meta(step, op, out):
    atomic_write(os.path.join(step.root, "worker.json"), json.dumps(op["worker_json"], indent=2, sort_keys=True) + "\n")
    atomic_write(os.path.join(step.root, "jobs.json"), json.dumps(op["jobs_json"], indent=2, sort_keys=True) + "\n")
    for sub in ("jobs", "deploy"):
        if not os.path.isdir(os.path.join(step.root, sub)):
            os.makedirs(os.path.join(step.root, sub))
    out["changed"] = True


def do_remove(step, op, out, label):
    job = op["job"]
    folder = step.job_dir(job)
    if op.get("target") and os.path.isdir(folder) and _sandbox.has_makefile(folder):
        _run_make(step, op, op["target"], out, label)
    if clean_job(folder, step.keep):
        out["changed"] = True
    for path in (step.record(job), step.marker(job), step.rollback_marker(job),
                 os.path.join(step.root, "deploy", job + STATUS_FILE)):
        if os.path.exists(path):
            os.unlink(path)
            out["changed"] = True
    _remove(os.path.join(step.root, HISTORY, job))
    out["steps"].append("remove")


def do_status(step, op, out, label):
    """What the worker holds of one job (read-only): the promoted record's version and time, whether a
    start is pending, then `make status` (exit code 0 = running; None when it cannot tell)."""
    job = op["job"]
    bad = []
    record = _load(step.record(job), bad)
    out["version"] = record.get("version") if isinstance(record, dict) else None
    for key in ("reverted_from", "rolled_back_from"):  # the record came back after a failed or undone version
        if isinstance(record, dict) and record.get(key):
            out[key] = record[key]
    attempt = _load(os.path.join(step.root, HISTORY, job, "incoming", "record.json"), [])
    if isinstance(attempt, dict) and not _same_version(attempt, record):
        out["unpromoted"] = attempt.get("version")  # a newer tree was shipped and started, never promoted
    try:
        out["deployed_at"] = int(os.stat(step.record(job)).st_mtime) if isinstance(record, dict) else None
    except OSError:
        out["deployed_at"] = None
    out["pending"] = os.path.exists(step.marker(job))
    out["running"] = None
    if bad:
        out["note"] = "unreadable %s" % bad[0]
    folder = step.job_dir(job)
    if not os.path.isdir(folder):
        out["note"] = "no job folder on the worker"
        return
    if not op.get("target"):  # a job whose status is not its Makefile's (job_control commands)
        return
    try:
        _run_make(step, op, "status", out, label)
        out["running"] = True
    except _sandbox.OpFailed as exc:
        out["output_tail"] = exc.fields.get("output_tail") or []
        if exc.fields.get("reason") is None and isinstance(exc.fields.get("rc"), int) and exc.fields["rc"] > 0:
            out["running"] = False
        else:
            out["note"] = exc.msg
    out.pop("commands", None)  # read-only: `make status` is not in the bucket logs (nor in maand's)
    out["changed"] = False


def apply_op(step, op):
    """One operation -> its outcome {"id", "ok", "changed", "steps", ...}; never raises."""
    out = {"id": op.get("id"), "ok": True, "changed": False, "steps": []}
    kind = op.get("kind")
    job = op.get("job")
    label = "%s@%s" % (job, op.get("host")) if job else "worker %s" % op.get("host")
    try:
        if kind == "meta":
            do_meta(step, op, out)
        elif kind in ("run", "stop"):
            do_run(step, op, out, label)
        elif kind == "remove":
            do_remove(step, op, out, label)
        elif kind == "status":
            do_status(step, op, out, label)
        elif kind == "purge":
            out["changed"] = purge(step.root, step.keep)
            out["steps"].append("purge")
        elif kind == "files":  # the controller's rsync shipped them; nothing else to do here
            out["steps"].append("files")
        else:
            raise _sandbox.OpFailed("unknown deploy operation %r" % (kind,))
    except _sandbox.OpFailed as exc:
        out.update(exc.fields)
        out.update(ok=False, msg=exc.msg)
    except (IOError, OSError) as exc:
        out.update(ok=False, msg="%s: %s failed on the worker: %s" % (label, kind, exc))
    return out


def apply_promotion(step, entry):
    try:
        promote(step, entry["job"], entry["record"])
        return {"id": entry.get("id"), "ok": True}
    except (IOError, OSError) as exc:
        return {"id": entry.get("id"), "ok": False,
                "msg": "%s: promote failed on the worker: %s" % (entry.get("id"), exc)}


def run_ops(step, ops):
    """The ops in order; consecutive run (or status) ops (different jobs of one wave step) run side by side in up
    to step.slots processes, started in the given order as slots free up (the controller ordered them:
    priority, then longest estimate first). Outcomes keep the ops' order."""
    out = []
    i = 0
    while i < len(ops):
        j = i
        while j < len(ops) and ops[j].get("kind") == ops[i].get("kind") and ops[i].get("kind") in ("run", "status"):
            j += 1
        if j - i > 1 and step.slots > 1:
            out.extend(_parallel(step, ops[i:j]))
            i = j
        else:
            out.append(apply_op(step, ops[i]))
            i += 1
    return out


def _parallel(step, ops):
    results = [None] * len(ops)
    queue = list(enumerate(ops))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index, op = queue.pop(0)
            results[index] = apply_op(step, op)

    threads = [threading.Thread(target=worker) for dummy in range(min(step.slots, len(ops)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def run_step(request):
    """Promotions first, then the ops; a deploy step (a request with run_id and step) at most once (journal.py: a
    request answered before gets that answer, "replayed": true, and nothing runs). Returns the answer dict."""
    return _journal.once(request, apply_step) if _journal is not None else apply_step(request)


def apply_step(request):
    step = Step(request)
    promotions = [apply_promotion(step, p) for p in request.get("promote") or []]
    ops = run_ops(step, request.get("ops") or [])
    return {"ok": True, "promotions": promotions, "ops": ops}


# --- one session for the files and the step (the rsync's remote command) ------------------------------

REQUEST_HEADER = b"MAAND-REQUEST "
SYNCED_MARK = "MAAND-SYNCED"
ANSWER_MARK = "MAAND-ANSWER "
MAX_REQUEST = 64 * 1024 * 1024


def read_request(fd=0):
    """The request that precedes rsync's stream on stdin: "MAAND-REQUEST <n>\n" then n bytes of JSON,
    read unbuffered so that not one byte of rsync's stream is taken. Raises ValueError."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte or len(line) > 40:
            raise ValueError("no request header before the rsync stream")
        line += byte
    if not line.startswith(REQUEST_HEADER):
        raise ValueError("no request header before the rsync stream")
    size = int(line[len(REQUEST_HEADER):].strip())
    if not 0 < size <= MAX_REQUEST:
        raise ValueError("request size %d out of range" % size)
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise ValueError("request cut short")
        chunks.append(chunk)
        left -= len(chunk)
    request = json.loads(b"".join(chunks).decode("utf-8"))
    if not isinstance(request, dict) or not isinstance(request.get("root"), str):
        raise ValueError("the request must be an object with a root")
    return request


def sync_step(argv, err):
    """The remote command of a deploy step's rsync (argv: "rsync", "--server", ...): read the step request,
    run rsync's receiver on the rest of stdin/stdout, then, when it succeeded, mark it (SYNCED_MARK) and apply
    the step, its answer on one ANSWER_MARK line. Both go to stderr: rsync's client reads no stdout after its
    stream ends, but it waits for this process and passes its stderr through. Without the mark the step did
    not run (the controller falls back to a plain rsync and agent call). Returns the exit status."""
    if argv[:2] != ["rsync", "--server"]:
        err.write("agent sync: expected rsync --server ..., got %r\n" % argv[:2])
        return 2
    try:
        request = read_request()
    except ValueError as exc:
        err.write("agent sync: bad request: %s\n" % exc)
        return 2
    err.flush()
    rc = subprocess.call(argv)  # the receiver inherits stdin/stdout: the rest of rsync's stream
    if rc != 0:
        return rc
    err.write(SYNCED_MARK + "\n")
    err.flush()
    answer = run_step(request)
    err.write(ANSWER_MARK + json.dumps(answer) + "\n")
    err.flush()
    return 0


def main(argv=None, stdin=None, stdout=None):
    argv = sys.argv[1:] if argv is None else argv
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    no_step = "a step needs the installed agent and its sandbox (from stdin: read and files only)"
    if argv[:1] == ["sync"]:
        if _sandbox is None:
            sys.stderr.write("agent sync: %s\n" % no_step)
            return 2
        return sync_step(argv[1:], sys.stderr)
    if argv[:1] == ["read"] and len(argv) in (2, 3) and argv[2:] in ([], ["status"]):
        answer = read_state(argv[1], status=argv[2:] == ["status"])
    elif argv[:1] == ["files"] and len(argv) == 3:
        try:
            wanted = json.loads(argv[2])
            if not isinstance(wanted, dict):
                raise ValueError("expected an object")
        except ValueError as exc:
            answer = {"ok": False, "msg": "bad files request: %s" % exc}
        else:
            answer = read_files(argv[1], wanted.get("current"), wanted.get("previous"), wanted.get("live"))
    elif not argv:
        try:
            request = json.loads(stdin.read())
            if not isinstance(request, dict) or not isinstance(request.get("root"), str):
                raise ValueError("the request must be an object with a root")
        except ValueError as exc:
            answer = {"ok": False, "msg": "bad agent request: %s" % exc}
        else:
            answer = run_step(request) if _sandbox is not None else {"ok": False, "msg": no_step}
    else:
        answer = {"ok": False, "msg": "usage: agent.py [read <root> | sync rsync --server ...] (step request as JSON "
                                      "on stdin)"}
    stdout.write(json.dumps(answer))
    stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

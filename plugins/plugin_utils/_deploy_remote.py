# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The small Python programs the deploy runs on workers, and helpers to call them (no ansible imports).

They run as `python3 -c <program>` over the task's existing SSH connection (no module transfer), with
the request as JSON on stdin and a single JSON object on stdout. Python >= 3.6, stdlib only.

Worker layout (as maand): /opt/worker/<bucket_id>/
    worker.json         bucket_id, worker host, labels, update_seq
    jobs.json           jobs allocated on this worker, with a disabled flag
    jobs/<job>/         the job tree (rsync'd); data/, logs/, bin/ inside it belong to the worker
    deploy/<job>.json   the promoted state of this allocation: content hash, per-file digests,
                        version, running flag, update_seq (written only after the lifecycle succeeded)
"""

from __future__ import annotations

import json
import shlex

WORKER_ROOT = "/opt/worker"
KEEP = ("data", "logs")

READ_PROGRAM = r'''
import json, os, sys
root = sys.argv[1]
out = {"exists": os.path.isdir(root), "worker": None, "jobs": None, "deployed": {}, "trees": [], "bad": []}
def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError):
        return None
    except ValueError:
        out["bad"].append(path)
        return None
if out["exists"]:
    out["worker"] = load(os.path.join(root, "worker.json"))
    out["jobs"] = load(os.path.join(root, "jobs.json"))
    try:
        names = sorted(os.listdir(os.path.join(root, "deploy")))
    except OSError:
        names = []
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            rec = load(os.path.join(root, "deploy", name))
            if isinstance(rec, dict):
                out["deployed"][name[:-5]] = rec
    try:
        out["trees"] = sorted(n for n in os.listdir(os.path.join(root, "jobs"))
                              if os.path.isdir(os.path.join(root, "jobs", n)))
    except OSError:
        pass
sys.stdout.write(json.dumps(out))
'''

APPLY_PROGRAM = r'''
import json, os, shutil, subprocess, sys, tempfile
req = json.loads(sys.stdin.read())
root, op = req["root"], req["op"]
KEEP = set(req.get("keep") or ("data", "logs"))
res = {"ok": True, "changed": False, "steps": []}

def done():
    sys.stdout.write(json.dumps(res))
    sys.exit(0)

def fail(msg, **kw):
    res.update(ok=False, msg=msg, **kw)
    done()

def atomic(path, data):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    res["changed"] = True

def has_makefile(folder):
    return any(os.path.isfile(os.path.join(folder, m)) for m in ("GNUmakefile", "makefile", "Makefile"))

def make(folder, target, env, label):
    if not os.path.isdir(folder):
        fail("%s: job folder %s is missing on the worker" % (label, folder))
    if not has_makefile(folder):
        fail("%s: no Makefile in %s; every job needs a Makefile with start/stop/restart targets" % (label, folder),
             reason="no_makefile")
    full = dict(os.environ)
    full.update(env or {})
    try:
        proc = subprocess.Popen(["make", target], cwd=folder, env=full, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        fail("%s: cannot run make on the worker (%s); install make" % (label, exc))
    try:
        data, _ = proc.communicate(timeout=req.get("timeout") or None)
    except subprocess.TimeoutExpired:
        proc.kill()
        data, _ = proc.communicate()
        text = data.decode("utf-8", "replace")
        fail("%s: make %s timed out after %ss" % (label, target, req.get("timeout")),
             rc=-1, output_tail=text.splitlines()[-int(req.get("tail") or 20):])
    text = data.decode("utf-8", "replace")
    tail = text.splitlines()[-int(req.get("tail") or 20):]
    res["changed"] = True
    res["steps"].append("make %s" % target)
    res["output_tail"] = tail
    if proc.returncode != 0:
        if ("No rule to make target '%s'" % target) in text or ("No rule to make target `%s'" % target) in text:
            fail("%s: the Makefile has no '%s' target; add one (maand calls start, stop, restart and reload)"
                 % (label, target), rc=proc.returncode, output_tail=tail, reason="missing_target")
        fail("%s: make %s failed (rc=%d)" % (label, target, proc.returncode), rc=proc.returncode, output_tail=tail)
    res["rc"] = 0

def clean_job(folder):
    """Delete a deployed job tree except its data/ and logs/ folders."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    for name in sorted(os.listdir(folder)):
        if name in KEEP:
            continue
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        res["changed"] = True
    try:
        os.rmdir(folder)
    except OSError:
        pass

kind = op["kind"]
job = op.get("job")
label = "%s@%s" % (job, op.get("host")) if job else "worker %s" % op.get("host")
jobdir = os.path.join(root, "jobs", job) if job else None
state = os.path.join(root, "deploy", "%s.json" % job) if job else None
try:
    if kind == "meta":
        atomic(os.path.join(root, "worker.json"), json.dumps(op["worker_json"], indent=2, sort_keys=True) + "\n")
        atomic(os.path.join(root, "jobs.json"), json.dumps(op["jobs_json"], indent=2, sort_keys=True) + "\n")
        for sub in ("jobs", "deploy"):
            if not os.path.isdir(os.path.join(root, sub)):
                os.makedirs(os.path.join(root, sub))
    elif kind in ("run", "stop"):
        if op.get("target"):
            make(jobdir, op["target"], op.get("env"), label)
        if op.get("promote_now") and op.get("record") is not None:
            atomic(state, json.dumps(op["record"], sort_keys=True))
            res["steps"].append("promote")
    elif kind == "promote":
        atomic(state, json.dumps(op["record"], sort_keys=True))
        res["steps"].append("promote")
    elif kind == "remove":
        if op.get("target") and os.path.isdir(jobdir) and has_makefile(jobdir):
            make(jobdir, op["target"], op.get("env"), label)
        clean_job(jobdir)
        if os.path.exists(state):
            os.unlink(state)
            res["changed"] = True
        res["steps"].append("remove")
    elif kind == "purge":
        if os.path.isdir(root):
            jobs = os.path.join(root, "jobs")
            if os.path.isdir(jobs):
                for name in sorted(os.listdir(jobs)):
                    clean_job(os.path.join(jobs, name))
            for name in sorted(os.listdir(root)):
                if name == "jobs":
                    continue
                path = os.path.join(root, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                res["changed"] = True
            for folder in (jobs, root):
                try:
                    os.rmdir(folder)
                    res["changed"] = True
                except OSError:
                    pass
        res["steps"].append("purge")
    else:
        fail("unknown deploy operation %r" % kind)
except (IOError, OSError) as exc:
    fail("%s: %s failed on the worker: %s" % (label, kind, exc))
done()
'''


def worker_root(bucket_id):
    return "%s/%s" % (WORKER_ROOT, bucket_id)


def interpreter(task_vars):
    """The worker's python: an explicit ansible_python_interpreter path, else python3 from PATH."""
    value = (task_vars or {}).get("ansible_python_interpreter")
    if isinstance(value, str) and value.startswith("/") and "{" not in value:
        return value
    return "python3"


def read_command(python, bucket_id):
    return "%s -c %s %s" % (shlex.quote(python), shlex.quote(READ_PROGRAM), shlex.quote(worker_root(bucket_id)))


def apply_command(python):
    return "%s -c %s" % (shlex.quote(python), shlex.quote(APPLY_PROGRAM))


def apply_request(bucket_id, op, timeout=None, tail=20):
    return json.dumps({"root": worker_root(bucket_id), "op": op, "keep": list(KEEP), "timeout": timeout, "tail": tail})


def parse_output(stdout, stderr, rc, what):
    """Parse a program's JSON answer; (data, None) or (None, error message)."""
    text = (stdout or "").strip()
    if rc == 0 and text:
        try:
            data = json.loads(text.splitlines()[-1])
            if isinstance(data, dict):
                return data, None
        except ValueError:
            pass
    err = (stderr or "").strip().splitlines()[-5:]
    hint = ""
    if rc == 127 or "python3: not found" in (stderr or "") or "No such file" in (stderr or ""):
        hint = " (is python3 installed on the worker?)"
    return None, "%s: unexpected answer from the worker (rc=%s)%s: %s" % (what, rc, hint, " | ".join(err) or text[-300:])

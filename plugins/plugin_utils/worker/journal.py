# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The worker agent's journal: each step of a deploy run applied at most once (stdlib only).

A step request that carries the run's ``run_id`` and its ``step`` is answered once: the answer is kept in
/opt/worker/.maand/journal/<bucket_id>/<run_id>/<step>.json (beside the agent's files, outside the bucket's
folder, which a purge empties), and the same request sent again (a relaunched slice of a sliced run,
deploy/slices.py) gets that answer back with ``"replayed": true`` while nothing runs. A request sent while the
first is still applied (its controller died, the worker's agent did not) waits for it on the entry's lock. A new
run of the bucket drops the journal of the runs before it (one deploy of a bucket runs at a time: the deploy lock).

This file runs on the workers beside the agent (Python >= 3.6, no third-party imports, no Ansible imports): the
deploy installs it as /opt/worker/.maand/journal-<sha12>.py next to agent-<sha12>.py (deploy/remote.py), and
agent.py loads it from there; the controller's unit tests import it as the collection's module.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import json
import os
import re
import shutil
import tempfile

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def entry_for(request):
    """The journal file of a step request, or None: a request without a run_id and step (maand.core.status, a
    controller before the journal) or with names that cannot be file names is applied as it comes."""
    run_id, step = request.get("run_id"), request.get("step")
    step = str(step) if isinstance(step, int) and not isinstance(step, bool) else step
    if not all(isinstance(v, str) and NAME.fullmatch(v) for v in (run_id, step)):
        return None
    return os.path.join(folder_of(request["root"]), run_id, step + ".json")


def folder_of(root):
    """The journal folder of the bucket whose worker folder is root (/opt/worker/<bucket_id>)."""
    root = os.path.abspath(root)
    return os.path.join(os.path.dirname(root), ".maand", "journal", os.path.basename(root))


def once(request, apply):
    """apply(request)'s answer, or the answer the journal kept for this request's run and step."""
    entry = entry_for(request)
    if entry is None:
        return apply(request)
    with _locked(entry):
        done = _read(entry)
        if done is not None:
            return dict(done, replayed=True)
        answer = apply(request)
        _write(entry, json.dumps(answer))
    prune(request["root"], request["run_id"])
    return answer


@contextlib.contextmanager
def _locked(entry):
    os.makedirs(os.path.dirname(entry), exist_ok=True)  # another request of the run may make it at the same time
    with open(entry[:-len(".json")] + ".lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read(entry):
    try:
        with open(entry) as handle:
            answer = json.load(handle)
    except (OSError, ValueError):  # not answered yet (never torn: _write renames a whole file into place)
        return None
    return answer if isinstance(answer, dict) else None


def _write(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # never written or gone: the error that brought us here is raised
            os.unlink(tmp)
        raise


def prune(root, run_id):
    """Drop the journal of every other run of the bucket."""
    folder = folder_of(root)
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        if name != run_id:
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the controller calls the worker agent (_worker_agent.py) over SSH (no Ansible imports).

The agent file is installed once per worker and version (content-addressed name) by the state
read that starts every deploy, in the same round trip:

    test -f P || { mkdir -p D && cat > P.tmp && mv P.tmp P; }; exec python3 P read <root>

with the agent's source on stdin. Later calls run `python3 P` with a JSON request on stdin; exit
status 86 means the file is gone (reinstall and retry).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex

from ..worker import layout as _layout
from ..worker import agent as _worker_agent

WORKER_ROOT = _layout.WORKER_ROOT
AGENT_DIR = _layout.AGENT_DIR
KEEP = _worker_agent.KEEP
MISSING_AGENT_RC = 86

_SOURCE = None


def agent_source():
    """The agent's source (bytes), read once from this collection."""
    global _SOURCE
    if _SOURCE is None:
        path = os.path.splitext(_worker_agent.__file__)[0] + ".py"
        with open(path, "rb") as handle:
            _SOURCE = handle.read()
    return _SOURCE


def agent_path():
    return "%s/agent-%s.py" % (AGENT_DIR, hashlib.sha256(agent_source()).hexdigest()[:12])


def worker_root(bucket_id):
    return _layout.bucket_root(bucket_id)


def interpreter(task_vars, host=None, configured=None):
    """The worker's python: an explicit ansible_python_interpreter path, else Ansible's configured
    interpreter_python when it is a path (ansible.cfg or ANSIBLE_PYTHON_INTERPRETER), else python3
    from PATH (`auto` discovery is not run: it costs a round trip per host).

    host: a delegated host (its own variables win); configured: the INTERPRETER_PYTHON setting."""
    task_vars = task_vars or {}
    value = None
    if host is not None:
        value = ((task_vars.get("ansible_delegated_vars") or {}).get(host) or {}).get("ansible_python_interpreter")
    if value is None:
        value = task_vars.get("ansible_python_interpreter")
    if value is None:
        value = configured
    if isinstance(value, str) and value.startswith("/") and "{" not in value:
        return value
    return "python3"


def install_prefix():
    path = agent_path()
    return "test -f {p} || {{ mkdir -p {d} && cat > {p}.$$ && mv -f {p}.$$ {p}; }}; ".format(
        p=shlex.quote(path), d=shlex.quote(AGENT_DIR))


def read_command(python, bucket_id):
    """Install the agent if needed and read the worker's state of bucket_id (stdin: agent_source())."""
    return "%sexec %s %s read %s" % (install_prefix(), shlex.quote(python), shlex.quote(agent_path()),
                                     shlex.quote(worker_root(bucket_id)))


def read_command_no_install(python, bucket_id):
    """Check mode: run the agent from stdin (`python3 - read <root>`), writing nothing on the worker."""
    return "exec %s - read %s" % (shlex.quote(python), shlex.quote(worker_root(bucket_id)))


def files_command(python, bucket_id, wanted):
    """--diff: the promoted text of some files ({job: [rel]}), run from stdin (agent_source()) like the
    check-mode read, so nothing is written on the worker."""
    request = json.dumps(wanted, sort_keys=True)
    return "exec %s - files %s %s" % (shlex.quote(python), shlex.quote(worker_root(bucket_id)), shlex.quote(request))


def install_command():
    return install_prefix() + "true"


def step_command(python):
    """Run one step request (stdin: the JSON request); rc 86 when the agent file is missing."""
    path = shlex.quote(agent_path())
    return "test -f %s || exit %d; exec %s %s" % (path, MISSING_AGENT_RC, shlex.quote(python), path)


def step_request(bucket_id, ops=(), promote=(), timeout=None, tail=20, slots=1):
    """slots: how many run ops of different jobs the agent runs side by side (docs/jobspec.md)."""
    return json.dumps({"root": worker_root(bucket_id), "keep": list(KEEP), "timeout": timeout, "tail": tail,
                       "slots": slots, "ops": list(ops), "promote": list(promote)})


def parse_output(stdout, stderr, rc, what):
    """Parse the agent's JSON answer; (data, None) or (None, error message)."""
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

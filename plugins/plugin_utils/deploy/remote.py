# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the controller calls the worker agent (worker/agent.py) over SSH (no Ansible imports).

The agent, its sandbox (worker/sandbox.py: how a make target runs), the error family's base the sandbox
derives (errors/__init__.py) and its journal (worker/journal.py: each step of a run applied once) are installed
once per worker and version (content-addressed names, agent-<sha12>.py, sandbox-<sha12>.py, errors-<sha12>.py,
journal-<sha12>.py) by the state read that starts every deploy, in the same round trip:

    [ "$(sha256sum P S E J | cut -c1-64)" = "$(printf '%s\n%s\n%s\n%s' SHA SHA2 SHA3 SHA4)" ] ||
      { mkdir -p D && chmod go-w D && sh -s; }; exec python3 P read <root>

with the install on stdin (`install_payload`), read only when the check fails: a shell script that writes
each file as a quoted here-document beside its name and renames it into place. Later calls run `python3 P`
with a JSON request on stdin, after the same check of the four files' content (the whole sha256, not only
the name or that a file exists: the agent runs as root); exit status 86 means a file is gone or not this
collection's (reinstall and retry).

A step whose worker receives files folds its agent call into its (last) rsync: the rsync's remote
command is the agent (`sync_step_path`), which reads the step request that precedes rsync's stream on
stdin (`request_header`), runs rsync's receiver, then the step, and writes its answer to stderr
(`parse_folded`): one SSH session for the files and the step.

The round trips themselves go through a ``Shell`` (the action's connection, or a fake in tests):
``call_agent`` (a step request, reinstalling a missing agent), ``read_state``, ``read_files``.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shlex
from typing import Protocol

from .. import errors
from ..worker import layout
from ..worker import agent
from ..worker import journal
from ..worker import sandbox

WORKER_ROOT = layout.WORKER_ROOT
AGENT_DIR = layout.AGENT_DIR
KEEP = agent.KEEP
MISSING_AGENT_RC = 86

_SOURCES = {}
_DIGESTS = {}


def _source(module):
    """A shipped module's source (bytes), read once from this collection."""
    if module.__name__ not in _SOURCES:
        with open(os.path.splitext(module.__file__)[0] + ".py", "rb") as handle:
            _SOURCES[module.__name__] = handle.read()
    return _SOURCES[module.__name__]


def _digest(module):
    """sha256 (hex) of a shipped module's source, once per process as the source is read once."""
    if module.__name__ not in _DIGESTS:
        _DIGESTS[module.__name__] = hashlib.sha256(_source(module)).hexdigest()
    return _DIGESTS[module.__name__]


class Shell(Protocol):
    """One command on a worker: what an action's connection gives the core (MaandAction.exec)."""

    def exec(self, cmd: str, stdin: bytes | str | None = None) -> tuple[int | None, str, str]:
        """(rc, stdout, stderr) of cmd run on the worker (with sudo when the play becomes), stdin on its stdin."""


def agent_source():
    """The agent's source (bytes): what the install writes to agent_path(), and the program of `python3 -`."""
    return _source(agent)


def sandbox_source():
    """The sandbox's source (bytes), installed beside the agent (install_prefix)."""
    return _source(sandbox)


def companion_source(role):
    """The source (bytes) of the file installed beside the agent for role (sandbox, errors, journal)."""
    return _source(dict(_companions())[role])


def agent_sha256():
    return _digest(agent)


def sandbox_sha256():
    return _digest(sandbox)


def errors_source():
    """The error family's base (bytes), installed beside the agent: the sandbox's OpFailed derives it."""
    return _source(errors)


def _companions():
    """(role, module) of the files installed beside the agent, in install order (the agent last, after them)."""
    return (("sandbox", sandbox), ("errors", errors), ("journal", journal))


def _version():
    """The sha12 of the four files in every name: a change to any of them is a new agent."""
    digests = agent_sha256() + "".join(_digest(module) for dummy, module in _companions())
    return hashlib.sha256(digests.encode()).hexdigest()[:12]


def agent_ok(path=None):
    """Shell test: the agent file and the files beside it (sandbox, errors, journal) hold exactly this collection's
    (one sha256sum of the four, coreutils or busybox; a missing file leaves its line out)."""
    path = path or agent_path()
    files = [path] + [companion_path(role, path) for role, dummy in _companions()]
    digests = [agent_sha256()] + [_digest(module) for dummy, module in _companions()]
    return '[ "$(sha256sum %s 2>/dev/null | cut -c1-64)" = "$(printf \'%s\' %s)" ]' % (
        " ".join(shlex.quote(f) for f in files), "\\n".join(["%s"] * len(files)), " ".join(digests))


def agent_path():
    return "%s/agent-%s.py" % (AGENT_DIR, _version())


def companion_path(role, agent_file=None):
    """<role>-<sha12>.py beside the agent (agent.py loads it from there, by its own file name)."""
    folder, name = posixpath.split(agent_file or agent_path())
    return posixpath.join(folder, name.replace("agent", role, 1))


def sandbox_path(agent_file=None):
    return companion_path("sandbox", agent_file)


def errors_path(agent_file=None):
    """errors-<sha12>.py beside the agent (agent.py loads it, as maand_errors, before the sandbox)."""
    return companion_path("errors", agent_file)


def worker_root(bucket_id):
    return layout.bucket_root(bucket_id)


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


# The here-documents' delimiters of install_payload (never a line of the file they end: test_deploy_remote)
_ENDS = {"sandbox": "MAAND_SANDBOX", "errors": "MAAND_ERRORS", "journal": "MAAND_JOURNAL", "agent": "MAAND_AGENT"}


def install_payload():
    """What an install runs (`sh -s`, on stdin, read only when the check fails): each of the sandbox, the
    errors file, the journal and the agent written as a quoted here-document beside its name, then renamed into
    place."""
    path = agent_path()
    out = [b"set -e\n"]
    files = [(role, companion_path(role, path), _source(module)) for role, module in _companions()]
    for role, target, body in files + [("agent", path, agent_source())]:
        target = shlex.quote(target)
        out += [("cat > %s.$$ <<'%s'\n" % (target, _ENDS[role])).encode(), body,
                ("%s\nmv -f %s.$$ %s\n" % (_ENDS[role], target, target)).encode()]
    return b"".join(out)


def install_prefix():
    """Install the agent and the files beside it (install_payload, on stdin) unless all are in place."""
    return "{ok} || {{ mkdir -p {d} && chmod go-w {d} && sh -s; }}; ".format(ok=agent_ok(), d=shlex.quote(AGENT_DIR))


def read_command(python, bucket_id, status=False):
    """Install the agent if needed and read the worker's state of bucket_id (stdin: install_payload()); status:
    also `make status` of the running jobs (agent.read_statuses)."""
    return "%sexec %s %s read %s%s" % (install_prefix(), shlex.quote(python), shlex.quote(agent_path()),
                                       shlex.quote(worker_root(bucket_id)), " status" if status else "")


def read_command_no_install(python, bucket_id, status=False):
    """Check mode: run the agent from stdin (`python3 - read <root>`), writing nothing on the worker; with
    status, the installed agent when it is this collection's (it has the sandbox that runs make status)."""
    read = "exec %s - read %s" % (shlex.quote(python), shlex.quote(worker_root(bucket_id)))
    if not status:
        return read
    return "if %s; then exec %s %s read %s status; fi; %s" % (
        agent_ok(), shlex.quote(python), shlex.quote(agent_path()), shlex.quote(worker_root(bucket_id)), read)


def files_command(python, bucket_id, wanted):
    """--diff: the promoted text of some files ({job: [rel]}), run from stdin (agent_source()) like the
    check-mode read, so nothing is written on the worker."""
    request = json.dumps(wanted, sort_keys=True)
    return "exec %s - files %s %s" % (shlex.quote(python), shlex.quote(worker_root(bucket_id)), shlex.quote(request))


def install_command():
    """Install the agent and the files beside it unless all are in place (stdin: install_payload())."""
    return install_prefix() + "true"


def step_command(python):
    """Run one step request (stdin: the JSON request); rc 86 when the agent file is missing or not the agent."""
    path = shlex.quote(agent_path())
    return "%s || exit %d; exec %s %s" % (agent_ok(), MISSING_AGENT_RC, shlex.quote(python), path)


def sync_step_path(python, dest, sudo=False):
    """The --rsync-path of a step's last rsync that also applies the step, in the same SSH session: make the
    destination, check the agent (exit 86 when it is missing: nothing was synced) and let the agent run
    rsync's receiver, then the step (`agent.py sync rsync --server ...`; rsync appends its arguments)."""
    inner = 'mkdir -p %s && { %s || exit %d; } && exec %s %s sync rsync "$@"' % (
        shlex.quote(dest), agent_ok(), MISSING_AGENT_RC, shlex.quote(python), shlex.quote(agent_path()))
    return "%ssh -c %s maand-agent" % ("sudo " if sudo else "", shlex.quote(inner))


def request_header(data):
    """What precedes rsync's stream on the agent's stdin in a folded step (agent.read_request)."""
    body = data.encode("utf-8") if isinstance(data, str) else data
    return agent.REQUEST_HEADER + str(len(body)).encode() + b"\n" + body


def parse_folded(stderr):
    """(synced, answer line or None) from the stderr of a folded step's rsync: synced = the agent saw the
    receiver succeed and started the step (so it must not be run again)."""
    synced, answer = False, None
    for line in (stderr or "").splitlines():
        if line == agent.SYNCED_MARK:
            synced = True
        elif line.startswith(agent.ANSWER_MARK):
            answer = line[len(agent.ANSWER_MARK):]
    return synced, answer


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
        except ValueError:  # not JSON: the error below quotes what the worker printed instead
            pass
    err = (stderr or "").strip().splitlines()[-5:]
    hint = ""
    if rc == 127 or "python3: not found" in (stderr or "") or "No such file" in (stderr or ""):
        hint = " (is python3 installed on the worker?)"
    return None, "%s: unexpected answer from the worker (rc=%s)%s: %s" % (what, rc, hint, " | ".join(err) or text[-300:])


def call_agent(shell: Shell, python: str, data: str) -> tuple[int | None, str, str]:
    """One round trip to the worker agent (request ``data`` on its stdin): (rc, stdout, stderr). On first
    contact (rc MISSING_AGENT_RC: the file is gone or not this agent) the agent is installed, then the request
    is sent again."""
    rc, stdout, stderr = shell.exec(step_command(python), data)
    if rc == MISSING_AGENT_RC:
        shell.exec(install_command(), install_payload())
        rc, stdout, stderr = shell.exec(step_command(python), data)
    return rc, stdout, stderr


def read_state(shell: Shell, python: str, bucket_id: str, check_mode: bool = False,
               status: bool = False) -> tuple[dict | None, str | None]:
    """(state, None) or (None, error): the worker's deploy state of bucket_id in one round trip, installing the
    agent on the way (check mode: run from stdin, nothing written on the worker); status: with the running
    check of the jobs a deploy started (the deploy's read)."""
    if check_mode:
        rc, stdout, stderr = shell.exec(read_command_no_install(python, bucket_id, status), agent_source())
    else:
        rc, stdout, stderr = shell.exec(read_command(python, bucket_id, status), install_payload())
    return parse_output(stdout, stderr, rc, "reading %s" % worker_root(bucket_id))


def read_files(shell: Shell, python: str, bucket_id: str, wanted: dict) -> tuple[dict | None, str | None]:
    """(answer, None) or (None, error): --diff's promoted files of a worker (files_command), one round trip."""
    rc, stdout, stderr = shell.exec(files_command(python, bucket_id, wanted), agent_source())
    return parse_output(stdout, stderr, rc, "reading the promoted files")

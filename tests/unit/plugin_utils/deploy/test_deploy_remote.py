"""How the controller calls the worker agent: the shell commands, run locally against temp trees."""

from __future__ import annotations

import json
import subprocess

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent


BODIES = (_remote.sandbox_source(), _remote.errors_source(), _remote.companion_source("journal"), _remote.agent_source())


def sh(cmd, data, env_root):
    # the commands (and an install's script, outside the files it writes as they are) use /opt/worker paths: run
    # them with the paths pointed at a temp folder
    def moved(text):
        return text.replace(_remote.AGENT_DIR, str(env_root / ".maand")).replace(_remote.WORKER_ROOT, str(env_root))
    if isinstance(data, bytes) and data == _remote.install_payload():
        for i, body in enumerate(BODIES):
            data = data.replace(body, b"\0%d\0" % i)
        data = moved(data.decode()).encode()
        for i, body in enumerate(BODIES):
            data = data.replace(b"\0%d\0" % i, body)
    return subprocess.run(["/bin/sh", "-c", moved(cmd)], input=data, capture_output=True, check=False)


def installed(env_root):
    """The agent and the sandbox beside it, as the install names them under env_root/.maand."""
    return (env_root / ".maand" / _remote.agent_path().rsplit("/", 1)[1],
            env_root / ".maand" / _remote.sandbox_path().rsplit("/", 1)[1])


def test_read_command_installs_the_agent_once_and_reads(tmp_path):
    (tmp_path / "bid" / "deploy").mkdir(parents=True)
    (tmp_path / "bid" / "deploy" / "api.json").write_text('{"format": 1}')
    proc = sh(_remote.read_command("python3", "bid"), _remote.install_payload(), tmp_path)
    data, err = _remote.parse_output(proc.stdout.decode(), proc.stderr.decode(), proc.returncode, "read")
    assert err is None and data["deployed"] == {"api": {"format": 1}}
    agent, sandbox = installed(tmp_path)
    assert agent.read_bytes() == _remote.agent_source() and sandbox.read_bytes() == _remote.sandbox_source()
    errors = tmp_path / ".maand" / _remote.errors_path().rsplit("/", 1)[1]
    assert errors.read_bytes() == _remote.errors_source() and errors.name.startswith("errors-")
    proc = sh(_remote.read_command("python3", "bid"), b"garbage that must not be installed", tmp_path)
    assert proc.returncode == 0 and agent.read_bytes() == _remote.agent_source()
    assert sandbox.read_bytes() == _remote.sandbox_source()


def test_read_without_install_writes_nothing(tmp_path):
    proc = sh(_remote.read_command_no_install("python3", "bid"), _remote.agent_source(), tmp_path)
    assert json.loads(proc.stdout)["exists"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_step_command_reports_a_missing_agent_then_runs_it(tmp_path):
    req = _remote.step_request("bid", [{"id": "meta@h", "kind": "meta", "host": "h", "worker_json": {"a": 1}, "jobs_json": {}}])
    assert json.loads(req)["root"] == "/opt/worker/bid"
    req = req.replace("/opt/worker/bid", str(tmp_path / "bid"))
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == _remote.MISSING_AGENT_RC
    assert sh(_remote.install_command(), _remote.install_payload(), tmp_path).returncode == 0
    proc = sh(_remote.step_command("python3"), req.encode(), tmp_path)
    data, err = _remote.parse_output(proc.stdout.decode(), "", proc.returncode, "step")
    assert err is None and data["ops"][0]["ok"]
    assert json.loads((tmp_path / "bid" / "worker.json").read_text()) == {"a": 1}


def test_a_tampered_agent_file_is_never_run_and_is_replaced(tmp_path):
    """Issue 21: the agent runs as root; a file at its content-addressed name is checked by its whole sha256."""
    req = _remote.step_request("bid", [{"id": "meta@h", "kind": "meta", "host": "h", "worker_json": {"a": 1}, "jobs_json": {}}])
    req = req.replace("/opt/worker/bid", str(tmp_path / "bid"))
    planted = tmp_path / ".maand" / _remote.agent_path().rsplit("/", 1)[1]
    planted.parent.mkdir(mode=0o777)
    marker = tmp_path / "ran"
    planted.write_text("open(%r, 'w').write('planted code ran')\n" % str(marker))
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == _remote.MISSING_AGENT_RC
    assert not marker.exists()
    proc = sh(_remote.read_command("python3", "bid"), _remote.install_payload(), tmp_path)  # reinstalls, then runs the agent
    assert proc.returncode == 0 and planted.read_bytes() == _remote.agent_source() and not marker.exists()
    assert not planted.parent.stat().st_mode & 0o022  # the agent's folder: no group/world write
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == 0


def test_agent_path_is_content_addressed():
    assert _remote.agent_path().startswith(_remote.AGENT_DIR + "/agent-") and len(_remote.agent_path().rsplit("-", 1)[1]) == len("0123456789ab.py")
    # the sandbox beside it carries the same sha12: one version of the pair
    assert _remote.sandbox_path() == _remote.agent_path().replace("/agent-", "/sandbox-")


def test_the_install_sends_the_files_on_stdin_not_in_the_command():
    """The command stays short (the check, then `sh -s` only when it fails, the agent's call); the three files ride
    on stdin as quoted here-documents whose delimiters are no line of them."""
    cmd = _remote.read_command("python3", "bid")
    assert len(cmd) < 1000 and "sh -s" in cmd, len(cmd)
    payload = _remote.install_payload()
    for body, end in zip(BODIES, ("MAAND_SANDBOX", "MAAND_ERRORS", "MAAND_JOURNAL", "MAAND_AGENT")):
        assert body[:200] not in cmd.encode() and payload.count(body) == 1
        assert body.endswith(b"\n") and end.encode() not in body.splitlines()
        assert (body + end.encode() + b"\n") in payload


@pytest.mark.parametrize("role", ["sandbox", "errors", "journal"])
def test_a_missing_or_tampered_sandbox_is_never_run_and_is_replaced(tmp_path, role):
    """The agent loads its sandbox and the errors file (run as root) from beside itself: the same whole-sha256
    check covers them."""
    req = _remote.step_request("bid", [{"id": "meta@h", "kind": "meta", "host": "h", "worker_json": {"a": 1}, "jobs_json": {}}])
    req = req.replace("/opt/worker/bid", str(tmp_path / "bid"))
    assert sh(_remote.install_command(), _remote.install_payload(), tmp_path).returncode == 0
    agent, sandbox = installed(tmp_path)
    expected = _remote.companion_source(role)
    sandbox = sandbox.with_name(sandbox.name.replace("sandbox", role, 1))
    sandbox.unlink()
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == _remote.MISSING_AGENT_RC
    marker = tmp_path / "ran"
    sandbox.write_text("open(%r, 'w').write('planted code ran')\n" % str(marker))
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == _remote.MISSING_AGENT_RC
    assert not marker.exists() and not (tmp_path / "bid" / "worker.json").exists()
    assert sh(_remote.install_command(), _remote.install_payload(), tmp_path).returncode == 0
    assert sandbox.read_bytes() == expected and agent.read_bytes() == _remote.agent_source()
    assert sh(_remote.step_command("python3"), req.encode(), tmp_path).returncode == 0 and not marker.exists()


def start_with_the_installed_agent(tmp_path, makefile):
    """Install the agent and its sandbox in tmp_path, then run job api's `make start` (from makefile) through the
    step command: (the job's folder, the process, the parsed output, its error)."""
    job = tmp_path / "bid" / "jobs" / "api"
    job.mkdir(parents=True)
    (job / "Makefile").write_text(makefile)
    req = _remote.step_request("bid", [{"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "start",
                                        "env": {}, "promote_now": False, "record": None}])
    req = req.replace("/opt/worker/bid", str(tmp_path / "bid"))
    assert sh(_remote.install_command(), _remote.install_payload(), tmp_path).returncode == 0
    proc = sh(_remote.step_command("python3"), req.encode(), tmp_path)
    data, err = _remote.parse_output(proc.stdout.decode(), proc.stderr.decode(), proc.returncode, "step")
    return job, proc, data, err


def test_the_installed_agent_runs_make_with_the_sandbox_beside_it(tmp_path):
    job, dummy, data, err = start_with_the_installed_agent(tmp_path, "start:\n\t@echo started > out\n")
    assert err is None and data["ops"][0]["ok"], data
    assert (job / "out").read_text() == "started\n"


def test_a_failing_target_is_an_outcome_of_the_installed_sandbox_and_its_errors_file(tmp_path):
    """The sandbox's OpFailed derives the error family's base installed beside it (errors-<sha12>.py): a failing
    make target on the worker is the op's failed outcome, not a traceback."""
    dummy, proc, data, err = start_with_the_installed_agent(tmp_path, "start:\n\t@echo broken; exit 3\n")
    assert err is None and not data["ops"][0]["ok"], (data, proc.stderr)
    assert "start" in data["ops"][0]["msg"] and "broken" in " ".join(data["ops"][0].get("output_tail") or []), data


def test_the_agent_from_stdin_reads_but_runs_no_step(tmp_path):
    """`python3 -` (check mode, --diff) has the agent alone: it reads, and refuses a step (no sandbox beside it,
    and never one of the working folder's)."""
    job = tmp_path / "bid" / "jobs" / "api"
    job.mkdir(parents=True)
    (job / "Makefile").write_text("start:\n\t@echo started > out\n")
    (tmp_path / "sandbox.py").write_text("raise SystemExit('a sandbox.py in the working folder ran')\n")
    (tmp_path / "sandbox-x.py").write_text("raise SystemExit('a sandbox in the working folder ran')\n")
    # as `python3 -` runs it (__file__ "<stdin>"), with the step request on stdin (a real `python3 -` has
    # consumed stdin as its program: the request cannot even arrive)
    driver = ("import sys; sys.argv = ['-']; exec(compile(open(%r).read(), '<stdin>', 'exec'), "
              "{'__name__': '__main__', '__file__': '<stdin>', '__package__': None})" % _agent.__file__)
    req = _remote.step_request("bid", [{"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "start",
                                        "env": {}, "promote_now": False, "record": None}])
    req = req.replace("/opt/worker/bid", str(tmp_path / "bid"))
    proc = subprocess.run(["python3", "-c", driver], input=req.encode(), capture_output=True, check=False,
                          cwd=str(tmp_path))
    assert json.loads(proc.stdout) == {"ok": False, "msg": "a step needs the installed agent and its sandbox "
                                                           "(from stdin: read and files only)"}, proc.stderr
    assert not (job / "out").exists()
    proc = subprocess.run(["python3", "-", "read", str(tmp_path / "bid")], input=_remote.agent_source(),
                          capture_output=True, check=False, cwd=str(tmp_path))
    assert proc.returncode == 0 and json.loads(proc.stdout)["trees"] == ["api"], proc.stderr


def test_interpreter_prefers_delegated_host_vars():
    tv = {"ansible_python_interpreter": "/usr/bin/python3",
          "ansible_delegated_vars": {"w2": {"ansible_python_interpreter": "/opt/py/bin/python3"}}}
    assert _remote.interpreter(tv) == "/usr/bin/python3"
    assert _remote.interpreter(tv, "w2") == "/opt/py/bin/python3"
    assert _remote.interpreter({"ansible_python_interpreter": "{{ x }}"}) == "python3"


def test_parse_output_explains_a_missing_python():
    data, err = _remote.parse_output("", "sh: 1: python3: not found", 127, "reading")
    assert data is None and "python3 installed" in err
    data, err = _remote.parse_output("not json", "", 0, "reading")
    assert data is None and "unexpected answer" in err


def test_interpreter_falls_back_to_the_configured_interpreter_path():
    # ANSIBLE_PYTHON_INTERPRETER / ansible.cfg interpreter_python reach the action as `configured`
    assert _remote.interpreter({}, configured="/usr/bin/python3") == "/usr/bin/python3"
    assert _remote.interpreter({}, "w2", "/usr/bin/python3") == "/usr/bin/python3"
    assert _remote.interpreter({"ansible_python_interpreter": "/opt/py/bin/python3"}, configured="/usr/bin/python3") == "/opt/py/bin/python3"
    assert _remote.interpreter({}, configured="auto_silent") == "python3"  # discovery is not run
    assert _remote.interpreter({}) == "python3"


def _fake_ssh(tmp_path):
    """An rsync -e that runs the remote command here (drops the host), like ssh would on the worker."""
    path = tmp_path / "fake-ssh"
    path.write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    path.chmod(0o755)
    return str(path)


def _folded(tmp_path, ops, python="python3"):
    """One folded step against tmp_path (the worker's /opt/worker): (rc, stdout, stderr, argv)."""
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import rsync as _rsync
    bucket = tmp_path / "bucket"
    (bucket / "workspace" / "jobs" / "api").mkdir(parents=True)
    (bucket / "workspace" / "jobs" / "api" / "Makefile").write_text("start:\n\ttrue\n")
    root = tmp_path / "bid"
    syncs = [{"id": "api@h", "job": "api", "src": "workspace/jobs/api", "sync": True}]
    (ids, argv), = _rsync.commands(str(bucket), syncs, str(root), "h", _fake_ssh(tmp_path))
    path = _remote.sync_step_path(python, _rsync.destination(argv)).replace(_remote.AGENT_DIR, str(tmp_path / ".maand"))
    argv = _rsync.with_rsync_path(argv, path)
    req = _remote.step_request("bid", ops).replace("/opt/worker/bid", str(root))
    rc, out, err = _rsync.run_with_request(argv, _remote.request_header(req))
    return rc, out, err, argv


META = [{"id": "meta@h", "kind": "meta", "host": "h", "worker_json": {"secret": "s3cr3t"}, "jobs_json": {}}]


def test_a_folded_step_syncs_then_applies_in_one_remote_command(tmp_path):
    assert sh(_remote.install_command(), _remote.install_payload(), tmp_path).returncode == 0
    rc, out, err, argv = _folded(tmp_path, META)
    synced, line = _remote.parse_folded(err)
    data, problem = _remote.parse_output(line, err, rc, "step")
    assert rc == 0 and synced and problem is None and [(o["id"], o["ok"]) for o in data["ops"]] == [("meta@h", True)]
    assert (tmp_path / "bid" / "jobs" / "api" / "Makefile").is_file() and "api/Makefile" in out
    assert json.loads((tmp_path / "bid" / "worker.json").read_text()) == {"secret": "s3cr3t"}
    assert "s3cr3t" not in " ".join(argv)  # the request travels on stdin, never in a command line


def test_a_folded_step_without_the_agent_syncs_nothing_and_runs_nothing(tmp_path):
    rc, out, err, argv = _folded(tmp_path, META)
    assert rc != 0 and _remote.parse_folded(err) == (False, None)  # the caller falls back to rsync + agent call
    assert not (tmp_path / "bid" / "worker.json").exists() and not (tmp_path / "bid" / "jobs" / "api").exists()

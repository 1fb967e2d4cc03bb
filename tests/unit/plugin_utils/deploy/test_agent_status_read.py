"""The deploy's state read with the running check (deploy/remote.read_command*, status=True), as shell commands
run locally against temp trees: the installed agent asks `make status` of a job a deploy started; in check mode
the installed agent does it too, and a worker without it (run from stdin, no sandbox) reports no status."""

from __future__ import annotations

import json

from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
from tests.unit.plugin_utils.deploy.test_deploy_remote import sh

MAKEFILE = "start:\n\ttouch data/up\nstatus:\n\t@test -f data/up\n"


def _started(tmp_path):
    job = tmp_path / "bid" / "jobs" / "api"
    (job / "data").mkdir(parents=True)
    (job / "Makefile").write_text(MAKEFILE)
    op = {"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "start", "promote_now": True,
          "env": {}, "record": {"format": 1, "job": "api", "running": True}}
    assert _agent.run_step({"root": str(tmp_path / "bid"), "timeout": 30, "ops": [op]})["ops"][0]["ok"]
    (job / "data" / "up").unlink()  # the job died


def _read(cmd, tmp_path, stdin=None):
    proc = sh(cmd, stdin or _remote.agent_source(), tmp_path)
    data, err = _remote.parse_output(proc.stdout.decode(), proc.stderr.decode(), proc.returncode, "read")
    assert err is None, err
    return data


def test_check_mode_without_the_installed_agent_reports_no_status_and_writes_nothing(tmp_path):
    _started(tmp_path)
    data = _read(_remote.read_command_no_install("python3", "bid", status=True), tmp_path)
    assert "status" not in data and data["deployed"]["api"]["running"] is True
    assert not (tmp_path / ".maand").exists()


def test_the_installed_agent_asks_make_status_in_a_deploy_and_in_check_mode(tmp_path):
    _started(tmp_path)
    assert "status" not in _read(_remote.read_command("python3", "bid"), tmp_path,  # installs; a plain read
                                 _remote.install_payload())
    for cmd, stdin in ((_remote.read_command("python3", "bid", status=True), _remote.install_payload()),
                       (_remote.read_command_no_install("python3", "bid", status=True), None)):
        data = _read(cmd, tmp_path, stdin)
        assert (data["status"]["api"]["running"], data["status"]["api"]["rc"]) == (False, 2), json.dumps(data)

"""ssh health probes (maand: "one shell line on the worker over SSH", exit 0 = healthy): the ssh argv from the
run's connection settings, and the probe's outcome. The remote command really runs (locally, by sh)."""

from __future__ import annotations

import subprocess

from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import gate as _gate

CONN = {"address": "10.0.0.7", "port": 2222, "user": "agent", "key": "/b/secrets/worker.key",
        "options": ["-o", "ControlPath=/tmp/cp-%C", "-o", "ControlMaster=auto"], "sudo": False}


def local_ssh(argv, **kw):
    """Runs the remote part of an ssh argv with sh on this machine (what the worker would do)."""
    assert argv[0] == "ssh"
    kw.pop("check", None)
    return subprocess.run(["sh", "-c", argv[-1]], check=False, **kw)


def test_ssh_argv_uses_the_run_connection_settings_first():
    argv = health.ssh_argv(CONN, 7)
    assert argv[:5] == ["ssh", "-o", "ControlPath=/tmp/cp-%C", "-o", "ControlMaster=auto"]
    assert argv[argv.index("-i") + 1] == "/b/secrets/worker.key" and argv[argv.index("-p") + 1] == "2222"
    assert "ConnectTimeout=7" in argv and "BatchMode=yes" in argv
    assert argv[-1] == "agent@10.0.0.7"
    assert health.ssh_argv({"address": "h"})[-1] == "h"


def test_ssh_remote_quotes_the_command_and_honours_sudo():
    assert health.ssh_remote("test -f '/x y'") == "sh -c 'test -f '\"'\"'/x y'\"'\"''"
    assert health.ssh_remote("true", sudo=True).startswith("sudo -n sh -c ")


def test_ssh_probe_exit_zero_is_healthy(tmp_path):
    marker = tmp_path / "ran"
    assert health.ssh_probe(CONN, "touch %s && test -f %s" % (marker, marker), 5, local_ssh) is None
    assert marker.exists()


def test_ssh_probe_failure_names_the_exit_code_and_output():
    err = health.ssh_probe(CONN, "echo not ready >&2; exit 3", 5, local_ssh)
    assert err.startswith("ssh 10.0.0.7: ") and "exited 3" in err and "not ready" in err


def test_ssh_probe_connection_failure_is_named():
    def unreachable(argv, **kw):
        return subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host 10.0.0.7 port 2222: Connection refused")
    assert "cannot connect" in health.ssh_probe(CONN, "true", 5, unreachable)


def test_gate_runs_ssh_probes_with_the_connection_of_each_host():
    calls = []

    def conns_once():
        calls.append(1)
        return {"w1": dict(CONN, address="10.0.0.1")}

    def local_ssh_of_w1(argv, **kw):
        assert argv[argv.index("-p") + 1] == "2222" and argv[-2] == "agent@10.0.0.1"  # w1's own settings
        return local_ssh(argv, **kw)

    probe_fn = health.prober(conns_once, ssh_run=local_ssh_of_w1)  # as deploy/callbacks.StepCallbacks builds it
    gate = {"job": "api", "hosts": ["w1"], "checks": [{"type": "ssh", "command": "exit 1"}], "attempts": 2,
            "interval_seconds": 0, "timeout_seconds": 1}
    problems = _gate.run_gate(gate, {"w1": "10.0.0.1"}, sleep=lambda s: None, probe_fn=probe_fn)
    assert problems == ["w1: ssh 10.0.0.1: 'exit 1' exited 1"]
    assert _gate.run_gate(dict(gate, checks=[{"type": "ssh", "command": "true"}]), {"w1": "10.0.0.1"},
                          sleep=lambda s: None, probe_fn=probe_fn) == []
    assert calls == [1]  # connection settings computed once, when the first ssh probe runs


def test_describe():
    assert health.describe({"type": "tcp", "port": 1}) == "tcp :1"
    assert health.describe({"type": "http", "port": 2, "path": "/h", "scheme": "https"}) == "https :2/h"
    assert health.describe({"type": "ssh", "command": "systemctl is-active x"}) == "ssh 'systemctl is-active x'"

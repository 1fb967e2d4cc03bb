"""ops/job_target.py (maand.core.job's make target, the deploy_job action's core) over a fake shell: what is
refused before anything runs, check mode, the op the agent gets, its answer as the task's result."""

from __future__ import annotations

import json

from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote
from ansible_collections.maand.core.plugins.plugin_utils.ops import job_target


class AgentShell:
    """A worker whose agent answers every step request with `answer`; the requests it got are kept."""

    def __init__(self, answer=None, rc=0):
        self.answer, self.rc, self.requests = answer, rc, []

    def exec(self, cmd, stdin=None):
        assert cmd == remote.step_command("python3")
        self.requests.append(json.loads(stdin))
        return self.rc, json.dumps(self.answer) if self.answer is not None else "", "boom\n"


def request(**kw):
    return job_target.TargetRequest("bid", "api", kw.pop("target", "restart"), "h1", "1.2.0", **kw)


def test_an_unsafe_target_or_an_unknown_variable_is_refused_before_anything_runs(monkeypatch):
    shell = AgentShell()
    out = job_target.run(request(target="-rf"), shell)
    assert out["failed"] and out["msg"].startswith("target '-rf' is not a safe Makefile target name")
    assert out["msg"].endswith("; nothing was run")
    monkeypatch.delenv("DB_URL", raising=False)
    spec = {"environment": [{"vars": {"DB": "$env{DB_URL}"}, "extend": True}]}
    out = job_target.run(request(spec=spec, check_mode=True), shell)
    assert out["failed"] and "DB_URL" in out["msg"] and out["msg"].endswith("; nothing was run")
    assert shell.requests == []


def test_check_mode_runs_only_status():
    shell = AgentShell({"ok": True, "ops": [{"id": "api@h1", "ok": True, "output_tail": ["running"]}]})
    assert job_target.run(request(check_mode=True), shell) == {
        "changed": True, "skipped": False, "msg": "check mode: would run make restart"}
    out = job_target.run(request(target="status", check_mode=True), shell)
    assert out == {"changed": False, "output": ["running"], "target": "status", "msg": "running"}


def test_the_op_carries_the_allocation_environment_and_the_spec_s_run_fields(monkeypatch):
    monkeypatch.setenv("DB_URL", "postgres://db")
    spec = {"environment": [{"vars": {"DB": "$env{DB_URL}"}, "extend": True}], "working_directory": "bin",
            "timeout": 9}
    shell = AgentShell({"ok": True, "ops": [{"id": "api@h1", "ok": True, "changed": True}]})
    out = job_target.run(request(spec=spec, timeout=60, tail=7), shell)
    assert out == {"changed": True, "output": [], "target": "restart", "msg": "make restart ok"}
    sent = shell.requests[0]
    assert (sent["root"], sent["timeout"], sent["tail"]) == ("/opt/worker/bid", 60, 7)
    op, = sent["ops"]
    assert op["env"] == {"DB": "postgres://db", "CURRENT_VERSION": "1.2.0", "NEW_VERSION": "1.2.0"}
    assert (op["id"], op["kind"], op["target"], op["cwd"], op["timeout"]) == ("api@h1", "run", "restart", "bin", 9)


def test_a_failed_target_fails_the_task_with_its_output_tail():
    shell = AgentShell({"ok": True, "ops": [{"id": "api@h1", "ok": False, "rc": 2, "msg": "make restart failed",
                                             "output_tail": ["no such unit"]}]})
    out = job_target.run(request(), shell)
    assert out["failed"] and out["rc"] == 2
    assert out["msg"] == "make restart failed\n--- last lines of output ---\nno such unit"
    out = job_target.run(request(), AgentShell(rc=1))
    assert out["failed"] and out["msg"].startswith("make restart for api@h1: unexpected answer from the worker (rc=1)")


def test_the_allocation_environment_needs_a_built_catalog(tmp_path):
    versions = {"CURRENT_VERSION": "1.0.0", "NEW_VERSION": "1.0.0"}
    assert job_target.allocation_env("", "api", "h1", "1.0.0") == (versions, None)
    env, err = job_target.allocation_env(str(tmp_path), "api", "h1", "1.0.0")
    assert env is None and err == "%s/data/catalog.json does not exist: run maand.core.build first" % tmp_path
    out = job_target.run(request(bucket=str(tmp_path)), AgentShell())
    assert out == {"failed": True, "msg": err + "; nothing was run"}

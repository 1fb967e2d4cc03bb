"""The controller actions of the deploy fail the task (and so the run) on any error of a step."""

from __future__ import annotations

import os
from types import SimpleNamespace
from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.action import deploy_finish, deploy_step
from ansible_collections.maand.core.plugins.plugin_utils.adapter import controller as _controller
from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run
from tests.unit.plugin_utils.deploy.test_run_state import PLAN


def action(cls, args, check_mode=False):
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, diff=False, action="x",
                           resolved_action="maand.core.x", environment=[], no_log=False, delegate_to=None)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    return cls(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "data").mkdir()
    return _run.new_run(str(tmp_path), PLAN)


def test_step_action_plans_a_step(run_dir):
    res = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0}).run(task_vars={"hostvars": {}})
    assert not res.get("failed") and res["hosts"] == ["h1"]


def test_step_action_turns_a_broken_run_into_failed(run_dir, tmp_path):
    res = action(deploy_step.ActionModule, {"run_dir": str(tmp_path / "gone"), "step": 0}).run(task_vars={})
    assert res["failed"] and "plan.json is missing" in res["msg"]


def test_an_unexpected_exception_in_a_step_propagates(run_dir):
    # Ansible turns an exception of an action into a failed task: it must not be swallowed here
    act = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0})
    with mock.patch.object(_run, "advance", side_effect=RuntimeError("injected")):
        with pytest.raises(RuntimeError, match="injected"):
            act.run(task_vars={})


def test_a_step_whose_gates_meet_an_unsafe_control_folder_fails_with_its_path_and_fix(run_dir, tmp_path):
    # the run's ssh multiplexing folder (a name in the shared temp folder) is a link: a failed task, no traceback
    os.symlink(tmp_path, tmp_path / "planted")
    act = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0})
    with mock.patch.object(_run, "advance", side_effect=lambda *a, **k: storage.own_private_dir(str(tmp_path / "planted"))):
        res = act.run(task_vars={})
    assert res["failed"] and res["msg"].startswith("%s is a symbolic link: " % (tmp_path / "planted")), res
    assert "rm -rf %s" % (tmp_path / "planted") in res["msg"]


def test_finish_refuses_an_incomplete_run(run_dir, tmp_path):
    deploy_step_act = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0})
    assert not deploy_step_act.run(task_vars={}).get("failed")
    res = action(deploy_finish.ActionModule, {"bucket": str(tmp_path), "plan": PLAN, "run_dir": run_dir,
                                              "release": False}).run(task_vars={})
    assert res["failed"] and "stopped before step(s)" in res["msg"] and "meta@h1" in res["msg"]


def test_finish_fails_when_the_run_state_is_unreadable(run_dir, tmp_path):
    res = action(deploy_finish.ActionModule, {"bucket": str(tmp_path), "plan": PLAN, "run_dir": str(tmp_path / "gone"),
                                              "release": False}).run(task_vars={})
    assert res["failed"] and "outcome is unknown" in res["msg"]


def test_finish_in_check_mode_reports_the_plan_only(tmp_path):
    plan = dict(PLAN, steps=[])
    res = action(deploy_finish.ActionModule, {"bucket": str(tmp_path), "plan": plan, "run_dir": ""},
                 check_mode=True).run(task_vars={})
    assert not res.get("failed") and res["msg"].startswith("deploy plan (check mode)")


def test_state_read_of_a_vanished_worker_is_a_state_not_a_failed_task():
    from ansible.errors import AnsibleConnectionFailure
    from ansible_collections.maand.core.plugins.action import deploy_state
    act = action(deploy_state.ActionModule, {"bucket_id": "b1"})
    with mock.patch.object(deploy_state.ActionModule, "_low_level_execute_command",
                           side_effect=AnsibleConnectionFailure("ssh: connect to host h1 port 22: No route to host")):
        res = act.run(task_vars={"inventory_hostname": "h1"})
    assert not res.get("failed") and not res.get("unreachable"), res
    assert res["state"] == {"reachable": False, "error": "AnsibleConnectionFailure: ssh: connect to host h1 port 22: "
                                                         "No route to host"}
    assert "cannot read the deploy state of h1" in res["warnings"][0]
    state = _controller.worker_state({"h1": {"deploy_state_read": res}}, "h1", "deploy_state_read")
    assert state == {"reachable": False, "error": res["state"]["error"]}


def test_state_read_of_a_broken_agent_answer_is_unreachable():
    from ansible_collections.maand.core.plugins.action import deploy_state
    act = action(deploy_state.ActionModule, {"bucket_id": "b1"})
    with mock.patch.object(deploy_state.ActionModule, "_low_level_execute_command",
                           return_value={"rc": 1, "stdout": "", "stderr": "python3: not found"}):
        res = act.run(task_vars={"inventory_hostname": "h1"})
    assert not res.get("failed") and res["state"]["reachable"] is False, res
    assert "python3: not found" in res["state"]["error"], res


def test_state_read_of_a_good_worker_is_reachable():
    import json as _json
    from ansible_collections.maand.core.plugins.action import deploy_state
    act = action(deploy_state.ActionModule, {"bucket_id": "b1"})
    answer = {"exists": True, "worker": None, "jobs": None, "deployed": {}, "trees": [], "pending": [], "bad": [],
              "others": []}
    with mock.patch.object(deploy_state.ActionModule, "_low_level_execute_command",
                           return_value={"rc": 0, "stdout": _json.dumps(answer), "stderr": ""}):
        res = act.run(task_vars={"inventory_hostname": "h1"})
    assert not res.get("failed") and res["state"]["reachable"] is True, res
    assert _controller.worker_state({"h1": {"deploy_state_read": res}}, "h1", "deploy_state_read")["exists"] is True


def test_a_crashing_finish_fails_the_run_and_still_releases_the_lock(run_dir, tmp_path, monkeypatch):
    from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
    assert not action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0}).run(task_vars={}).get("failed")
    monkeypatch.setenv(_run.FAULT_ENV, "finish")
    released = []
    monkeypatch.setattr(_locks, "release", lambda bucket, pid: released.append(bucket))
    res = action(deploy_finish.ActionModule, {"bucket": str(tmp_path), "plan": PLAN, "run_dir": run_dir}).run(
        task_vars={})
    assert res["failed"] and "the deploy finish step crashed" in res["msg"] and "InjectedFault" in res["msg"], res
    assert released == [str(tmp_path)]
    assert os.path.isdir(run_dir)  # kept for inspection


def test_finish_returns_the_verdict_and_writes_the_table_to_the_screen(tmp_path, monkeypatch):
    from tests.unit.plugin_utils.deploy.test_deploy_run import answer_all
    steps = [dict(step, gates=[]) for step in PLAN["steps"]]  # no probes here: gates are test_deploy_progress's
    rows = [{"job": "api", "worker": h, "action": "start", "from_version": None, "to_version": "1.0.0"}
            for h in ("h1", "h2")]
    rows.append({"job": "web", "worker": "h3", "action": "skip", "from_version": "1.0.0", "to_version": "1.0.0"})
    plan = dict(PLAN, steps=steps, rows=rows)
    (tmp_path / "data").mkdir()
    run_dir = _run.new_run(str(tmp_path), plan)
    for seg in _run.segments(plan, 3):
        res = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": seg["step"]}).run(task_vars={})
        assert not res.get("failed"), res
        answer_all(run_dir, _run.step_key(seg["step"]), res["hosts"])
    shown = []
    monkeypatch.setattr(_controller.display, "display", lambda msg, **kw: shown.append(msg))
    res = action(deploy_finish.ActionModule, {"bucket": str(tmp_path), "plan": plan, "run_dir": run_dir,
                                              "release": False}).run(task_vars={})
    assert not res.get("failed"), res
    assert [(v["job"], v["worker"], v["result"]) for v in res["verdict"]] == [
        ("api", "h1", "started"), ("api", "h2", "started"), ("web", "h3", "unchanged")]
    assert res["verdict_line"] == "deploy done: 2 started, 1 unchanged"
    assert res["workers"] == {"h1": "ok", "h2": "ok", "h3": "ok"}
    assert shown[0].split() == ["JOB", "WORKER", "ACTION", "RESULT", "GATE", "VERSION"]  # default callback
    assert shown[-2:] == ["workers: 3 ok", "deploy done: 2 started, 1 unchanged"]


def agent_request(tmp_path, ops):
    """A run folder with h1's request of step 1; the deploy_agent task's arguments."""
    import json as _json
    run_dir = tmp_path / "data" / "run"
    path = _run.request_path(str(run_dir), 1, "h1")
    os.makedirs(os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as handle:
        _json.dump({"host": "h1", "ops": ops, "promote": [], "bucket_id": "b1", "step": 1}, handle)
    return {"bucket": str(tmp_path), "run_dir": str(run_dir), "step": 1, "host": "h1"}


def test_the_agent_action_needs_the_ssh_connection_to_sync_and_says_so(tmp_path):
    from ansible_collections.maand.core.plugins.action import deploy_agent
    args = agent_request(tmp_path, [{"id": "api@h1", "kind": "files", "job": "api", "host": "h1", "sync": True,
                                     "src": "workspace/jobs/api"}])
    act = action(deploy_agent.ActionModule, args)
    act._connection.transport = "local"
    res = act.run(task_vars={})
    assert not res.get("failed") and res["msg"] == (
        "no answer from h1: AnsibleError: maand.core.deploy_agent needs the ssh connection plugin (got local)"), res
    assert _run.read_results(args["run_dir"], 1, ["h1"])[1]["h1"].startswith("AnsibleError: ")


def test_the_agent_action_is_the_transport_of_the_step(tmp_path):
    """Ansible's ssh command and the host's address reach the rsync, become makes it sudo; the agent's answer
    of the folded rsync is the task's."""
    import json as _json
    from ansible_collections.maand.core.plugins.action import deploy_agent
    from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
    (tmp_path / "workspace" / "jobs" / "api").mkdir(parents=True)
    args = agent_request(tmp_path, [{"id": "api@h1", "kind": "start", "job": "api", "host": "h1", "sync": True,
                                     "src": "workspace/jobs/api"}])
    act = action(deploy_agent.ActionModule, args)
    conn = act._connection
    conn.transport = "ssh"
    conn._build_command.return_value = ["ssh", "-o", "ControlPath=/cp/%C"]
    conn.get_option.side_effect = {"password": None, "ssh_executable": None, "host": "10.0.0.9"}.get
    act._play_context.become = True
    rsyncs = []
    answer = {"ok": True, "ops": [{"id": "api@h1", "ok": True, "changed": True}], "promotions": []}

    def rsync(argv, stdin=None, timeout=None):
        rsyncs.append(argv)
        return 0, "", "%s\n%s%s\n" % (_agent.SYNCED_MARK, _agent.ANSWER_MARK, _json.dumps(answer))
    with mock.patch.object(deploy_agent.ActionModule, "rsync", staticmethod(rsync)):
        res = act.run(task_vars={})
    assert not res.get("failed") and res["ops"] == ["api@h1"] and res["msg"] == "ok" and res["changed"], res
    argv, = rsyncs
    assert argv[argv.index("-e") + 1] == "ssh -o ControlPath=/cp/%C" and argv[-1] == "10.0.0.9:/opt/worker/b1/jobs/"
    assert [a for a in argv if a.startswith("--rsync-path=")][0].startswith("--rsync-path=sudo sh -c ")

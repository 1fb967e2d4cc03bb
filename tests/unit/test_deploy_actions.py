"""The controller actions of the deploy fail the task (and so the run) on any error of a step."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.action import deploy_finish, deploy_step
from ansible_collections.maand.core.plugins.plugin_utils import _deploy_run as DR
from tests.unit.test_run_state import PLAN


def action(cls, args, check_mode=False):
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, diff=False, action="x",
                           resolved_action="maand.core.x", environment=[], no_log=False, delegate_to=None)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    return cls(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "data").mkdir()
    return DR.new_run(str(tmp_path), PLAN)


def test_step_action_plans_a_step(run_dir):
    res = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0}).run(task_vars={"hostvars": {}})
    assert not res.get("failed") and res["hosts"] == ["h1"]


def test_step_action_turns_a_broken_run_into_failed(run_dir, tmp_path):
    res = action(deploy_step.ActionModule, {"run_dir": str(tmp_path / "gone"), "step": 0}).run(task_vars={})
    assert res["failed"] and "plan.json is missing" in res["msg"]


def test_an_unexpected_exception_in_a_step_propagates(run_dir):
    # Ansible turns an exception of an action into a failed task: it must not be swallowed here
    act = action(deploy_step.ActionModule, {"run_dir": run_dir, "step": 0})
    with mock.patch.object(DR, "advance", side_effect=RuntimeError("injected")):
        with pytest.raises(RuntimeError, match="injected"):
            act.run(task_vars={})


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

"""maand.core.gc's commit step prints its summary on success too (Ansible shows a task's msg only when it fails)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.action import gc
from tests.unit.plugins.test_deploy_actions import action

PLAN = {"bucket_id": "b1", "retain_days": 0, "cutoff": 0, "paths": [],
        "rows": [{"table": "departed", "key": "10.0.0.2", "reason": "departed worker, cleaned"}],
        "namespaces": [{"namespace": "maand/worker/10.0.0.2", "keys": ["tags"], "reason": "departed worker"}]}


def commit(tmp_path, plan, check_mode=True):
    return action(gc.ActionModule, {"bucket": str(tmp_path), "step": "commit", "plan": plan},
                  check_mode=check_mode).run(task_vars={})


def test_a_check_run_prints_what_it_would_have_deleted(tmp_path, capsys):
    res = commit(tmp_path, PLAN)
    assert not res.get("failed") and not res["changed"]
    assert res["msg"] == "check mode: nothing was deleted (2 item(s) would be)"
    assert res["msg"] in capsys.readouterr().out.splitlines()


def test_a_run_with_problems_fails_with_the_summary_in_its_msg_only(tmp_path, capsys):
    res = commit(tmp_path, dict(PLAN, problems=["worker 10.0.0.2 could not be read"]))
    assert res["failed"] and res["msg"].startswith("check mode: nothing was deleted (2 item(s) would be), but gc met 1")
    assert "nothing was deleted" not in capsys.readouterr().out  # Ansible prints the msg of a failure itself

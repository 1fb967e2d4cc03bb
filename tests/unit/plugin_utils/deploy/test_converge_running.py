"""A deploy converges on running (deploy/reconcile.py over the state read's `status`): an unchanged active
allocation whose `make status` says not running is started again, in the job's start batches and gate, with the
reason `not running` in the plan and `was not running` in the verdict; a disabled allocation, a job_control job,
maand_sync_only and an unknown status change nothing."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan, view as _view
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, actions, catalog, content, job
from tests.unit.plugin_utils.deploy.test_deploy_plan_hooks import cmds

HOSTS = ["h1", "h2", "h3"]
GATED = {"checks": [{"type": "tcp", "port": "http"}]}


def _fleet(**kw):
    cat = catalog([job("api", ports={"http": 8080}, health_check=GATED, **kw)],
                  [("api", h, "active") for h in HOSTS])
    cont = content("api")
    return cat, cont, _settle(cat, cont, HOSTS)


def _dead(states, host, rc=2):
    states[host]["status"] = {"api": {"running": False, "rc": rc, "tail": ["api not running"]}}


def test_a_healthy_fleet_still_plans_no_change():
    cat, cont, states = _fleet()
    for h in HOSTS:
        states[h]["status"] = {"api": {"running": True}}
    plan = _plan.compute_plan(cat, cont, states, HOSTS)
    assert set(actions(plan).values()) == {"skip"} and not plan["steps"]


def test_a_killed_allocation_is_started_again_through_its_batches_and_gate():
    cat, cont, states = _fleet(max_concurrent_starts=1)
    _dead(states, "h2")
    _dead(states, "h3", rc=3)
    plan = _plan.compute_plan(cat, cont, states, HOSTS)
    assert actions(plan) == {("api", "h1"): "skip", ("api", "h2"): "start", ("api", "h3"): "start"}
    rows = {r["worker"]: r for r in plan["rows"]}
    assert rows["h2"]["reason"] == "not running (`make status` exit 2 on the worker)"
    assert rows["h3"]["reason"] == "not running (`make status` exit 3 on the worker)"
    assert [s["label"] for s in plan["steps"]] == ["wave 0: api start batch 1/2", "wave 0: api start batch 2/2"]
    ops = [o for s in plan["steps"] for ops in s["ops"].values() for o in ops if o["kind"] == "run"]
    assert [(o["host"], o["target"], o["sync"]) for o in ops] == [("h2", "start", False), ("h3", "start", False)]
    assert plan["steps"][-1]["gates"][0]["hosts"] == ["h2", "h3"]  # maand's one gate after the last start batch
    assert any("not running (`make status` exit 2 on the worker)" in line for line in plan["lines"])
    done = [{"id": "api@h2"}, {"id": "api@h3"}]
    table = _view.verdict_table(_view.verdict(plan, done, {}))
    assert [line.split() for line in table if " h2 " in line] == [
        ["api", "h2", "start", "started", "-", "1.0.0", "(was", "not", "running)"]]


def test_a_changed_allocation_that_died_is_started_with_its_new_files():
    cat, dummy, states = _fleet()
    _dead(states, "h1")
    plan = _plan.compute_plan(cat, content("api", files={"Makefile": "m2"}), states, HOSTS)
    rows = {r["worker"]: r for r in plan["rows"]}
    assert (rows["h1"]["action"], rows["h2"]["action"]) == ("start", "restart")
    assert rows["h1"]["reason"].startswith("not running (`make status` exit 2 on the worker); content changed")


def test_nothing_is_started_where_it_is_not_meant_to_run_or_cannot_tell():
    cat, cont, states = _fleet()
    states["h1"]["status"] = {"api": {"running": None, "note": "timed out"}}
    cat["allocations"][1]["state"] = "disabled"  # meant to be stopped: the plan stops it, nothing else
    _dead(states, "h2")
    plan = _plan.compute_plan(cat, cont, states, HOSTS)
    assert actions(plan) == {("api", "h1"): "skip", ("api", "h2"): "stop", ("api", "h3"): "skip"}
    _dead(states, "h3")
    plan = _plan.compute_plan(cat, cont, states, HOSTS, {"sync_only": True})
    assert actions(plan)[("api", "h3")] == "skip" and not plan["errors"]


def test_a_job_control_job_is_not_judged_by_its_makefile():
    cat = catalog([job("api", commands=cmds("job_control"))], [("api", h, "active") for h in HOSTS])
    cont = content("api")
    states = _settle(cat, cont, HOSTS)
    states["h1"]["status"] = {"api": {"running": False, "rc": 2}}
    assert set(actions(_plan.compute_plan(cat, cont, states, HOSTS)).values()) == {"skip"}

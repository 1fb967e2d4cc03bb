"""A rolling restart through the deploy engine (maand_rolling_target, what maand.core.job -e maand_target=restart
sets): every active allocation of the job runs the target on its promoted tree, in the job's upgrade batches and
health gate; nothing is shipped, no update_seq bump, disabled allocations and other workers are left alone."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, actions, catalog, content, job
from tests.unit.plugin_utils.deploy.test_deploy_plan_hooks import cmds

HOSTS = ["h1", "h2", "h3"]
GATED = {"checks": [{"type": "tcp", "port": "http"}]}


def _fleet(**kw):
    cat = catalog([job("api", ports={"http": 8080}, health_check=GATED, **kw), job("web")],
                  [(j, h, "active") for j in ("api", "web") for h in HOSTS])
    cont = content("api", "web")
    return cat, cont, _settle(cat, cont, HOSTS)


def _runs(plan):
    return [[(o["host"], o["target"], o["sync"]) for ops in s["ops"].values() for o in ops if o["kind"] == "run"]
            for s in plan["steps"]]


def test_a_rolling_restart_runs_the_target_batch_by_batch_behind_the_gate():
    cat, cont, states = _fleet(max_concurrent_upgrades=2)
    plan = _plan.compute_plan(cat, cont, states, HOSTS, {"jobs": ["api"], "target": "restart"})
    assert not plan["errors"]
    assert actions(plan) == {("api", h): "restart" for h in HOSTS}
    assert [s["label"] for s in plan["steps"]] == ["wave 0: api restart batch 1/2", "wave 0: api restart batch 2/2"]
    assert _runs(plan)[:2] == [[("h1", "restart", False), ("h2", "restart", False)], [("h3", "restart", False)]]
    assert [g["hosts"] for s in plan["steps"] for g in s["gates"]] == [["h1", "h2"], ["h3"]]
    assert plan["update_seq"] == plan["previous_update_seq"]  # nothing deployed: the workers' metadata stays
    op = plan["steps"][0]["ops"]["h1"][0]
    assert op["record"] == states["h1"]["deployed"]["api"]  # the gate promotes the same record
    assert (op["env"]["CURRENT_VERSION"], op["env"]["NEW_VERSION"]) == ("1.0.0", "1.0.0")
    assert plan["options"]["target"] == "restart"
    assert "options" in plan and "target" not in _plan.compute_plan(cat, cont, states, HOSTS)["options"]


def test_changes_are_not_shipped_and_the_plan_says_so():
    cat, dummy, states = _fleet()
    plan = _plan.compute_plan(cat, content("api", "web", files={"Makefile": "m2"}), states, HOSTS,
                              {"jobs": ["api"], "target": "reload"})
    assert set(actions(plan).values()) == {"reload"}
    assert all(not sync for step in _runs(plan) for dummy, dummy2, sync in step)
    assert ("note: job api: the workspace's changes are not shipped by maand_target=reload; deploy them with "
            "maand.core.deploy -e maand_jobs=api") in plan["lines"]


def test_disabled_and_unnamed_workers_are_left_alone():
    cat, cont, states = _fleet()
    cat["allocations"][0]["state"] = "disabled"  # api@h1
    options = {"jobs": ["api"], "target": "start", "target_workers": "h2"}
    plan = _plan.compute_plan(cat, cont, states, HOSTS, options)
    assert actions(plan) == {("api", "h1"): "skip", ("api", "h2"): "start", ("api", "h3"): "skip"}


def test_refusals_name_the_option():
    cat, cont, states = _fleet()
    for options, words in (({"target": "migrate"}, "is not one of start, restart, reload"),
                           ({"target": "restart", "force": True}, "cannot be combined with maand_force"),
                           ({"target": "restart", "target_workers": ["h9"]}, "maand_rolling_workers: unknown worker")):
        errors = _plan.compute_plan(cat, cont, states, HOSTS, dict(options, jobs=["api"]))["errors"]
        assert any(words in e for e in errors), errors
    cat = catalog([job("ctl", commands=cmds("job_control"))], [("ctl", "h1", "active")])
    states = _settle(cat, content("ctl"), ["h1"])
    errors = _plan.compute_plan(cat, content("ctl"), states, ["h1"], {"target": "restart"})["errors"]
    assert any("maand_job_all_at_once=true" in e for e in errors), errors

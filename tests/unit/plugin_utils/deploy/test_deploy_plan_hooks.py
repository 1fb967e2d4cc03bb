"""The deploy plan with job commands (issue 12): a job_control job's rollout is one batch whose ops
only sync files (never `make start`), a job with deploy hooks gets a gate on every batch carrying
the hook context (phase, batch index/count, order, last), and a rollout_order a hook put in the KV
orders the batches when it names exactly their allocations (maand deploy/ordering.go)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job, states

HOSTS = ["h1", "h2", "h3"]


def cmds(*events):
    return {"command_x": {"executed_on": list(events), "demands": {"job": "", "command": ""}}}


def wave_steps(plan):
    return [s for s in plan["steps"] if s["wave"] is not None]


def job_ops(step):
    """The step's ops of jobs (not the worker metadata that rides in the first step)."""
    return [o for ops in step["ops"].values() for o in ops if o["kind"] != "meta"]


def test_job_control_is_one_batch_that_only_syncs():
    cat = catalog([job("api", commands=cmds("job_control"), max_concurrent_starts=1)],
                  [("api", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("api"), states(HOSTS), HOSTS)
    steps = wave_steps(plan)
    assert [s["label"] for s in steps] == ["wave 0: api job_control"]  # max_concurrent_starts does not split it
    ops = job_ops(steps[0])
    assert len(ops) == 3 and {o["action"] for o in ops} == {"start"} and {o["target"] for o in ops} == {None}
    assert not any(o["promote_now"] for o in ops)  # promoted only after the command (and gate) passed
    gate = steps[0]["gates"][0]
    assert gate["checks"] == [] and sorted(gate["hosts"]) == HOSTS
    assert gate["hooks"] == {"job_control": True, "new": HOSTS, "updated": [], "last": True}


def test_job_control_update_lists_updated_allocations():
    cat = catalog([job("api", commands=cmds("job_control"))], [("api", h, "active") for h in HOSTS])
    st = _settle(cat, content("api"), HOSTS)
    plan = _plan.compute_plan(cat, content("api", files={"Makefile": "m2"}), st, HOSTS)
    gate = wave_steps(plan)[0]["gates"][0]
    assert gate["hooks"]["new"] == [] and gate["hooks"]["updated"] == HOSTS
    assert all(o["target"] is None for ops in wave_steps(plan)[0]["ops"].values() for o in ops)


def test_without_hooks_the_plan_is_unchanged():
    cat = catalog([job("api", commands=cmds("cli", "pre_deploy"), max_concurrent_starts=1)],
                  [("api", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("api"), states(HOSTS), HOSTS)
    assert [s["gates"] for s in wave_steps(plan)] == [[], [], []]
    runs = [o for s in wave_steps(plan) for o in job_ops(s) if o["kind"] == "run"]
    assert len(runs) == 3 and all(o["target"] == "start" and o["promote_now"] for o in runs)


def test_after_allocation_started_gets_a_gate_per_batch_with_its_context():
    cat = catalog([job("web", commands=cmds("after_allocation_started"), max_concurrent_starts=2)],
                  [("web", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("web"), states(HOSTS), HOSTS)
    gates = [s["gates"][0] for s in wave_steps(plan)]
    # maand's start semantics: the batch's hooks after every start batch, the probes and health_check
    # after the last one only, over every started allocation (the first batch's gate defers its promotion)
    assert [g["hosts"] for g in gates] == [["h1", "h2"], HOSTS]
    assert [g["hooks"] for g in gates] == [
        {"phase": "new", "batch_index": 0, "batch_count": 2, "order": HOSTS, "order_source": "default", "last": False,
         "health": False},
        {"phase": "new", "batch_index": 1, "batch_count": 2, "order": HOSTS, "order_source": "default", "last": True,
         "batch_hosts": ["h3"]}]
    assert gates[0]["checks"] == [] and gates[1]["checks"] == []  # no health_check in this job
    assert [o["held"] for o in job_ops(wave_steps(plan)[0])] == [True, True]  # promoted after the last gate


def test_rollout_order_from_the_kv_orders_the_batches():
    cat = catalog([job("web", commands=cmds("post_deploy"), max_concurrent_starts=1)],
                  [("web", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("web"), states(HOSTS), HOSTS, {"rollout_orders": {"web": "h3, h1,h2"}})
    assert [s["gates"][0]["hooks"].get("batch_hosts", s["gates"][0]["hosts"]) for s in wave_steps(plan)] == [
        ["h3"], ["h1"], ["h2"]]
    assert {s["gates"][0]["hooks"]["order_source"] for s in wave_steps(plan)} == {"kv"}
    # an order that does not name exactly the batch's allocations is ignored, with a note (maand logs it)
    bad = _plan.compute_plan(cat, content("web"), states(HOSTS), HOSTS, {"rollout_orders": {"web": "h3,h1"}})
    assert [s["gates"][0]["hooks"].get("batch_hosts", s["gates"][0]["hosts"]) for s in wave_steps(bad)] == [
        ["h1"], ["h2"], ["h3"]]
    assert any(line.startswith("note: job web: rollout_order 'h3,h1' ignored") for line in bad["lines"])
    dup = _plan.compute_plan(cat, content("web"), states(HOSTS), HOSTS, {"rollout_orders": {"web": "h1,h1,h2,h3"}})
    assert any("duplicate" in line for line in dup["lines"])


def test_a_failed_hook_gate_names_the_job_and_batch_not_a_health_gate():
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state
    cat = catalog([job("api", commands=cmds("job_control"))], [("api", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"])
    step = wave_steps(plan)[0]
    state = _run_state.new_state("r", plan)
    answers = {"h1": {"ok": True, "ops": [{"id": op["id"], "ok": True} for op in step["ops"]["h1"]]}}
    msg = "job api command command_x (event job_control) on h1 failed: exit status 3"
    state = _run_state.fold_step(state, step, answers, {"api": [msg]})
    assert state.failed_by_job["api"] == ["job api failed after wave 0: api job_control: " + msg]
    assert not state.pending  # not promoted

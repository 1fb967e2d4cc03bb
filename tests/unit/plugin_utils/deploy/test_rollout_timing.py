"""Issue 30 in the plan and the run state: auto_promote (the canaries first, then the rest in the same deploy),
min_healthy_time and progress_deadline in the plan's gates, and the progress_deadline clock of the run state
(when it starts, what restarts it, a batch without a gate of its own that overran it)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan, run_state as _run_state
from ansible_collections.maand.core.plugins.plugin_utils.deploy import view as _view
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job
from tests.unit.plugin_utils.deploy.test_rollout_semantics import answers_for, drive

HOSTS = ["h1", "h2", "h3"]
CHECKS = {"checks": [{"type": "tcp", "port": "http_port"}]}


def upgrade_plan(on_new=0, **api):
    """An upgrade 1.0.0 -> 1.1.0 of api on three workers (on_new of them already on 1.1.0)."""
    fields = dict({"version": "1.1.0", "max_concurrent_upgrades": 1, "ports": {"http_port": 30000},
                   "health_check": CHECKS}, **api)
    cat = catalog([job("api", **fields)], [("api", h, "active") for h in HOSTS])
    new = content("api", files={"Makefile": "m1", "conf/a.conf": "c2"})
    st = _settle(cat, content("api"), HOSTS)
    for h in HOSTS[on_new:]:
        st[h]["deployed"]["api"]["version"] = "1.0.0"
    for h in HOSTS[:on_new]:
        st[h]["deployed"]["api"] = _plan.state_record("api", "api-%s" % h, new["api"], "1.1.0", True, 1)
    return _plan.compute_plan(cat, new, st, HOSTS)


# --- auto_promote -------------------------------------------------------------------------------------

def test_auto_promote_rolls_the_canary_first_then_the_rest_in_the_same_deploy():
    plan = upgrade_plan(canary=1, auto_promote=True)
    assert [(r["worker"], r["action"], r.get("batch")) for r in plan["rows"]] == [
        ("h1", "restart", "api canary batch 1/1"), ("h2", "restart", "api upgrade batch 1/2"),
        ("h3", "restart", "api upgrade batch 2/2")]
    assert [s["label"] for s in plan["steps"]] == [
        "wave 0: api canary batch 1/1", "wave 0: api upgrade batch 1/2", "wave 0: api upgrade batch 2/2"]
    assert all(len(s["gates"]) == 1 for s in plan["steps"])  # every batch gated, the canary's first
    assert ("note: job api: canary 1, auto_promote: 1 canary allocation(s) first, then the other 2 in this deploy "
            "once the canaries passed their gate") in plan["lines"]
    assert next(r for r in plan["rows"] if r["worker"] == "h2")["reason"].endswith("; after the canary (auto_promote)")
    state, seen, gates = drive(plan)
    assert not _run_state.final_report(state, plan).failed
    assert {v.worker: v.result for v in _view.verdict(plan, state.done, state.failed_ops)} == {
        "h1": "restarted", "h2": "restarted", "h3": "restarted"}


def test_a_canary_that_fails_its_gate_stops_the_rest():
    plan = upgrade_plan(canary=1, auto_promote=True)
    state, seen, gates = drive(plan, gate=lambda step, g: ["h1: tcp h1:30000: refused"] if step["index"] == 0 else [])
    assert not any(i.startswith("api@") for dummy, reqs in seen[1:3] for ids in reqs.values() for i in ids)
    assert _run_state.final_report(state, plan).failed


def test_auto_promote_with_the_canary_already_on_the_new_version_rolls_the_rest():
    plan = upgrade_plan(on_new=1, canary=1, auto_promote=True)
    assert [(r["action"], r.get("batch")) for r in plan["rows"]] == [
        ("skip", None), ("restart", "api upgrade batch 1/2"), ("restart", "api upgrade batch 2/2")]


def test_without_auto_promote_the_canary_still_holds_the_rest():
    plan = upgrade_plan(canary=1)
    assert [r["action"] for r in plan["rows"]] == ["restart", "hold", "hold"]


# --- min_healthy_time and progress_deadline in the plan ----------------------------------------------

def test_the_timing_rides_in_every_gate_of_the_job_only_when_set():
    plan = upgrade_plan(min_healthy_time=5, progress_deadline=60)
    gates = [g for s in plan["steps"] for g in s["gates"]]
    assert {(g["min_healthy_time"], g["progress_deadline"]) for g in gates} == {(5, 60)}
    assert not any("min_healthy_time" in g or "progress_deadline" in g
                   for s in upgrade_plan()["steps"] for g in s["gates"])


# --- the progress_deadline clock of the run --------------------------------------------------------------

def test_the_clock_starts_with_the_jobs_first_batch_and_every_completed_batch_restarts_it():
    plan = upgrade_plan(progress_deadline=60)
    state = _run_state.new_state("r", plan)
    assert state.deadlines == {"api": 60} and state.progress_at == {}
    step = plan["steps"][0]
    _run_state.start_clocks(state, step, now=100.0)
    _run_state.start_clocks(state, step, now=130.0)  # started once
    assert state.progress_at == {"api": 100.0}
    assert [g["deadline_at"] for g in _run_state.gates_to_run(state, step)] == [160.0]
    requests = _run_state.requests_for_step(state, step)
    state, ok_ops = _run_state.fold_results(state, step, answers_for(requests))
    state = _run_state.fold_gates(state, step, ok_ops, {"api": []}, now=150.0)
    assert state.progress_at == {"api": 150.0}  # the batch passed: progress
    assert [g["deadline_at"] for g in _run_state.gates_to_run(state, plan["steps"][1])] == [210.0]


def test_a_batch_without_a_gate_of_its_own_that_overran_the_deadline_fails_the_job():
    cat = catalog([job("api", max_concurrent_starts=1, ports={"http_port": 30000}, health_check=CHECKS,
                       progress_deadline=30)], [("api", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("api"), {h: {"reachable": True, "deployed": {}} for h in HOSTS}, HOSTS)
    first = plan["steps"][0]
    assert first["gates"] == []  # maand: one gate after the last start batch
    state = _run_state.new_state("r", plan)
    _run_state.start_clocks(state, first, now=0.0)
    requests = _run_state.requests_for_step(state, first)
    state, ok_ops = _run_state.fold_results(state, first, answers_for(requests))
    state = _run_state.fold_gates(state, first, ok_ops, {}, now=45.0)
    assert state.failed_by_job["api"] == ["job api: progress_deadline 30 s passed: no progress for 45.0 s; it was "
                                          "waiting for the make targets of wave 0: api start batch 1/3"]
    assert "api" in state.blocked


def test_a_revert_gate_gets_its_whole_budget():
    plan = upgrade_plan(progress_deadline=60, auto_revert=True)
    state = _run_state.new_state("r", plan)
    _run_state.start_clocks(state, plan["steps"][0], now=0.0)
    requests = _run_state.requests_for_step(state, plan["steps"][0])
    state, ok_ops = _run_state.fold_results(state, plan["steps"][0], answers_for(requests))
    state = _run_state.fold_gates(state, plan["steps"][0], ok_ops, {"api": ["h1: refused"]}, now=10.0)
    step = plan["steps"][1]
    requests = _run_state.requests_for_step(state, step)
    state, ok_ops = _run_state.fold_results(state, step, answers_for(requests))
    gates = _run_state.gates_to_run(state, step)
    assert [g.get("revert_of") for g in gates] == [0] and "deadline_at" not in gates[0]


def test_a_gate_the_deadline_stopped_does_not_claim_its_whole_attempt_count():
    plan = upgrade_plan(progress_deadline=60)
    state = _run_state.new_state("r", plan)
    step = plan["steps"][0]
    requests = _run_state.requests_for_step(state, step)
    state, ok_ops = _run_state.fold_results(state, step, answers_for(requests))
    state = _run_state.fold_gates(state, step, ok_ops, {"api": [
        "progress_deadline 60 s passed: job api made no progress for 60.0 s; it was waiting for h1 tcp :30000 (x)",
        "h1: x"]})
    assert state.failed_by_job["api"] == ["health gate of job api failed after wave 0: api upgrade batch 1/3: "
                                          "progress_deadline 60 s passed: job api made no progress for 60.0 s; it "
                                          "was waiting for h1 tcp :30000 (x); h1: x"]

"""The controller's run folder and step driver (plugins/plugin_utils/deploy/run.py), and the step/finish
actions failing the run on any exception."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state
from tests.unit.plugin_utils.deploy.test_run_state import PLAN, ok_answer


def no_gates(gate):
    return []


class Callbacks:
    """run.Callbacks from plain functions (a deploy's own are deploy/callbacks.StepCallbacks)."""

    def __init__(self, gate=no_gates, after_results=None, before=None):
        self._gate, self._after, self._before = gate, after_results, before

    def gate(self, g):
        return self._gate(g)

    def after_results(self, step, ok_ops):
        return self._after(step, ok_ops) if self._after else []

    def before(self, plan, state, step):
        return self._before(plan, state, step) if self._before else ([], False)


def advance(run_dir, key, gate=no_gates, before=None):
    """One step task: the run read once (RunContext), then run.advance."""
    return _run.advance(_run.RunContext.read(run_dir), key, Callbacks(gate, before=before))


def finish(run_dir, gate=no_gates, before=None):
    return _run.finish(_run.RunContext.read(run_dir), Callbacks(gate, before=before))


@pytest.fixture
def bucket(tmp_path):
    (tmp_path / "data").mkdir()
    return tmp_path


def answer_all(run_dir, key, hosts, answer_for=None):
    for host in hosts:
        req = _run.read_request(run_dir, key, host)
        request = _run_state.AgentRequest(host=host, ops=req["ops"], promote=req["promote"])
        _run.write_result(run_dir, key, host, (answer_for or ok_answer)(request))


def drive(run_dir, plan, answer_for=None, gate=no_gates):
    for seg in _run.segments(plan, 4):
        key = _run.step_key(seg["step"])
        hosts, dummy = advance(run_dir, key, gate)
        answer_all(run_dir, key, hosts, answer_for)
    return finish(run_dir, gate)


def test_a_full_run_through_files_is_green_and_removes_earlier_runs(bucket):
    old = _run.new_run(str(bucket), PLAN, run_id="old")
    run_dir = _run.new_run(str(bucket), PLAN)
    assert not os.path.exists(old)
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}-%d-[0-9a-f]{6}" % os.getpid(), os.path.basename(run_dir)), run_dir
    plan, state, report = drive(run_dir, PLAN)
    assert not report.failed, report.problems
    # the last step has no gate: no final promote pass (finish folded step 3)
    assert state.steps_completed == [0, 1, 2, 3] and state.in_flight is None
    # api@h2 passed its gate in step 2: its promotion rides with step 3 although h2 has no op there
    req = json.loads(open(os.path.join(run_dir, "requests", "3", "h2.json")).read())
    assert req["ops"] == [] and [p["id"] for p in req["promote"]] == ["api@h2"]
    assert not os.path.exists(os.path.join(run_dir, "requests", "final"))


def test_a_gated_last_step_gets_the_final_promote_pass(bucket):
    gated = dict(PLAN, steps=PLAN["steps"][:3], job_waves={"api": 0, "db": 0})
    gated["rows"] = [r for r in PLAN["rows"] if r["job"] != "web"]
    assert [seg["step"] for seg in _run.segments(gated, 4)] == [0, 1, 2, _run.FINAL]
    run_dir = _run.new_run(str(bucket), gated)
    plan, state, report = drive(run_dir, gated)
    assert not report.failed, report.problems
    assert state.steps_completed == [0, 1, 2, _run.FINAL] and not state.pending
    # api@h2 passed the gate of the last step: promoted in the final pass, on h2 alone
    req = json.loads(open(os.path.join(run_dir, "requests", "final", "h2.json")).read())
    assert req["ops"] == [] and [p["id"] for p in req["promote"]] == ["api@h2"]
    assert os.listdir(os.path.join(run_dir, "requests", "final")) == ["h2.json"]


def test_a_run_that_skips_the_final_pass_of_a_gated_step_fails(bucket):
    """Finish folds the last step; a promotion still pending (its pass never ran) fails the run."""
    gated = dict(PLAN, steps=PLAN["steps"][:3], job_waves={"api": 0, "db": 0})
    run_dir = _run.new_run(str(bucket), gated)
    for key in (0, 1, 2):
        hosts, dummy = advance(run_dir, key, no_gates)
        answer_all(run_dir, key, hosts)
    dummy, dummy, report = finish(run_dir, no_gates)
    assert report.failed and any("not promoted: api@h2" in p for p in report.problems), report.problems


def test_missing_result_file_fails_that_hosts_ops(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)
    hosts, dummy = advance(run_dir, 1, no_gates)
    answer_all(run_dir, 1, [h for h in hosts if h != "h2"])
    hosts, failures = advance(run_dir, 2, no_gates)
    assert any("db@h2" in f and "agent task did not run" in f for f in failures)


def test_a_result_without_answer_keeps_its_reason(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)
    _run.write_result(run_dir, 0, "h1", None, "AnsibleConnectionFailure: host vanished")
    dummy, failures = advance(run_dir, 1, no_gates)
    assert "host vanished" in failures[0]


def test_gate_runner_sees_only_gates_of_successful_batches(bucket):
    seen = []
    run_dir = _run.new_run(str(bucket), PLAN)

    def gate(g):
        seen.append(g["job"])
        return ["down"]
    plan, state, report = drive(run_dir, PLAN, gate=gate)
    assert seen == ["api"] and report.failed and "web" in state.blocked


def test_an_interrupted_run_is_not_green(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)     # its agents never answer, later steps never run
    plan, state, report = finish(run_dir, no_gates)
    assert report.failed and any("stopped before step(s) 1, 2, 3" in p for p in report.problems)


def test_a_crashing_gate_propagates_and_leaves_the_step_unfolded(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)
    answer_all(run_dir, 0, ["h1"])
    hosts, dummy = advance(run_dir, 1, no_gates)
    answer_all(run_dir, 1, hosts)

    def boom(gate):
        raise RuntimeError("injected")
    with pytest.raises(RuntimeError):
        advance(run_dir, 2, boom)
    state = _run.load_state(run_dir)
    assert state.in_flight == 1 and 1 not in state.steps_completed
    assert finish(run_dir, no_gates)[2].failed


def test_steps_cannot_run_twice_or_out_of_plan(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)
    advance(run_dir, 1, no_gates)
    with pytest.raises(_run.RunError, match="already ran"):
        advance(run_dir, 0, no_gates)
    with pytest.raises(_run.RunError, match="not in the plan"):
        advance(run_dir, 42, no_gates)


def test_broken_or_missing_state_names_the_file(bucket):
    run_dir = _run.new_run(str(bucket), PLAN)
    with open(os.path.join(run_dir, "state.json"), "w") as handle:
        handle.write("{broken")
    with pytest.raises(_run.RunError, match="state.json"):
        _run.load_state(run_dir)
    os.unlink(os.path.join(run_dir, "state.json"))
    with pytest.raises(_run.RunError, match="state.json is missing"):
        finish(run_dir, no_gates)
    with pytest.raises(_run.RunError, match="plan.json is missing"):
        _run.load_plan(str(bucket / "nope"))


def test_segments_wide_for_many_acting_hosts_narrow_otherwise():
    ops = {"h%d" % i: [] for i in range(4)}
    plan = {"steps": [{"index": 0, "ops": ops, "gates": []}, {"index": 1, "ops": {"h0": []}, "gates": []}]}
    # a step where at most 2 hosts act loops over them (no skipped hosts); no final pass after a last step
    # without gates (nothing waits for a promotion: finish folds that step)
    assert _run.segments(plan, 8) == [{"kind": "wide", "step": 0}, {"kind": "narrow", "step": 1}]
    assert _run.segments(plan, 4) == [{"kind": "wide", "step": 0}, {"kind": "narrow", "step": 1}]
    assert _run.segments(plan, 32) == [{"kind": "wide", "step": 0}, {"kind": "narrow", "step": 1}]  # 4*8 >= 32
    assert _run.segments(plan, 64)[0]["kind"] == "narrow"      # 4 acting of 64: loop over them
    assert _run.segments(plan, 33)[0]["kind"] == "narrow"
    assert _run.segments({"steps": []}, 8) == []
    # the whole play acting is wide however small; a gated step's hosts act again in the next step
    two = {"steps": [{"index": 0, "ops": {"h0": [], "h1": []}, "gates": [{"job": "a", "hosts": ["h0", "h1"]}]},
                     {"index": 1, "ops": {"h2": []}, "gates": [{"job": "a", "hosts": ["h2"]}]}]}
    assert _run.segments(two, 2)[0]["kind"] == "wide"
    assert _run.segments(two, 3) == [{"kind": "narrow", "step": 0}, {"kind": "wide", "step": 1},
                                     {"kind": "narrow", "step": "final"}]
    assert _run.step_key("3") == 3 and _run.step_key("final") == _run.FINAL


def test_segment_groups_join_consecutive_narrow_steps_only():
    w = [{"kind": "wide", "step": i} for i in range(3)]
    n = [{"kind": "narrow", "step": i} for i in range(3, 7)]
    groups = _run.segment_groups([w[0], n[0], n[1], w[1], w[2], n[2], n[3]])
    assert [(g["kind"], [s["step"] for s in g["segments"]]) for g in groups] == [
        ("wide", [0]), ("narrow", [3, 4]), ("wide", [1]), ("wide", [2]), ("narrow", [5, 6])]
    assert _run.segment_groups([]) == []
    # every segment kept once, in order
    flat = [s for g in groups for s in g["segments"]]
    assert flat == [w[0], n[0], n[1], w[1], w[2], n[2], n[3]]


def test_injected_fault_points(monkeypatch):
    _run.inject_fault("step:1", {})  # unset: nothing
    _run.inject_fault("step:1", {_run.FAULT_ENV: "step:2,finish"})
    with pytest.raises(_run.InjectedFault, match="injected controller fault at step:2"):
        _run.inject_fault("step:2", {_run.FAULT_ENV: "step:2,finish"})
    monkeypatch.setenv(_run.FAULT_ENV, "finish")
    with pytest.raises(_run.InjectedFault):
        _run.inject_fault("finish")


def test_a_fault_injected_after_the_fold_leaves_the_step_unfolded_and_the_run_failed(bucket, monkeypatch):
    run_dir = _run.new_run(str(bucket), PLAN)
    advance(run_dir, 0, no_gates)
    answer_all(run_dir, 0, ["h1"])
    monkeypatch.setenv(_run.FAULT_ENV, "step:1")
    with pytest.raises(_run.InjectedFault):
        advance(run_dir, 1, no_gates)
    state = _run.load_state(run_dir)
    assert state.in_flight is None and state.steps_completed == [0]  # step 0 folded, step 1 never planned
    assert not os.path.exists(os.path.dirname(_run.request_path(run_dir, 1, "h1")))
    monkeypatch.delenv(_run.FAULT_ENV)
    report = finish(run_dir, no_gates)[2]
    assert report.failed and any("stopped before step(s) 1" in p for p in report.problems), report.problems

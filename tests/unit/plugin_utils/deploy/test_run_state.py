"""Every transition of the deploy run state (plugins/plugin_utils/deploy/run_state.py)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state


def op(job, host, action="start", kind="run", promote_now=False, step=1):
    return {"id": "%s@%s" % (job, host), "kind": kind, "job": job, "host": host, "action": action,
            "target": action, "promote_now": promote_now, "record": {"job": job, "hash": "h"}, "step": step}


def gate(job, hosts):
    return {"job": job, "hosts": hosts, "checks": [{"type": "tcp", "port": 1}], "attempts": 2}


def ok_answer(req):
    return {"ok": True, "promotions": [{"id": p["id"], "ok": True} for p in req.promote],
            "ops": [{"id": o["id"], "ok": True} for o in req.ops]}


PLAN = {
    "bucket_id": "b1",
    "job_waves": {"api": 0, "db": 0, "web": 1},
    "rows": [{"job": j, "action": "start"} for j in ("api", "db", "web")],
    "failures": [],
    "steps": [
        {"index": 0, "wave": None, "last_in_wave": True, "label": "reconcile",
         "ops": {"h1": [{"id": "meta@h1", "kind": "meta", "job": None, "host": "h1", "action": "meta"}]}, "gates": []},
        {"index": 1, "wave": 0, "last_in_wave": False, "label": "wave 0: api 1/2; db 1/1",
         "ops": {"h1": [op("api", "h1")], "h2": [op("db", "h2", promote_now=True)]}, "gates": [gate("api", ["h1"])]},
        {"index": 2, "wave": 0, "last_in_wave": True, "label": "wave 0: api 2/2",
         "ops": {"h2": [op("api", "h2", step=2)]}, "gates": [gate("api", ["h2"])]},
        {"index": 3, "wave": 1, "last_in_wave": True, "label": "wave 1: web",
         "ops": {"h1": [op("web", "h1", step=3)], "h3": [op("web", "h3", step=3)]}, "gates": []},
    ],
}


def run(plan, answer_for=ok_answer, gates=None, upto=None):
    state = _run_state.new_state("r1", plan)
    for step in plan["steps"][:upto]:
        reqs = _run_state.requests_for_step(state, step)
        answers = {h: answer_for(r) for h, r in reqs.items()}
        state = _run_state.fold_step(state, step, answers, (gates or {}).get(step["index"], {g["job"]: None for g in step["gates"]}))
    reqs = _run_state.requests_for_step(state, None)
    state = _run_state.fold_step(state, None, {h: answer_for(r) for h, r in reqs.items()}, {})
    return state


def test_green_run_promotes_after_passed_gate_and_reports_ok():
    state = _run_state.new_state("r1", PLAN)
    state = _run_state.fold_step(state, PLAN["steps"][0], {"h1": {"ok": True, "ops": [{"id": "meta@h1", "ok": True}]}}, {})
    reqs = _run_state.requests_for_step(state, PLAN["steps"][1])
    assert sorted(reqs) == ["h1", "h2"] and reqs["h1"].promote == []
    state = _run_state.fold_step(state, PLAN["steps"][1], {h: ok_answer(r) for h, r in reqs.items()}, {"api": None})
    assert [p["id"] for p in state.pending["h1"]] == ["api@h1"]          # gated start: promote later
    assert "h2" not in state.pending                                         # promote_now: done by the agent
    reqs = _run_state.requests_for_step(state, PLAN["steps"][2])
    assert sorted(reqs) == ["h1", "h2"]                                      # h1 only gets its promotion
    assert reqs["h1"].ops == [] and [p["id"] for p in reqs["h1"].promote] == ["api@h1"]
    state = run(PLAN)
    report = _run_state.final_report(state, PLAN)
    assert not report.failed, report.problems
    assert state.pending == {} and state.steps_completed == [0, 1, 2, 3, _run_state.FINAL]
    assert {d["id"] for d in report.done} == {"meta@h1", "api@h1", "db@h2", "api@h2", "web@h1", "web@h3"}


def test_failing_make_target_fails_the_job_and_blocks_its_later_batches_and_waves():
    def answer(req):
        a = ok_answer(req)
        for o in a["ops"]:
            if o["id"] == "api@h1":
                o.update(ok=False, msg="make start failed (rc=2)", output_tail=["boom"])
        return a
    state = run(PLAN, answer)
    assert "api" in state.blocked and "web" in state.blocked and "db" not in state.blocked
    assert "make start failed (rc=2)" in state.failed_by_job["api"][0] and "boom" in state.failed_by_job["api"][0]
    ids = {d["id"] for d in state.done}
    assert "api@h2" not in ids and "web@h1" not in ids and "db@h2" in ids
    report = _run_state.final_report(state, PLAN)
    assert report.failed and report.blocked_not_deployed == ["web"]


def test_blocked_jobs_are_left_out_of_requests():
    state = _run_state.new_state("r1", PLAN)
    state.blocked = ["api"]
    assert _run_state.requests_for_step(state, PLAN["steps"][2]) == {}


def test_unreachable_host_fails_its_ops_and_promotions():
    state = _run_state.new_state("r1", PLAN)
    state.pending = {"h1": [{"id": "api@h1", "job": "api", "host": "h1", "record": {}, "step": 1}]}
    state = _run_state.fold_step(state, PLAN["steps"][3], {"h1": None, "h3": ok_answer(_run_state.requests_for_step(state, PLAN["steps"][3])["h3"])},
                                 {}, reasons={"h1": "ssh: connection refused"})
    assert state.pending == {}
    assert any("api@h1: promote failed: no answer" in m for m in state.failed_by_job["api"])
    assert "connection refused" in state.failed_by_job["web"][0]
    assert [d["id"] for d in state.done] == ["web@h3"]


def test_missing_answer_counts_as_no_result():
    answer = ok_answer(_run_state.AgentRequest("h2", PLAN["steps"][1]["ops"]["h2"]))
    state = _run_state.fold_step(_run_state.new_state("r1", PLAN), PLAN["steps"][1], {"h2": answer}, {"api": None})
    assert "no result from the worker" in state.failed_by_job["api"][0]


def test_agent_level_error_fails_every_op_of_the_host():
    state = _run_state.fold_step(_run_state.new_state("r1", PLAN), PLAN["steps"][0], {"h1": {"ok": False, "msg": "bad agent request"}}, {})
    assert "bad agent request" in state.errors[0] and state.done == []


def test_op_the_agent_did_not_report_fails():
    state = _run_state.fold_step(_run_state.new_state("r1", PLAN), PLAN["steps"][0], {"h1": {"ok": True, "ops": []}}, {})
    assert "did not report" in state.errors[0]


def test_failed_health_gate_fails_job_without_promotion():
    state = run(PLAN, gates={1: {"api": ["h1: tcp h1:1: refused"]}})
    assert "health gate of job api failed" in state.failed_by_job["api"][0]
    assert not any(p["id"] == "api@h1" for ps in state.pending.values() for p in ps)
    assert "web" in state.blocked
    assert _run_state.final_report(state, PLAN).failed


def test_gate_not_run_is_a_failure():
    state = _run_state.fold_step(_run_state.new_state("r1", PLAN), PLAN["steps"][1],
                                 {h: ok_answer(r) for h, r in _run_state.requests_for_step(_run_state.new_state("r1", PLAN), PLAN["steps"][1]).items()}, {})
    assert "was not run" in state.failed_by_job["api"][0]


def test_gates_of_failed_or_blocked_jobs_are_not_run():
    state = _run_state.new_state("r1", PLAN)
    assert [g["job"] for g in _run_state.gates_to_run(state, PLAN["steps"][1])] == ["api"]
    state.blocked = ["api"]
    assert _run_state.gates_to_run(state, PLAN["steps"][1]) == [] and _run_state.gates_to_run(state, None) == []


def test_failure_in_earlier_wave_blocks_later_waves_only_when_wave_is_over():
    state = _run_state.new_state("r1", PLAN)
    reqs = _run_state.requests_for_step(state, PLAN["steps"][1])
    answers = {h: ok_answer(r) for h, r in reqs.items()}
    answers["h2"]["ops"][0].update(ok=False, msg="x")
    state = _run_state.fold_step(state, PLAN["steps"][1], answers, {"api": None})
    assert state.blocked == ["db"]                       # wave 0 not over yet
    state = _run_state.fold_step(state, PLAN["steps"][2], {"h1": ok_answer(_run_state.requests_for_step(state, PLAN["steps"][2])["h1"]),
                                                           "h2": ok_answer(_run_state.requests_for_step(state, PLAN["steps"][2])["h2"])}, {"api": None})
    assert state.blocked == ["db", "web"]                # wave 0 over: wave 1 blocked
    assert _run_state.requests_for_step(state, PLAN["steps"][3]).keys() == {"h2"}  # only api@h2's promotion


def test_late_promotion_failure_blocks_later_waves():
    state = _run_state.new_state("r1", PLAN)
    state.pending = {"h1": [{"id": "api@h1", "job": "api", "host": "h1", "record": {}, "step": 2}]}
    req = _run_state.requests_for_step(state, PLAN["steps"][3])
    answers = {h: ok_answer(r) for h, r in req.items()}
    answers["h1"]["promotions"][0].update(ok=False, msg="disk full")
    state = _run_state.fold_step(state, PLAN["steps"][3], answers, {})
    assert "disk full" in state.failed_by_job["api"][0] and "web" in state.blocked


def test_reconcile_failure_is_a_run_error():
    state = _run_state.fold_step(_run_state.new_state("r1", PLAN), PLAN["steps"][0],
                                 {"h1": {"ok": True, "ops": [{"id": "meta@h1", "ok": False, "msg": "disk full"}]}}, {})
    assert state.errors and not state.failed_by_job and _run_state.final_report(state, PLAN).failed


def test_incomplete_run_is_failed():
    state = run(PLAN, upto=2)
    report = _run_state.final_report(state, PLAN)
    assert report.failed and any("step(s) 2, 3" in p for p in report.problems)


def test_unpromoted_pending_is_failed():
    state = _run_state.new_state("r1", PLAN)
    state.steps_completed = [0, 1, 2, 3]
    state.pending = {"h1": [{"id": "api@h1", "job": "api"}]}
    assert any("not promoted: api@h1" in p for p in _run_state.final_report(state, PLAN).problems)


def test_plan_failures_are_reported():
    plan = dict(PLAN, failures=[{"msg": "x@h9 not deployed: worker unreachable"}], steps=[])
    assert _run_state.final_report(_run_state.new_state("r", plan), plan).problems == ["x@h9 not deployed: worker unreachable"]


def test_json_round_trip_and_bad_files():
    state = run(PLAN, gates={1: {"api": ["down"]}})
    back = _run_state.RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back == state
    for bad in (None, [], {"format": 99}, {"format": 1, "run_id": "x"}, {"format": 1, "run_id": "x", "bucket_id": "b", "zzz": 1}):
        with pytest.raises(_run_state.StateError):
            _run_state.RunState.from_dict(bad)


def test_fold_does_not_mutate_input():
    state = _run_state.new_state("r1", PLAN)
    before = state.to_dict()
    _run_state.fold_step(state, PLAN["steps"][1], {}, {})
    assert state.to_dict() == before


def test_failed_ops_say_why_for_the_verdict():
    def answer(req):
        if req.host == "h3":
            return None                                  # no answer: the worker vanished
        a = ok_answer(req)
        for o in a["ops"]:
            if o["id"] == "db@h2":
                o.update(ok=False, msg="make start failed")
        return a
    # api's first batch fails its gate on h1: its later batch never runs
    problems = ["h1: tcp h1:1: [Errno 111] Connection refused", "gave up after 1.0 s\n  h1: last lines"]
    state = run(PLAN, answer, gates={1: {"api": problems}})
    assert state.failed_ops == {"api@h1": "gate", "db@h2": "failed"}
    assert "api@h2" not in state.failed_ops and "api@h2" not in {d["id"] for d in state.done}
    (msg,) = state.failed_by_job["api"]
    assert "Connection refused\n  gave up after 1.0 s" in msg    # a multi-line problem: one per line
    state = run(dict(PLAN, job_waves={"api": 0, "db": 0, "web": 0}), answer)
    assert state.failed_ops["web@h3"] == "unreachable" and state.failed_ops["db@h2"] == "failed"
    agent_crash = run(PLAN, lambda req: {"ok": False, "msg": "agent crashed"} if req.host == "h2" else ok_answer(req))
    assert agent_crash.failed_ops["db@h2"] == "failed"           # it answered: not unreachable
    restored = _run_state.RunState.from_dict(state.to_dict())
    assert restored.failed_ops == state.failed_ops
    old = state.to_dict()
    del old["failed_ops"]                                        # a run state written before the field
    assert _run_state.RunState.from_dict(old).failed_ops == {}


def _files_plan():
    """web (wave 1) on h1 ships its files early, in wave 0's step (deploy/schedule.py: _presync)."""
    files = {"id": "web@h1/files", "kind": "files", "job": "web", "host": "h1", "action": "sync", "target": None,
             "of": "web@h1", "sync": True}
    web = dict(op("web", "h1", step=1), sync=False)
    return dict(PLAN, steps=[
        {"index": 0, "wave": 0, "last_in_wave": True, "label": "wave 0: api", "ops": {"h1": [op("api", "h1", promote_now=True), files]},
         "gates": []},
        {"index": 1, "wave": 1, "last_in_wave": True, "label": "wave 1: web", "ops": {"h1": [web]}, "gates": []}])


def test_files_shipped_early_are_not_a_done_allocation():
    plan = _files_plan()
    state = _run_state.fold_step(_run_state.new_state("r1", plan), plan["steps"][0], {"h1": ok_answer(_run_state.requests_for_step(
        _run_state.new_state("r1", plan), plan["steps"][0])["h1"])}, {})
    assert [d["id"] for d in state.done] == ["api@h1"] and not state.failed_by_job
    assert [o["id"] for o in _run_state.requests_for_step(state, plan["steps"][1])["h1"].ops] == ["web@h1"]
    assert not _run_state.final_report(run(plan), plan).failed


def test_files_that_failed_early_fail_their_allocation_and_block_its_job():
    plan = _files_plan()

    def answer(req):
        a = ok_answer(req)
        for o in a["ops"]:
            if o["id"] == "web@h1/files":
                o.update(ok=False, msg="rsync failed (rc=12)")
        return a
    state = run(plan, answer_for=answer)
    assert state.failed_ops == {"web@h1": "failed"}  # the verdict names the allocation, not the copy
    assert "web" in state.blocked and "rsync failed" in state.failed_by_job["web"][0]
    assert [d["id"] for d in state.done] == ["api@h1"]  # web's start never ran
    assert _run_state.final_report(state, plan).failed

"""Issue 22 through the run state: real plans (the golden scenarios start_gates and auto_revert) driven step by
step with agent answers and gate outcomes, as _deploy_run drives them: maand's start semantics (start batches
held until the gate after the last one), auto_revert, and the verdict the operator reads."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state, view as _view
from tests.unit.plugin_utils.deploy import test_deploy_plan_golden as G


def answers_for(requests, fail=()):
    """Every promotion ok; every op ok except the op ids in fail."""
    out = {}
    for host, req in requests.items():
        out[host] = {"ok": True, "promotions": [{"id": p["id"], "ok": True} for p in req.promote],
                     "ops": [{"id": o["id"], "ok": o["id"] not in fail, "msg": "make restart failed (rc=2)"}
                             for o in req.ops]}
    return out


def drive(plan, gate=lambda step, g: [], fail=()):
    """Run every step of plan, then the final pass; returns (state, [(step index, {host: [op ids]})], gates run).
    The promotions each step carried are in drive.promotions: [(step index, [promotion ids])]."""
    state = _run_state.new_state("r", plan)
    seen, gates_run = [], []
    drive.promotions = []
    for step in plan["steps"] + [None]:
        requests = _run_state.requests_for_step(state, step)
        index = None if step is None else step["index"]
        seen.append((index, {h: [o["id"] for o in r.ops] for h, r in requests.items()}))
        drive.promotions.append((index, sorted(p["id"] for r in requests.values() for p in r.promote)))
        state, ok_ops = _run_state.fold_results(state, step, answers_for(requests, fail))
        outcomes = {}
        for g in _run_state.gates_to_run(state, step):
            gates_run.append((step["index"], g["job"], g["hosts"], g.get("revert_of")))
            outcomes[g["job"]] = gate(step, g)
        state = _run_state.fold_gates(state, step, ok_ops, outcomes)
    return state, seen, gates_run


def test_start_batches_wait_for_one_gate_after_the_last_and_are_promoted_together():
    plan = G.emitted("start_gates")
    state = _run_state.new_state("r", plan)
    for step in plan["steps"][:2]:
        requests = _run_state.requests_for_step(state, step)
        state, ok_ops = _run_state.fold_results(state, step, answers_for(requests))
        state = _run_state.fold_gates(state, step, ok_ops, {g["job"]: [] for g in _run_state.gates_to_run(state, step)})
    # etcd (maand's semantics): two members started, nothing promoted, no gate yet; each: gated per batch
    assert [p["id"] for p in state.awaiting["etcd"]] == ["etcd@h1", "etcd@h2"]
    assert not any(p["job"] == "etcd" for ps in state.pending.values() for p in ps)
    state, seen, gates = drive(plan)
    assert [(i, job, hosts) for i, job, hosts, dummy in gates] == [
        (0, "each", ["h1"]), (1, "each", ["h2"]), (2, "each", ["h3"]), (2, "etcd", ["h1", "h2", "h3"])]
    assert state.awaiting == {} and not _run_state.final_report(state, plan).failed
    # the three members are promoted together, after the gate of the last start batch (the final pass)
    assert [ids for index, ids in drive.promotions if index is None] == [["each@h3", "etcd@h1", "etcd@h2", "etcd@h3"]]
    assert not any(i.startswith("etcd@") for index, ids in drive.promotions if index is not None for i in ids)
    assert {d["id"] for d in state.done} >= {"etcd@h1", "etcd@h2", "etcd@h3"}


def test_a_failed_gate_after_the_last_start_batch_promotes_no_member():
    plan = G.emitted("start_gates")
    state, seen, gates = drive(plan, gate=lambda step, g: ["h1: http h1:2379: 503"] if g["job"] == "etcd" else [])
    assert state.failed_ops["etcd@h1"] == "gate"
    report = _run_state.final_report(state, plan)
    assert report.failed and any("health gate of job etcd failed" in p for p in report.problems)
    assert not any(i.startswith("etcd@") for index, ids in drive.promotions for i in ids)  # none promoted
    assert state.awaiting == {}
    rows = {(v.job, v.worker): v.result for v in _view.verdict(plan, state.done, state.failed_ops)}
    assert rows[("etcd", "h1")] == "gate failed" and rows[("each", "h1")] == "started"


def test_a_failed_later_start_batch_leaves_the_held_ones_unpromoted():
    plan = G.emitted("start_gates")
    state, seen, gates = drive(plan, fail={"etcd@h2"})
    assert "etcd" in state.blocked and state.failed_ops["etcd@h1"] == "unpromoted"
    assert all("etcd@h3" not in ids for dummy, reqs in seen for ids in reqs.values())  # batch 3 never ran
    rows = {(v.job, v.worker): v.result for v in _view.verdict(plan, state.done, state.failed_ops)}
    assert (rows[("etcd", "h1")], rows[("etcd", "h2")], rows[("etcd", "h3")]) == ("not promoted", "failed", "not run")
    assert _run_state.final_report(state, plan).failed


def test_auto_revert_restores_the_failed_batch_gates_it_and_ends_reverted():
    plan = G.emitted("auto_revert")

    def fail_first(step, g):
        return ["h1: http h1:2379: refused"] if step["index"] == 0 and g["job"] == "etcd" else []
    state, seen, gates = drive(plan, gate=fail_first)
    reqs = dict(seen)
    assert reqs[1]["h1"] == ["etcd@h1/revert"] and "etcd@h2" not in reqs[1].get("h2", [])  # reverted, blocked
    assert all(not any(i.startswith("etcd@") for i in ids) for ids in reqs[2].values())  # later batches untouched
    etcd_gates = [(i, job, hosts, of) for i, job, hosts, of in gates if job == "etcd"]
    assert etcd_gates == [(0, "etcd", ["h1"], None), (1, "etcd", ["h1"], 0)]
    assert "etcd@h1/revert" in dict(drive.promotions)[2]  # the revert's promotion rides in the next step
    assert state.failed_ops["etcd@h1"] == "reverted"
    rows = {(v.job, v.worker): v for v in _view.verdict(plan, state.done, state.failed_ops)}
    assert rows[("etcd", "h1")].result == "reverted" and rows[("etcd", "h2")].result == "not run"
    assert _view._version(rows[("etcd", "h1")]) == "1.0.0 (1.1.0 reverted)"
    report = _run_state.final_report(state, plan)
    assert report.failed and any("auto_revert put the last promoted version back on h1 (restarted, gate passed)" in p
                                 for p in report.problems)
    assert "1 reverted" in _view.done_line(list(rows.values()))
    step0 = plan["steps"][1]["ops"]["h1"]
    record = next(o for o in step0 if o["id"] == "etcd@h1/revert")["record"]
    assert record["version"] == "1.0.0" and record["reverted_from"] == "1.1.0" and record["update_seq"] == plan["update_seq"]


def test_auto_revert_without_a_gate_reverts_the_batch_whose_make_failed():
    plan = G.emitted("auto_revert")
    state, seen, gates = drive(plan, fail={"bare@h1"})
    acting = {h: ids for h, ids in dict(seen)[1].items() if ids != ["meta@%s" % h]}  # h3's metadata rides here
    assert sorted(acting) == ["h1", "h2"] and "bare@h1/revert" in dict(seen)[1]["h1"]
    assert "bare@h2/revert" in dict(seen)[1]["h2"]  # the whole batch goes back (h2's restart had succeeded)
    assert state.failed_ops["bare@h1"] == "reverted" and state.failed_ops["bare@h2"] == "reverted"
    assert "bare@h3" not in [i for ids in dict(seen)[1].values() for i in ids]


def test_a_revert_whose_gate_fails_says_so_and_keeps_the_gate_verdict():
    plan = G.emitted("auto_revert")
    state, seen, gates = drive(plan, gate=lambda step, g: ["h1: refused"] if g["job"] == "etcd" else [])
    assert state.failed_ops["etcd@h1"] == "gate"
    assert any("auto_revert restarted the last promoted version on h1 but its health gate failed" in m
               for m in state.failed_by_job["etcd"])
    assert not any(p["id"] == "etcd@h1/revert" for ps in state.pending.values() for p in ps)


def test_a_green_auto_revert_deploy_never_runs_a_revert():
    plan = G.emitted("auto_revert")
    state, seen, gates = drive(plan)
    assert not any(i.endswith("/revert") for dummy, reqs in seen for ids in reqs.values() for i in ids)
    assert all(of is None for dummy, dummy2, dummy3, of in gates)
    assert not _run_state.final_report(state, plan).failed


# --- canary: N and -e maand_promote (Nomad's canary + promote) ------------------------------------------

def _canary(promote=None, on_new=0):
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
    from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job
    hosts = ["h1", "h2", "h3"]
    cat = catalog([job("api", version="1.1.0", canary=1, max_concurrent_upgrades=1)], [("api", h, "active") for h in hosts])
    new = content("api", files={"Makefile": "m1", "conf/a.conf": "c2"})
    st = _settle(cat, content("api"), hosts)
    for h in hosts[on_new:]:
        st[h]["deployed"]["api"]["version"] = "1.0.0"
    for h in hosts[:on_new]:  # the canary already runs the new version
        st[h]["deployed"]["api"] = _plan.state_record("api", "api-%s" % h, new["api"], "1.1.0", True, 1)
    return _plan.compute_plan(cat, new, st, hosts, {"promote": promote} if promote else None)


def test_a_canary_upgrade_rolls_out_to_n_allocations_and_holds_the_rest():
    plan = _canary()
    actions = {r["worker"]: (r["action"], r.get("batch")) for r in plan["rows"]}
    assert actions == {"h1": ("restart", "api canary batch 1/1"), "h2": ("hold", None), "h3": ("hold", None)}
    assert [s["label"] for s in plan["steps"]] == ["wave 0: api canary batch 1/1"]
    assert "note: job api: canary 1: 1 allocation(s) on 1.1.0 after this deploy, 2 held until a deploy with " \
           "-e maand_promote=api" in plan["lines"]
    held = next(r for r in plan["rows"] if r["worker"] == "h2")
    assert held["reason"].startswith("canary: waits for -e maand_promote=api (content changed")
    state, seen, gates = drive(plan)
    assert not _run_state.final_report(state, plan).failed  # held is not a failure
    rows = {v.worker: v for v in _view.verdict(plan, state.done, state.failed_ops)}
    assert (rows["h1"].result, rows["h2"].result, _view._version(rows["h2"])) == ("restarted", "held", "1.0.0")
    assert _view.plan_summary(plan).startswith("plan: 1 restart, 2 hold")


def test_the_canary_in_place_holds_everything_until_promoted_then_the_rest_rolls_out():
    plan = _canary(on_new=1)
    assert [r["action"] for r in plan["rows"]] == ["skip", "hold", "hold"] and plan["steps"] == []
    plan = _canary(on_new=1, promote="api")
    assert [(r["action"], r.get("batch")) for r in plan["rows"]] == [
        ("skip", None), ("restart", "api upgrade batch 1/2"), ("restart", "api upgrade batch 2/2")]
    assert "options: jobs=all promote=api" in plan["lines"]


def test_maand_promote_is_refused_for_a_job_without_canary_or_unknown():
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
    jobs = {"api": {"canary": 1}, "web": {}}
    assert _plan.parse_promote("api", jobs) == ({"api"}, [])
    assert _plan.parse_promote("web", jobs)[1][0].startswith("maand_promote: job(s) web have no canary in their manifest")
    assert _plan.parse_promote("apj", jobs)[1][0].startswith('maand_promote: unknown job(s) apj (did you mean "api"?)')

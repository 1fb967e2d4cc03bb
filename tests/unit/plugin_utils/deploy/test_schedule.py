"""The scheduler alone (plugins/plugin_utils/deploy/schedule.py), over decisions made by hand: step 0, the
waves, each job's batches and gates, auto_revert slots, metadata folding, files shipped early; the
decisions it is given are left as they were."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import reconcile as _reconcile
from ansible_collections.maand.core.plugins.plugin_utils.deploy import schedule as _schedule
from ansible_collections.maand.core.plugins.plugin_utils.deploy.records import Op, PlanOptions
from tests.unit.plugin_utils.deploy.test_deploy_plan_golden import SCENARIOS

GATE = {"job": "api", "checks": [{"type": "tcp", "port": 1}], "timeout_seconds": 1.0, "attempts": 2,
        "interval_seconds": 0.5}


def job(name, **kw):
    return dict({"name": name, "deployment_seq": 0, "max_concurrent_starts": 0, "max_concurrent_upgrades": 1}, **kw)


def run_op(name, host, action, **kw):
    op = Op.run(name, host, "workspace/jobs/%s" % name, sync=True, record={"job": name, "update_seq": 1}, **kw)
    op.act(action, None if action == "sync" else action)
    return op


def decisions(rollout, gates=None, cleanup=None, meta=None, **kw):
    """A ReconcileResult with these rollouts ({job: Rollout}), gates ({job: spec}), step 0 ops and metadata."""
    return _reconcile.ReconcileResult("b1", PlanOptions(), {}, gates=gates or {}, cleanup=cleanup or {},
                                      meta=meta or {}, rollout=rollout, update_seq=1, **kw)


def ops_of(step):
    return {host: [o.id for o in ops] for host, ops in step.ops.items()}


def test_starts_run_batch_after_batch_with_one_gate_after_the_last():
    rollout = {"api": _reconcile.Rollout(start=[run_op("api", h, "start") for h in ("h1", "h2", "h3")])}
    out = _schedule.schedule(decisions(rollout, {"api": GATE}), {"api": job("api", max_concurrent_starts=1)})
    assert [s.label for s in out.steps] == ["wave 0: api start batch %d/3" % i for i in (1, 2, 3)]
    assert [s.gates for s in out.steps[:2]] == [[], []]
    gate = out.steps[2].gates[0]
    assert gate.hosts == ["h1", "h2", "h3"] and gate.label == "api start batch 3/3" and gate.checks == GATE["checks"]
    assert [o.held for s in out.steps for ops in s.ops.values() for o in ops] == [True, True, False]
    assert out.batches == {("api", h): "api start batch %d/3" % i for i, h in enumerate(("h1", "h2", "h3"), 1)}


def test_every_batch_gates_each_start_batch_and_upgrades_are_gated_one_by_one():
    rollout = {"api": _reconcile.Rollout(start=[run_op("api", "h1", "start"), run_op("api", "h2", "start")],
                                         upgrade=[run_op("api", "h3", "restart")])}
    out = _schedule.schedule(decisions(rollout, {"api": GATE}),
                             {"api": job("api", max_concurrent_starts=1, start_gate="every_batch")})
    assert [[g.hosts for g in s.gates] for s in out.steps] == [[["h1"]], [["h2"]], [["h3"]]]
    assert out.steps[2].label == "wave 0: api upgrade batch 1/1" and out.steps[2].last_in_wave
    assert not any(o.held for s in out.steps for ops in s.ops.values() for o in ops)


def test_waves_follow_deployment_seq_and_batches_of_a_wave_run_side_by_side():
    rollout = {"db": _reconcile.Rollout(start=[run_op("db", "h1", "start")]),
               "api": _reconcile.Rollout(upgrade=[run_op("api", "h1", "restart"), run_op("api", "h2", "restart")]),
               "web": _reconcile.Rollout(sync=[run_op("web", "h2", "sync")])}
    jobs = {"db": job("db"), "api": job("api"), "web": job("web", deployment_seq=1)}
    out = _schedule.schedule(decisions(rollout), jobs)
    assert [(s.index, s.wave, s.last_in_wave, s.jobs) for s in out.steps] == [
        (0, 0, False, ["api", "db"]), (1, 0, True, ["api"]), (2, 1, True, ["web"])]
    assert ops_of(out.steps[0]) == {"h1": ["api@h1", "db@h1"]}
    assert out.steps[2].label == "wave 1: web sync batch 1/1"


def test_step_zero_reconciles_and_metadata_rides_in_each_hosts_first_step_otherwise():
    meta = {h: Op.reconcile("meta", h, worker_json={}, jobs_json=[]) for h in ("h1", "h2")}
    rollout = {"api": _reconcile.Rollout(upgrade=[run_op("api", "h1", "restart"), run_op("api", "h2", "restart")])}
    folded = _schedule.schedule(decisions(rollout, meta=meta), {"api": job("api")})
    assert [ops_of(s) for s in folded.steps] == [{"h1": ["meta@h1", "api@h1"]}, {"h2": ["meta@h2", "api@h2"]}]
    cleanup = {"h2": [Op.reconcile("purge", "h2"), Op.reconcile("remove", "h2", job="old"),
                      Op.reconcile("stop", "h2", job="web")]}
    out = _schedule.schedule(decisions(rollout, meta=meta, cleanup=cleanup), {"api": job("api")})
    assert out.steps[0].label == "reconcile" and out.steps[0].wave is None and out.steps[0].jobs == ["old", "web"]
    assert ops_of(out.steps[0]) == {"h1": ["meta@h1"], "h2": ["meta@h2", "web@h2", "old@h2", "purge@h2"]}


def test_fresh_starts_of_a_later_step_ship_their_files_in_the_hosts_first_step():
    rollout = {"db": _reconcile.Rollout(start=[run_op("db", "h1", "start")]),
               "web": _reconcile.Rollout(start=[run_op("web", "h1", "start")])}
    jobs = {"db": job("db"), "web": job("web", deployment_seq=1)}
    d = decisions(rollout, fresh={("web", "h1")})
    out = _schedule.schedule(d, jobs)
    assert ops_of(out.steps[0]) == {"h1": ["db@h1", "web@h1/files"]}
    early, late = out.steps[0].ops["h1"][1], out.steps[1].ops["h1"][0]
    assert (early.kind, early.of, early.sync) == ("files", "web@h1", True) and late.sync is False
    assert d.rollout["web"].start[0].sync is True  # the decision itself is not edited


def test_auto_revert_rides_in_the_next_slot_with_its_own_gate():
    ups = [run_op("api", h, "restart") for h in ("h1", "h2")]
    reverts = {o.id: Op("%s/revert" % o.id, "run", o.host, job="api", action="revert", target="restart",
                        restore="current") for o in ups}
    out = _schedule.schedule(decisions({"api": _reconcile.Rollout(upgrade=ups)}, {"api": GATE}, reverts=reverts),
                             {"api": job("api", auto_revert=True)})
    assert [s.label for s in out.steps] == ["wave 0: api upgrade batch 1/2", "wave 0: api upgrade batch 2/2",
                                            "wave 0: api revert (if upgrade batch 2/2 fails)"]
    assert ops_of(out.steps[1]) == {"h1": ["api@h1/revert"], "h2": ["api@h2"]}
    assert out.steps[1].ops["h1"][0].revert_of == 0 and out.steps[2].ops["h2"][0].revert_of == 1
    revert_gate = out.steps[1].gates[1]
    assert (revert_gate.revert, revert_gate.revert_of, revert_gate.hosts) == (True, 0, ["h1"])
    assert revert_gate.label == "api revert of upgrade batch 1/2"
    assert any("auto_revert" in n for n in out.notes) and reverts["api@h1"].revert_of is None


def test_a_job_control_job_is_one_batch_of_file_syncs_with_its_hooks_in_the_gate():
    spec = dict(GATE, job="ctl")
    cmds = {"command_x": {"executed_on": ["job_control"]}}
    rollout = {"ctl": _reconcile.Rollout(start=[run_op("ctl", "h1", "start")], upgrade=[run_op("ctl", "h2", "restart")])}
    out = _schedule.schedule(decisions(rollout, {"ctl": spec}), {"ctl": job("ctl", commands=cmds)})
    (step,) = out.steps
    assert step.label == "wave 0: ctl job_control" and [o.target for ops in step.ops.values() for o in ops] == [None, None]
    assert step.gates[0].hooks == {"job_control": True, "new": ["h1"], "updated": ["h2"], "last": True}


@pytest.mark.parametrize("order, kept", [("h2,h1", ["h2", "h1"]), ("h1,h1", ["h1", "h2"]), ("h3,h1", ["h1", "h2"])])
def test_a_rollout_order_from_the_kv_orders_the_batches_when_it_names_exactly_them(order, kept):
    rollout = {"api": _reconcile.Rollout(upgrade=[run_op("api", "h1", "restart"), run_op("api", "h2", "restart")])}
    out = _schedule.schedule(decisions(rollout), {"api": job("api")}, {"api": order})
    assert [h for s in out.steps for h in s.ops] == kept
    assert bool(out.notes) == (kept == ["h1", "h2"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scheduling_leaves_the_decisions_as_they_were_and_round_trips(name):
    cat, cont, st, hosts, opts = SCENARIOS[name]()
    d = _reconcile.reconcile(cat, cont, st, hosts, opts)
    before = json.dumps(d.to_json(), sort_keys=True)
    out = _schedule.schedule(d, {j["name"]: j for j in cat["jobs"]}, (opts or {}).get("rollout_orders"))
    assert json.dumps(d.to_json(), sort_keys=True) == before
    data = json.loads(json.dumps(out.to_json()))
    assert _schedule.Schedule.from_json(data) == out

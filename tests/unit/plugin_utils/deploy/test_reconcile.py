"""The reconciler alone (plugins/plugin_utils/deploy/reconcile.py): each allocation's action and reason, the
ops it decides (reconcile, rollout, revert) and nothing of the schedule (no batch, no step, no held op)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import reconcile as _reconcile
from ansible_collections.maand.core.plugins.plugin_utils.deploy.records import PlanError
from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job, record, states
from tests.unit.plugin_utils.deploy.test_deploy_plan_golden import SCENARIOS

H3 = ["h1", "h2", "h3"]
NEW = {"Makefile": "m2", "conf/a.conf": "c1"}


def decided(cat, cont, st, hosts, opts=None):
    return _reconcile.reconcile(cat, cont, st, hosts, opts)


def actions(result):
    return {(r.job, r.worker): (r.action, r.reason) for r in result.rows}


def test_a_first_deploy_starts_every_allocation_fresh_and_writes_metadata():
    cat = catalog([job("api"), job("web")], [("api", "h1", "active"), ("api", "h2", "active"), ("web", "h1", "active")])
    out = decided(cat, content("api", "web"), states(H3), H3)
    assert actions(out) == {(j, h): ("start", "new allocation") for j, h in [("api", "h1"), ("api", "h2"), ("web", "h1")]}
    assert [o.id for o in out.rollout["api"].start] == ["api@h1", "api@h2"] and not out.rollout["api"].upgrade
    assert out.fresh == {("api", "h1"), ("api", "h2"), ("web", "h1")}
    assert sorted(out.meta) == H3 and out.update_seq == 1 and out.seen_seq == 0
    assert all(o.record["update_seq"] == 1 for r in out.rollout.values() for o in r.ops())
    assert not out.errors and not out.failures and not out.cleanup


def test_decisions_carry_nothing_of_the_schedule():
    for name, scenario in SCENARIOS.items():
        out = decided(*scenario())
        assert all(r.batch is None for r in out.rows), name
        ops = [o for r in out.rollout.values() for o in r.ops()] + [o for ops in out.cleanup.values() for o in ops]
        assert not any(o.held or o.revert_of is not None for o in ops), name


def test_upgrades_by_restart_policy_and_unchanged_allocations_skip():
    jobs = [job("api"), job("rel", restart_policy="reload", restart_globs=["conf/*"]), job("nev", restart_policy="never"),
            job("same")]
    cat = catalog(jobs, [(j["name"], "h1", "active") for j in jobs], workers=("h1",))
    st = _settle(cat, content("api", "rel", "nev", "same"), ["h1"])
    cont = content("api", "rel", "nev", files=NEW)
    cont.update(content("same"))
    out = decided(cat, cont, st, ["h1"])
    got = actions(out)
    assert got[("api", "h1")] == ("restart", "content changed: Makefile")
    assert got[("rel", "h1")] == ("reload", "content changed: Makefile; no restart_globs matched")
    assert got[("nev", "h1")] == ("sync", "content changed: Makefile; restart_policy never: files only")
    assert got[("same", "h1")][0] == "skip" and got[("same", "h1")][1].startswith("unchanged")
    assert [o.id for o in out.rollout["nev"].sync] == ["nev@h1"] and out.rollout["nev"].sync[0].promote_now
    assert [o.action for o in out.rollout["api"].upgrade + out.rollout["rel"].upgrade] == ["restart", "reload"]
    assert not out.rollout["same"]


def test_removed_disabled_and_departed_workers_reconcile():
    cat = catalog([job("api"), job("gone", removed=True)],
                  [("api", "h1", "disabled"), ("gone", "h1", "removed"), ("api", "r1", "active")],
                  workers=("h1",), removed_workers=("r1",))
    cont = content("api", "gone")
    st = states(["h1", "r1"], {"h1": {"api": record("api", cont), "gone": record("gone", cont)},
                               "r1": {"api": record("api", cont, host="r1")}})
    out = decided(cat, content("api"), st, ["h1", "r1"])
    got = actions(out)
    assert got[("api", "h1")] == ("stop", "disabled (was running)")
    assert got[("gone", "h1")][0] == "remove" and got[("api", "r1")][0] == "remove"
    assert got[(None, "r1")][0] == "purge"
    assert [(o.kind, o.job) for o in out.cleanup["h1"]] == [("stop", "api"), ("remove", "gone")]
    assert [(o.kind, o.job) for o in out.cleanup["r1"]] == [("remove", "api"), ("purge", None)]
    assert not out.rollout and not out.dead_workers


def test_an_unreachable_worker_fails_its_allocations_only():
    cat = catalog([job("api")], [("api", h, "active") for h in H3])
    out = decided(cat, content("api"), states(H3, unreachable=("h2",)), H3)
    assert actions(out)[("api", "h2")] == ("unreachable", "worker unreachable: ssh: connect refused")
    assert [(f.job, f.worker) for f in out.failures] == [("api", "h2")]
    assert [o.host for o in out.rollout["api"].start] == ["h1", "h3"]


def test_canaries_hold_the_upgrades_beyond_n_until_promoted():
    cat = catalog([job("api", canary=1)], [("api", h, "active") for h in H3])
    st = _settle(cat, content("api"), H3)
    out = decided(cat, content("api", files=NEW), st, H3)
    assert [o.host for o in out.rollout["api"].upgrade] == ["h1"] and out.canaries == {"api"}
    assert [actions(out)[("api", h)][0] for h in ("h2", "h3")] == ["hold", "hold"]
    assert any("canary 1" in n for n in out.notes)
    promoted = decided(cat, content("api", files=NEW), st, H3, {"promote": "api"})
    assert [o.host for o in promoted.rollout["api"].upgrade] == H3 and not promoted.canaries


def test_auto_revert_decides_the_revert_of_each_upgrade():
    cat = catalog([job("api", auto_revert=True, version="1.1.0")], [("api", h, "active") for h in H3])
    st = _settle(cat, content("api"), H3)
    for h in H3:
        st[h]["deployed"]["api"]["version"] = "1.0.0"
    out = decided(cat, content("api", files=NEW), st, H3)
    assert sorted(out.reverts) == ["api@h1", "api@h2", "api@h3"]
    rev = out.reverts["api@h2"]
    assert (rev.id, rev.action, rev.target, rev.restore) == ("api@h2/revert", "revert", "restart", "current")
    assert rev.record["reverted_from"] == "1.1.0" and rev.record["update_seq"] == out.update_seq
    assert rev.env["CURRENT_VERSION"] == "1.1.0" and rev.env["NEW_VERSION"] == "1.0.0"


def test_refusals_are_errors_of_the_result():
    cat = catalog([job("api")], [("api", "h1", "active"), ("ghost", "h1", "active")], workers=("h1",))
    out = decided(cat, content("api"), states(["h1"]), ["h1"], {"jobs": "nope"})
    assert out.errors and "maand_jobs: unknown job(s) nope" in out.errors[0]
    out = decided(cat, content("api"), states(["h1"]), ["h1"])
    assert actions(out)[("ghost", "h1")][0] == "skip" and "has no job record" in out.errors[0]
    with pytest.raises(PlanError, match="no bucket_id") as err:
        decided(dict(cat, bucket_id=""), {}, {}, [])
    assert isinstance(err.value, MaandError)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_result_round_trips_through_json(name):
    out = decided(*SCENARIOS[name]())
    data = json.loads(json.dumps(out.to_json()))
    again = _reconcile.ReconcileResult.from_json(data)
    assert again == out and again.to_json() == data

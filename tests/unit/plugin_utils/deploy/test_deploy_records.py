"""The plan's typed records (plugins/plugin_utils/deploy/records.py): Plan.from_json(plan.to_json()) gives the
same plan, for the plans the fixtures build (the golden scenarios under other options and --limit) and
after the stages of building a run's plan (pin.stamp, pre_deploy.attach, plan.with_job_specs)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.deploy import pin as _pin
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.deploy import pre_deploy as _pre_deploy
from ansible_collections.maand.core.plugins.plugin_utils.deploy.records import ABSENT, Plan, PlanError
from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError
from tests.unit.plugin_utils.deploy.test_deploy_plan_golden import SCENARIOS, emitted


def _round_trip(plan):
    data = json.loads(json.dumps(plan.to_json(), sort_keys=True))
    again = Plan.from_json(data)
    assert again == plan
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(data, sort_keys=True)
    return again


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_golden_plans_read_back_as_they_are(name):
    data = emitted(name)
    assert json.dumps(Plan.from_json(data).to_json(), sort_keys=True) == json.dumps(data, sort_keys=True)


@st.composite
def plans(draw):
    """A plan of a golden scenario, under other options and a --limit, maybe through the run's stages."""
    cat, cont, states, hosts, opts = SCENARIOS[draw(st.sampled_from(sorted(SCENARIOS)))]()
    opts = dict(opts or {})
    jobs = sorted(j["name"] for j in cat["jobs"])
    if draw(st.booleans()):
        opts["jobs"] = draw(st.lists(st.sampled_from(jobs), unique=True, max_size=len(jobs)))
    opts["force"] = opts.get("force") or draw(st.booleans())
    hosts = draw(st.lists(st.sampled_from(hosts), unique=True, min_size=1, max_size=len(hosts)))
    plan = _plan.build(cat, cont, states, hosts, opts)
    if draw(st.booleans()):
        plan = _pin.stamp(plan, cat)
    if draw(st.booleans()):
        hooked = [j for j in jobs if draw(st.booleans())]
        record = _pre_deploy.entry(hooked, plan.job_waves, cont, {}, plan.update_seq, draw(st.booleans()), {})
        plan = _pre_deploy.attach(plan, record, draw(st.booleans()), {})
    if draw(st.booleans()):
        specs = {j: {"priority": draw(st.integers(0, 3)), "working_directory": "bin"} for j in jobs if draw(st.booleans())}
        workers = {w["host"]: w for w in cat["workers"]}
        plan = _plan.with_job_specs(plan, specs, workers, {}, draw(st.integers(0, 4)))
    return plan


@given(plans())
@settings(max_examples=150, deadline=None)
def test_from_json_of_to_json_is_the_same_plan(plan):
    _round_trip(plan)


def test_the_stages_return_new_plans_and_edit_none():
    cat, cont, states, hosts, opts = SCENARIOS["hooks"]()
    plan = _plan.build(cat, cont, states, hosts, opts)
    before = json.dumps(plan.to_json(), sort_keys=True)
    stamped = _pin.stamp(plan, cat)
    attached = _plan.with_job_specs(stamped, {"web": {"priority": 2}}, {}, {}, 3)
    pre = _pre_deploy.attach(attached, _pre_deploy.entry(["ord"], plan.job_waves, cont, {}, 1, False, {}), False, {})
    assert json.dumps(plan.to_json(), sort_keys=True) == before
    assert plan.plan_hash is ABSENT and "plan_hash" not in plan.to_json() and stamped.plan_hash == attached.plan_hash
    assert all(o.slots is ABSENT for s in stamped.steps for ops in s.ops.values() for o in ops)
    assert all(o.slots == 3 for s in attached.steps for ops in s.ops.values() for o in ops)
    assert pre.to_json()["pre_deploy"]["jobs"] == ["ord"] and "pre_deploy" not in attached.to_json()
    _round_trip(pre)


@pytest.mark.parametrize("bad, match", [([], "JSON object"), ({"bucket_id": "b"}, "missing"),
                                        ({**emitted("adopt"), "rows": [{"job": "api"}]}, "'worker' is missing")])
def test_what_is_not_a_plan_is_a_plan_error(bad, match):
    with pytest.raises(PlanError, match=match) as err:
        Plan.from_json(bad)
    assert isinstance(err.value, MaandError)

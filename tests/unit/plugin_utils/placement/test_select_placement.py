"""The placement block: count, least-waste, spread, with, scale_with, avoid, stickiness and bad input."""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from tests.bucket_factory import make_bucket, set_job, set_workers

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'


def W(i, mem="8 gb", cpu="8000 mhz", zone=None, labels=(), **extra):
    worker = {"host": "10.0.0.%d" % i, "labels": ["worker"] + list(labels), "memory": mem, "cpu": cpu}
    if zone:
        worker["tags"] = {"zone": zone}
    worker.update(extra)
    return worker


def hosts_of(result, job, states=("active", "disabled")):
    return [a["worker"] for a in result.catalog["allocations"] if a["job"] == job and a["state"] in states]


def errors(result):
    return [(p.kind, p.file, p.field, p.message, p.fix) for p in result.report.errors]


def compute(tmp_path, workers, jobs, **kw):
    make_bucket(tmp_path, workers, jobs, maand_conf=CONF, **kw)
    return _service.compute(str(tmp_path))


def job(count=None, strategy=None, mem=None, **placement):
    manifest = {"selectors": ["worker"]}
    if count is not None:
        placement["count"] = count
    if strategy:
        placement["strategy"] = strategy
    if placement:
        manifest["placement"] = placement
    if mem:
        manifest["resources"] = {"memory": {"max": mem}}
    return manifest


# --- least-waste ----------------------------------------------------------------------------------

def test_least_waste_spec_example_mem_3g_picks_the_4g_machine(tmp_path):
    # Juju's spec: ram=3G, machines with 4G and 6G -> the 4G one (the 6G one comes first by position)
    manifest = dict(job(count=1, strategy="least-waste"), hardware="mem=3G")
    result = compute(tmp_path, [W(1, mem="6 gb"), W(2, mem="4 gb"), W(3, mem="2 gb")], {"api": manifest})
    assert result.report.ok, errors(result)
    assert hosts_of(result, "api") == ["10.0.0.2"]


def test_least_waste_is_the_default_strategy_with_count(tmp_path):
    result = compute(tmp_path, [W(1, mem="6 gb"), W(2, mem="4 gb")], {"api": job(count=1)})
    assert hosts_of(result, "api") == ["10.0.0.2"]


def test_least_waste_charges_each_choice_before_the_next(tmp_path):
    # both 3 GB jobs would prefer the 4 GB worker; the first (by name) takes it, the second no longer fits
    result = compute(tmp_path, [W(1, mem="6 gb"), W(2, mem="4 gb")],
                     {"a": job(count=1, mem="3 gb"), "b": job(count=1, mem="3 gb")})
    assert result.report.ok, errors(result)
    assert (hosts_of(result, "a"), hosts_of(result, "b")) == (["10.0.0.2"], ["10.0.0.1"])


def test_least_waste_sees_the_reservations_of_jobs_placed_everywhere(tmp_path):
    # "zz-big" (no count) reserves 3 GB on both; jobs without count are placed first, whatever their
    # names: the 6 GB worker then has 3 GB spare, the 4 GB one 1 GB: a 1 GB count job goes to the 4 GB
    # worker; a 2 GB one only fits on the 6 GB one
    workers = [W(1, mem="6 gb"), W(2, mem="4 gb")]
    result = compute(tmp_path, workers, {"zz-big": job(mem="3 gb"), "aa": job(count=1, mem="1 gb")})
    assert hosts_of(result, "aa") == ["10.0.0.2"]
    result = compute(tmp_path, workers, {"zz-big": job(mem="3 gb"), "aa": job(count=1, mem="2 gb")})
    assert result.report.ok, errors(result)
    assert hosts_of(result, "aa") == ["10.0.0.1"]


def test_least_waste_ties_by_cpu_then_storage_then_position(tmp_path):
    workers = [W(1, cpu="8000 mhz"), W(2, cpu="4000 mhz"), W(3, cpu="4000 mhz", storage="50 gb"),
               W(4, cpu="4000 mhz", storage="20 gb")]
    assert hosts_of(compute(tmp_path, workers, {"api": job(count=1)}), "api") == ["10.0.0.4"]
    assert hosts_of(compute(tmp_path, workers, {"api": job(count=3)}), "api") == ["10.0.0.2", "10.0.0.3", "10.0.0.4"]
    same = [W(1), W(2), W(3)]
    assert hosts_of(compute(tmp_path, same, {"api": job(count=2)}), "api") == ["10.0.0.1", "10.0.0.2"]


def test_count_skips_workers_without_room_and_says_so(tmp_path):
    result = compute(tmp_path, [W(1, mem="1 gb"), W(2, mem="4 gb")], {"api": job(count=2, mem="2 gb")})
    [error] = errors(result)
    assert error[:3] == ("ErrInsufficientAllocations", "workspace/jobs/api/manifest.json", "$.placement.count")
    assert "needs 2 workers (placement.count), only 1 eligible" in error[3]
    assert "1 capacity exhausted" in error[3] and "explain" in error[4]


# --- spread ----------------------------------------------------------------------------------------

ZONED = [W(1, zone="a"), W(2, zone="a"), W(3, zone="a"), W(4, zone="b"), W(5, zone="b"), W(6, zone="c")]


@pytest.mark.parametrize("count, want", [
    (1, ["10.0.0.1"]),
    (3, ["10.0.0.1", "10.0.0.4", "10.0.0.6"]),
    (4, ["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.6"]),
    (5, ["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"]),
])
def test_spread_is_even_across_zones_ties_by_position(tmp_path, count, want):
    result = compute(tmp_path, ZONED, {"api": job(count=count, strategy="spread")})
    assert result.report.ok, errors(result)
    assert hosts_of(result, "api") == want


def test_spread_by_another_tag(tmp_path):
    workers = [W(1, tags={"rack": "r1"}), W(2, tags={"rack": "r1"}), W(3, tags={"rack": "r2"})]
    result = compute(tmp_path, workers, {"api": job(count=2, strategy="spread", spread_by="rack")})
    assert hosts_of(result, "api") == ["10.0.0.1", "10.0.0.3"]


# --- with / scale_with / avoid ------------------------------------------------------------------------

def test_with_places_only_where_the_other_job_is_active(tmp_path):
    # "a-cache" sorts before "z-db": the order comes from the reference, not from the names
    jobs = {"z-db": job(count=2, strategy="spread"), "a-cache": job(**{"with": "z-db"}),
            "b-one": job(count=1, **{"with": "z-db"})}
    result = compute(tmp_path, ZONED, jobs)
    assert result.report.ok, errors(result)
    db = hosts_of(result, "z-db")
    assert hosts_of(result, "a-cache") == db and hosts_of(result, "b-one") == db[:1]


def test_with_ignores_disabled_allocations_and_scale_with_uses_every_active_one(tmp_path):
    jobs = {"db": {"selectors": ["db"]}, "agent": {"placement": {"scale_with": "db"}}}
    workers = [W(1, labels=["db"]), W(2, labels=["db"]), W(3, labels=["db"]), W(4)]
    result = compute(tmp_path, workers, jobs, disabled={"jobs": {"db": {"allocations": ["10.0.0.2"]}}})
    assert result.report.ok, errors(result)
    # no selectors with scale_with: every worker may take it (not the default label "agent")
    assert hosts_of(result, "agent") == ["10.0.0.1", "10.0.0.3"]


def test_avoid_keeps_jobs_apart_and_mutual_avoid_is_not_a_cycle(tmp_path):
    jobs = {"db": job(count=2), "web": job(avoid=["db"])}
    result = compute(tmp_path, ZONED, jobs)
    assert result.report.ok, errors(result)
    assert not set(hosts_of(result, "db")) & set(hosts_of(result, "web"))
    assert len(hosts_of(result, "db")) + len(hosts_of(result, "web")) == 6
    jobs = {"a": job(count=3, avoid=["b"]), "b": job(count=3, avoid=["a"])}
    result = compute(tmp_path, ZONED, jobs)
    assert result.report.ok, errors(result)
    assert not set(hosts_of(result, "a")) & set(hosts_of(result, "b"))


def test_chain_of_with_is_placed_in_dependency_order(tmp_path):
    jobs = {"a": job(count=1, **{"with": "b"}), "b": job(count=2, **{"with": "c"}), "c": job(count=3)}
    result = compute(tmp_path, ZONED, jobs)
    assert result.report.ok, errors(result)
    a, b, c = (set(hosts_of(result, n)) for n in "abc")
    assert len(c) == 3 and len(b) == 2 and len(a) == 1 and a <= b <= c


def test_count_zero_places_nothing_without_a_warning(tmp_path):
    result = compute(tmp_path, ZONED, {"api": job(count=0)})
    assert result.report.ok and hosts_of(result, "api") == []
    assert not [w for w in result.report.warnings if "no worker" in w.message]


# --- bad input: file, job, path, fix; nothing written ------------------------------------------------

@pytest.mark.parametrize("placement, path, words", [
    ({"count": "2"}, "$.placement.count", "whole number"),
    ({"count": -1}, "$.placement.count", "whole number"),
    ({"count": True}, "$.placement.count", "whole number"),
    ({"count": 1, "strategy": "binpack"}, "$.placement.strategy", "unknown strategy"),
    ({"strategy": "spread"}, "$.placement.strategy", "needs a count"),
    ({"count": 1, "spread_by": "rack"}, "$.placement.spread_by", "only applies with strategy spread"),
    ({"count": 1, "strategy": "spread", "spread_by": ""}, "$.placement.spread_by", "tag name"),
    ({"cuont": 1}, "$.placement.cuont", "unknown placement key"),
    ({"with": "nope"}, "$.placement.with", "unknown job nope"),
    ({"scale_with": "nope"}, "$.placement.scale_with", "unknown job nope"),
    ({"avoid": ["nope"]}, "$.placement.avoid[0]", "unknown job nope"),
    ({"with": "api"}, "$.placement.with", "the job itself"),
    ({"with": 3}, "$.placement.with", "job name"),
    ({"avoid": "db"}, "$.placement.avoid", "list of job names"),
    ({"avoid": [1]}, "$.placement.avoid", "list of job names"),
    ({"with": "db", "scale_with": "db"}, "$.placement.scale_with", "exclude each other"),
    ({"scale_with": "db", "count": 2}, "$.placement.scale_with", "cannot be combined with count"),
])
def test_malformed_placement_is_an_error_with_path_and_fix(tmp_path, placement, path, words):
    result = compute(tmp_path, ZONED, {"api": {"selectors": ["worker"], "placement": placement},
                                       "db": job()})
    found = [e for e in errors(result) if e[2] == path]
    assert found, errors(result)
    kind, file, dummy, message, fix = found[0]
    assert kind == "ErrInvalidPlacement" and file == "workspace/jobs/api/manifest.json"
    assert message.startswith("job api: ") and words in message and fix
    outcome = _service.build(str(tmp_path))
    assert not outcome.written and not os.path.exists(os.path.join(str(tmp_path), "data", "catalog.json"))


def test_count_larger_than_eligible_is_insufficient_allocations_with_numbers(tmp_path):
    manifest = dict(job(count=3), constraints={"properties": ["zone=b"]})
    result = compute(tmp_path, ZONED, {"api": manifest})
    [error] = errors(result)
    assert error[:3] == ("ErrInsufficientAllocations", "workspace/jobs/api/manifest.json", "$.placement.count")
    assert "job api needs 3 workers (placement.count), only 2 eligible" in error[3]
    assert "api: 2/6 workers (count 3): 4 missing property zone=b" in error[3]
    outcome = _service.build(str(tmp_path))
    assert not outcome.written
    # the build output explains the job that got fewer allocations than it asked for
    text = _service.explain_short_jobs(outcome)["api"]
    assert text[0].startswith("api: 2/6 workers") and any("property zone=b missing" in line for line in text)


@pytest.mark.parametrize("jobs, cycle", [
    ({"a": job(**{"with": "b"}), "b": job(**{"with": "a"})}, "a -> b -> a"),
    ({"a": job(**{"with": "b"}), "b": job(**{"scale_with": "c"}), "c": job(avoid=["a"])}, None),
])
def test_with_cycles_are_errors(tmp_path, jobs, cycle):
    result = compute(tmp_path, ZONED, jobs)
    found = [e for e in errors(result) if "placement cycle" in e[3]]
    assert found and found[0][0] == "ErrInvalidPlacement" and found[0][2] == "$.placement" and found[0][4]
    if cycle:
        assert cycle in found[0][3] or "b -> a -> b" in found[0][3]


# --- stickiness ---------------------------------------------------------------------------------------

def build(tmp_path):
    outcome = _service.build(str(tmp_path))
    assert outcome.report.ok, [str(p) for p in outcome.report.errors]
    return outcome


def test_unrelated_edits_never_move_a_count_placed_job(tmp_path):
    make_bucket(tmp_path, [W(1, mem="6 gb"), W(2, mem="8 gb")], {"api": job(count=1)}, maand_conf=CONF)
    first = hosts_of(build(tmp_path), "api")
    assert first == ["10.0.0.1"]
    # a new worker that least-waste would prefer (4 GB), another job, a new label: api stays
    set_workers(tmp_path, [W(1, mem="6 gb"), W(2, mem="8 gb", labels=["x"]), W(3, mem="4 gb")])
    set_job(tmp_path, "other", job(count=1))
    outcome = build(tmp_path)
    assert hosts_of(outcome, "api") == first
    assert hosts_of(outcome, "other") == ["10.0.0.3"]  # a fresh bucket would have put api there
    assert not any("api@" in line for line in outcome.changes)


def test_count_up_adds_count_down_removes_only_the_difference(tmp_path):
    workers = [W(i, mem="%d gb" % (20 - i)) for i in range(1, 7)]
    make_bucket(tmp_path, workers, {"api": job(count=2)}, maand_conf=CONF)
    first = hosts_of(build(tmp_path), "api")
    set_workers(tmp_path, workers + [W(9, mem="1 gb")])  # best fit for new choices from now on
    set_job(tmp_path, "api", job(count=3))
    up = hosts_of(build(tmp_path), "api")
    assert set(first) < set(up) and "10.0.0.9" in up
    set_job(tmp_path, "api", job(count=1))
    down = build(tmp_path)
    assert len(hosts_of(down, "api")) == 1 and set(hosts_of(down, "api")) < set(up)
    assert set(hosts_of(down, "api", states=("removed",))) == set(up) - set(hosts_of(down, "api"))


def test_spread_count_up_fills_the_emptiest_zones_around_the_kept_ones(tmp_path):
    make_bucket(tmp_path, ZONED, {"api": job(count=2, strategy="spread")}, maand_conf=CONF)
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1", "10.0.0.4"]
    set_job(tmp_path, "api", job(count=4, strategy="spread"))
    # zone c is empty -> 10.0.0.6; then a and b hold one each -> the lower position, 10.0.0.2
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.6"]


def test_spread_stays_put_when_a_zone_appears(tmp_path):
    make_bucket(tmp_path, [W(1, zone="a"), W(2, zone="a")], {"api": job(count=2, strategy="spread")},
                maand_conf=CONF)
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1", "10.0.0.2"]
    set_workers(tmp_path, [W(1, zone="a"), W(2, zone="a"), W(3, zone="b")])
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1", "10.0.0.2"]


def test_only_the_invalid_allocation_moves(tmp_path):
    make_bucket(tmp_path, [W(1, labels=["ok"]), W(2, labels=["ok"]), W(3, labels=["ok"])],
                {"api": dict(job(count=2), constraints={"properties": ["ok"]})}, maand_conf=CONF)
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1", "10.0.0.2"]
    set_workers(tmp_path, [W(1, labels=["ok"]), W(2), W(3, labels=["ok"])])  # 10.0.0.2 no longer qualifies
    outcome = build(tmp_path)
    assert hosts_of(outcome, "api") == ["10.0.0.1", "10.0.0.3"]
    assert hosts_of(outcome, "api", states=("removed",)) == ["10.0.0.2"]


def test_drained_worker_keeps_its_allocation_but_gets_no_new_one(tmp_path):
    make_bucket(tmp_path, [W(1), W(2), W(3)], {"api": job(count=1), "new": job()}, maand_conf=CONF)
    assert hosts_of(build(tmp_path), "api") == ["10.0.0.1"]
    with open(os.path.join(str(tmp_path), "workspace", "disabled.json"), "w") as handle:
        json.dump({"workers": ["10.0.0.1", "10.0.0.2"]}, handle)
    set_job(tmp_path, "fresh", job(count=1))
    outcome = build(tmp_path)
    assert hosts_of(outcome, "api", states=("disabled",)) == ["10.0.0.1"]  # sticky, as maand's disable
    assert hosts_of(outcome, "fresh") == ["10.0.0.3"]  # drained workers get no new allocation

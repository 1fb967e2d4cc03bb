"""max_concurrent_starts / max_concurrent_upgrades as a percentage of the job's allocations ("25%", rounded up,
at least 1; Ansible's serial, Kubernetes' maxUnavailable): build refuses a bad value naming the file, the field
and the fix, resolves a good one over the job's active allocations into the catalog's int, and the plan rolls
in batches of that size and names the number."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.bucket import job_checks
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.deploy import schedule as _schedule
from tests.bucket_factory import make_bucket

MANIFEST = "workspace/jobs/web/manifest.json"


def _workers(n):
    return [{"host": "10.0.0.%d" % (i + 1), "labels": ["web"], "memory": "4 gb", "cpu": "4 ghz"} for i in range(n)]


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=1, max_value=100))
@settings(max_examples=200, deadline=None)
def test_percent_batches_cover_every_allocation_once_within_the_resolved_limit(n, percent):
    limit = job_checks.resolve_batch_size("%d%%" % percent, n)
    assert limit == max(1, math.ceil(n * percent / 100))
    items = list(range(n))
    out = _schedule.batches(items, limit)
    assert [i for batch in out for i in batch] == items  # every allocation once, in order
    assert all(0 < len(batch) <= limit for batch in out)
    assert len(out) == math.ceil(n / limit)


def test_a_count_stays_as_it_is():
    assert job_checks.resolve_batch_size(3, 10) == 3 and job_checks.resolve_batch_size(0, 10) == 0


@pytest.mark.parametrize("value, words", [
    ("0%", "out of range"), ("150%", "out of range"), ("abc", "neither a count nor a percentage"),
    ("-25%", "neither a count nor a percentage"), ("25", "neither a count nor a percentage"),
    ("2.5%", "neither a count nor a percentage"), (-2, "must be >= 0")])
@pytest.mark.parametrize("field", ["max_concurrent_upgrades", "max_concurrent_starts"])
def test_build_refuses_a_bad_batch_size_naming_the_file_field_and_fix(tmp_path, field, value, words):
    make_bucket(tmp_path, _workers(2), {"web": {"selectors": ["web"], field: value}})
    result = _service.compute(str(tmp_path))
    problems = [p for p in result.report.errors if p.field == field]
    assert len(problems) == 1, [str(p) for p in result.report.errors]
    problem = problems[0]
    assert (problem.kind, problem.file) == ("ErrInvalidManifest", MANIFEST)
    assert words in problem.message, problem.message
    assert "1 or more" in problem.fix or "0 (every new allocation" in problem.fix


def test_a_percentage_is_refused_on_maands_own_names(tmp_path):
    make_bucket(tmp_path, _workers(2), {"web": {"selectors": ["web"], "update_parallel_count": "50%"}})
    result = _service.compute(str(tmp_path))
    assert [(p.file, p.field) for p in result.report.errors] == [(MANIFEST, "$.update_parallel_count")]


def test_build_resolves_a_percentage_over_the_active_allocations(tmp_path):
    make_bucket(tmp_path, _workers(3), {"web": {"selectors": ["web"], "max_concurrent_upgrades": "34%",
                                                "max_concurrent_starts": "100%"}, "api": {"selectors": ["web"]}},
                disabled={"jobs": {"web": {"allocations": ["10.0.0.3"]}}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, [str(p) for p in result.report.errors]
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    # 2 active allocations (the third is disabled): 34% of 2 rounds up to 1; 100% of 2 is 2
    assert (jobs["web"]["max_concurrent_upgrades"], jobs["web"]["max_concurrent_starts"]) == (1, 2)
    assert jobs["web"]["batch_percent"] == {"max_concurrent_upgrades": "34%", "max_concurrent_starts": "100%", "of": 2}
    assert "batch_percent" not in jobs["api"]  # a count: the catalog as before


def test_34_percent_of_3_upgrades_in_2_batches_and_the_plan_names_the_number(tmp_path):
    make_bucket(tmp_path, _workers(3), {"web": {"selectors": ["web"], "max_concurrent_upgrades": "34%"}})
    result = _service.compute(str(tmp_path), bucket_id="b1")
    assert result.report.ok, [str(p) for p in result.report.errors]
    catalog = result.catalog
    web = next(j for j in catalog["jobs"] if j["name"] == "web")
    assert web["max_concurrent_upgrades"] == 2
    hosts = [w["host"] for w in catalog["workers"]]
    old = {"web": {"hash": "old", "files": {"Makefile": "x"}}}
    content = {"web": {"hash": "new", "files": {"Makefile": "y"}}}
    states = {h: {"reachable": True, "exists": True, "worker": None, "jobs": None, "trees": ["web"], "deployed": {
        "web": _plan.state_record("web", "web-%s" % h, old["web"], web["version"], True, 1)}} for h in hosts}
    plan = _plan.compute_plan(catalog, content, states, hosts)
    labels = sorted({s["label"] for s in plan["steps"]})
    assert labels == ["wave 0: web upgrade batch 1/2", "wave 0: web upgrade batch 2/2"], labels
    sizes = [sum(1 for ops in s["ops"].values() for o in ops if o["kind"] == "run") for s in plan["steps"]]
    assert sorted(sizes) == [1, 2]
    assert "note: job web: max_concurrent_upgrades 34% of 3 active allocation(s) = batches of 2" in plan["lines"]

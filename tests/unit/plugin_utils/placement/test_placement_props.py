"""Property tests of placement through the build: determinism, maand compatibility, known error kinds only,
explanations agree with placement, count / spread invariants and stickiness."""

import json
import os
import tempfile

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.placement import explain as _explain
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import KINDS
from tests.bucket_factory import make_bucket, set_workers

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
LABELS = ["a", "b", "c", "ssd"]
ZONES = ["z1", "z2", "z3"]
JOBS = ["j0", "j1", "j2", "j3", "j4"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def workers(draw, min_size=1, max_size=8):
    n = draw(st.integers(min_size, max_size))
    out = []
    for i in range(n):
        worker = {"host": "10.0.0.%d" % (i + 1), "labels": draw(st.lists(st.sampled_from(LABELS), max_size=3, unique=True)),
                  "memory": "%d gb" % draw(st.sampled_from([2, 4, 6, 8, 16])), "cpu": "8000 mhz",
                  "tags": {"zone": draw(st.sampled_from(ZONES))}}
        if draw(st.booleans()):
            worker["cores"] = draw(st.sampled_from([1, 2, 4]))
        out.append(worker)
    return out


constraints = st.recursive(
    st.one_of(
        st.builds(lambda p: {"properties": p},
                  st.lists(st.sampled_from(LABELS + ["^" + x for x in LABELS] + ["zone=" + z for z in ZONES]),
                           max_size=2)),
        st.builds(lambda r: {"ranks": [r]}, st.sampled_from(["0", "1-3", "0,2,4", "5-100", ""])),
        st.builds(lambda h: {"hostlist": [h]}, st.sampled_from(["10.0.0.[1-3]", "10.0.0.[2,4-5]", "10.0.0.7"])),
    ),
    lambda kids: st.one_of(st.builds(lambda k: {"and": k}, st.lists(kids, max_size=3)),
                           st.builds(lambda k: {"or": k}, st.lists(kids, max_size=3)),
                           st.builds(lambda k: {"not": k}, st.lists(kids, max_size=2))),
    max_leaves=5)


@st.composite
def rich_jobs(draw, junk=False):
    names = JOBS[:draw(st.integers(1, len(JOBS)))]
    jobs = {}
    for name in names:
        manifest = {"selectors": draw(st.lists(st.sampled_from(LABELS + ["worker"]), min_size=1, max_size=2,
                                               unique=True))}
        if draw(st.booleans()):
            manifest["constraints"] = draw(constraints)
        if draw(st.booleans()):
            manifest["hardware"] = draw(st.sampled_from(["mem=4G", "mem=max", "cores=2", "mem=3G cores=1", "mem=0"]))
        if draw(st.booleans()):
            manifest["resources"] = {"memory": {"max": "%d gb" % draw(st.integers(1, 3))}}
        if draw(st.booleans()):
            placement = {}
            if draw(st.booleans()):
                placement["count"] = draw(st.integers(0, 3))
                placement["strategy"] = draw(st.sampled_from(["least-waste", "spread"]))
            others = [n for n in names if n != name]
            if others and draw(st.booleans()):
                placement[draw(st.sampled_from(["with", "avoid", "scale_with"]))] = draw(st.sampled_from(others))
                if "avoid" in placement:
                    placement["avoid"] = [placement["avoid"]]
                if "scale_with" in placement:
                    placement.pop("count", None)
                    placement.pop("strategy", None)
            manifest["placement"] = placement
        if junk and draw(st.booleans()):
            key = draw(st.sampled_from(["constraints", "hardware", "placement"]))
            manifest[key] = draw(st.sampled_from([
                {"bogus": []}, {"hostlist": ["n[2-1]"]}, {"ranks": [3]}, "mem=lots", {"disk": "1G"},
                {"count": -1}, {"with": "nope"}, {"avoid": "j0"}, {"strategy": "spread"}, {"with": name},
                {"count": 99}]))
            if key == "hardware" and isinstance(manifest[key], dict) and "count" in manifest[key]:
                manifest[key] = "cores=1.5"
            if key == "constraints" and not isinstance(manifest[key], dict):
                manifest[key] = {"properties": "x"}
        jobs[name] = manifest
    return jobs


def compute(root, fleet, jobs, **kw):
    make_bucket(root, fleet, jobs, maand_conf=CONF, **kw)
    return _service.compute(root)


def placed(result):
    return sorted((a.job, a.worker, a.state) for a in result.placement.allocations)


@SETTINGS
@given(workers(), rich_jobs(junk=True))
def test_build_succeeds_or_reports_only_known_error_kinds_with_file_and_fix(fleet, jobs):
    with tempfile.TemporaryDirectory() as root:
        result = compute(root, fleet, jobs)  # never raises
        for problem in result.report.errors:
            assert problem.kind in KINDS and problem.file and problem.message and problem.fix
        assert (result.catalog is None) == (not result.report.ok)


@SETTINGS
@given(workers(), rich_jobs())
def test_placement_is_deterministic_and_a_rebuild_changes_nothing(fleet, jobs):
    with tempfile.TemporaryDirectory() as root:
        first = compute(root, fleet, jobs)
        assert placed(first) == placed(_service.compute(root))
        assume(first.report.ok)
        outcome = _service.build(root)
        again = _service.build(root)
        assert again.report.ok and not again.changed and again.changes == []
        assert outcome.catalog["allocations"] == again.catalog["allocations"]


@SETTINGS
@given(workers(), st.dictionaries(st.sampled_from(JOBS),
                                  st.lists(st.sampled_from(LABELS + ["worker"]), max_size=3), min_size=1))
def test_a_bucket_without_the_new_fields_places_exactly_by_labels(fleet, selectors):
    jobs = {name: ({"selectors": sel} if sel else {}) for name, sel in selectors.items()}
    with tempfile.TemporaryDirectory() as root:
        result = compute(root, fleet, jobs)
        expected = set()
        for name, sel in selectors.items():
            want = set(sel or [name])
            for w in fleet:
                if want <= set(w["labels"]) | {"worker"}:
                    expected.add((name, w["host"]))
        assert {(a.job, a.worker) for a in result.placement.allocations} == expected
        for job in result.catalog["jobs"] if result.catalog else ():
            assert not {"constraints", "hardware", "placement"} & set(job)


@SETTINGS
@given(workers(), rich_jobs())
def test_explanations_agree_with_placement_for_every_job_and_worker(fleet, jobs):
    with tempfile.TemporaryDirectory() as root:
        result = compute(root, fleet, jobs)
        where = {(a.job, a.worker) for a in result.placement.allocations}
        for name, job in result.bucket.jobs.items():
            summary = _explain.summary(result.bucket, result.placement, name)
            assert summary.startswith("%s: " % name)
            for worker in result.bucket.workers:
                status, reasons = _explain.explain_worker(result.bucket, result.placement, name, worker.index)
                assert status.startswith("placed") == ((name, worker.host) in where)
                if not status.startswith("placed"):
                    assert reasons, (name, worker.host)  # a rejected worker always says why


@SETTINGS
@given(workers(min_size=2), st.integers(1, 6), st.sampled_from(["least-waste", "spread"]))
def test_count_places_min_of_count_and_eligible_and_spread_is_even(fleet, count, strategy):
    jobs = {"api": {"selectors": ["worker"], "placement": {"count": count, "strategy": strategy}}}
    with tempfile.TemporaryDirectory() as root:
        result = compute(root, fleet, jobs)
        hosts = [a.worker for a in result.placement.allocations]
        assert len(hosts) == min(count, len(fleet)) and len(set(hosts)) == len(hosts)
        assert result.report.ok == (count <= len(fleet))
        if strategy == "spread":
            zone = {w["host"]: w["tags"]["zone"] for w in fleet}
            per = {z: 0 for z in ZONES if any(w["tags"]["zone"] == z for w in fleet)}
            for host in hosts:
                per[zone[host]] += 1
            # a zone with an unchosen worker is never more than one behind the fullest zone
            for z, n in per.items():
                if any(zone[w["host"]] == z and w["host"] not in hosts for w in fleet):
                    assert n >= max(per.values()) - 1


@SETTINGS
@given(workers(min_size=2), st.integers(1, 3), st.sampled_from(["least-waste", "spread"]), workers(max_size=3))
def test_adding_workers_never_moves_a_count_placed_job(fleet, count, strategy, extra):
    assume(count <= len(fleet))
    jobs = {"api": {"selectors": ["worker"], "placement": {"count": count, "strategy": strategy},
                    "resources": {"memory": {"max": "1 gb"}}},
            "base": {"selectors": ["a"]}}
    with tempfile.TemporaryDirectory() as root:
        make_bucket(root, fleet, jobs, maand_conf=CONF)
        first = _service.build(root)
        assume(first.report.ok)
        before = sorted(a["worker"] for a in first.catalog["allocations"] if a["job"] == "api")
        for k, worker in enumerate(extra):
            worker["host"] = "10.0.1.%d" % (k + 1)
        set_workers(root, fleet + extra)
        second = _service.build(root)
        assert second.report.ok
        assert sorted(a["worker"] for a in second.catalog["allocations"] if a["job"] == "api") == before
        json.dumps(second.catalog)
        assert os.path.exists(os.path.join(root, "data", "catalog.json"))

"""The core's one-way data flow (issue 9, item 5): one worker index answers what the three separate
indexes answered; placement returns shortfalls as data and _explain words them; compiling the rules
never rewrites the model's job.selectors."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.placement import explain as _explain
from ansible_collections.maand.core.plugins.plugin_utils.placement.constraints import FleetIndex
from ansible_collections.maand.core.plugins.plugin_utils.placement.fleet import WorkerIndex
from ansible_collections.maand.core.plugins.plugin_utils.placement.hardware import KEYS, HardwareIndex
from ansible_collections.maand.core.plugins.plugin_utils.bucket.model import Worker, load_bucket
from ansible_collections.maand.core.plugins.plugin_utils.placement.select import compile_rules
from ansible_collections.maand.core.plugins.plugin_utils.placement.place import NO_ELIGIBLE_WORKER, NO_SELECTOR_MATCH, SHORT_OF_COUNT, Shortfall, place
from tests.bucket_factory import make_bucket

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
LABELS = ["worker", "web", "db", "ssd"]


def model_worker(i, labels, tags, hostname, memory, cores):
    w = Worker()
    w.host, w.hostname, w.index, w.position = "10.0.0.%d" % i, hostname, i, i * 2
    w.labels = tuple(sorted(set(labels) | {"worker"}))
    w.tags = tags
    w.zone = tags.get("zone", "")
    w.memory_mb, w.cpu_mhz, w.cores, w.storage_mb = memory, None if memory is None else memory * 2, cores, None
    return w


def record(w):
    """The dict records the scheduler used to build for FleetIndex / HardwareIndex."""
    return {"host": w.host, "hostname": w.hostname, "position": w.position, "labels": w.labels, "tags": w.tags,
            "memory_mb": w.memory_mb, "cpu_mhz": w.cpu_mhz, "cores": w.cores, "storage_mb": w.storage_mb}


workers_strategy = st.lists(st.tuples(
    st.lists(st.sampled_from(LABELS), max_size=3),
    st.dictionaries(st.sampled_from(["zone", "rack"]), st.sampled_from(["a", "B", "c"]), max_size=2),
    st.one_of(st.none(), st.sampled_from(["Node1", "node2"])),
    st.one_of(st.none(), st.sampled_from([512.0, 1024.0, 4096.0])),
    st.one_of(st.none(), st.integers(1, 8)),
), max_size=12)


@settings(max_examples=80, deadline=None)
@given(specs=workers_strategy)
def test_one_index_answers_what_the_three_answered(specs):
    workers = [model_worker(i, *spec) for i, spec in enumerate(specs)]
    index = WorkerIndex(workers)
    records = [record(w) for w in workers]
    fleet, hardware = FleetIndex(records), HardwareIndex(records)
    for name in LABELS + ["zone=b", "rack=a", "nothing"]:
        assert index.property_mask(name) == fleet.property_mask(name)
    for names in (frozenset({"node1"}), frozenset({"10.0.0.1", "node2"})):
        assert index.host_mask(names) == fleet.host_mask(names)
    assert index.rank_ranges_mask(((0, 4), (9, 11))) == fleet.rank_ranges_mask(((0, 4), (9, 11)))
    for i in range(len(workers)):
        assert index.properties_of(i) == fleet.properties_of(i)
        assert index.host_names_of(i) == fleet.host_names_of(i)
    for key in KEYS:
        for threshold in (0, 1000.0, 2048.0, 4):
            assert index.at_least_mask(key, threshold) == hardware.at_least_mask(key, threshold)
    for selectors in ((), ("web",), ("web", "db"), ("absent",)):  # maand's rule: every selector is a label
        want = sum(1 << i for i, w in enumerate(workers) if set(selectors) <= set(w.labels))
        assert index.selector_mask(selectors) == want
    assert index.hosts_mask(["10.0.0.1", "unknown"]) == (0b10 if len(workers) > 1 else 0)


def bucket(tmp_path, jobs, workers=None):
    workers = workers or [{"host": "10.0.0.%d" % i, "labels": ["web"] if i < 2 else []} for i in range(3)]
    make_bucket(tmp_path, workers, jobs, maand_conf=CONF)
    return str(tmp_path)


JOBS = {
    "counted": {"selectors": ["worker"], "placement": {"count": 5}},
    "nolabel": {"selectors": ["gpu"]},
    "norule": {"selectors": ["web"], "constraints": {"hostlist": ["nowhere"]}},
    "fine": {"selectors": ["web"]},
}


def test_placement_returns_shortfalls_as_data_and_words_nothing(tmp_path):
    loaded, report = load_bucket(bucket(tmp_path, JOBS))
    compile_rules(loaded, report)  # as _build does after loading
    assert report.ok, report.error_text()
    placement = place(loaded, None, report)
    assert placement.shortfalls == [Shortfall("counted", SHORT_OF_COUNT, 5, 3),
                                    Shortfall("nolabel", NO_SELECTOR_MATCH),
                                    Shortfall("norule", NO_ELIGIBLE_WORKER)]
    assert report.ok and not report.warnings, "placement must not word its shortfalls"
    _explain.report_shortfalls(loaded, placement, report)
    assert [(p.kind, p.field) for p in report.errors] == [("ErrInsufficientAllocations", "$.placement.count")]
    assert "job counted needs 5 workers (placement.count), only 3 eligible; counted: 3/3 workers" in \
        report.errors[0].message
    assert [(p.field, p.message.split(":")[0]) for p in report.warnings] == [
        ("selectors", "job nolabel matches no worker (selectors"), ("$.constraints", "job norule matches no worker")]


def test_build_still_words_the_shortfalls(tmp_path):
    result = _service.compute(bucket(tmp_path, JOBS))
    assert [p.field for p in result.report.errors] == ["$.placement.count"]
    assert len(result.report.warnings) == 2


def test_compiling_rules_does_not_rewrite_the_models_selectors(tmp_path):
    jobs = {"db": {"selectors": ["web"]}, "agent": {"placement": {"scale_with": "db"}}}
    root = bucket(tmp_path, jobs)
    loaded, report = load_bucket(root)
    compile_rules(loaded, report)
    assert loaded.jobs["agent"].selectors == ("agent",), "the model keeps maand's default selector"
    assert loaded.jobs["agent"].rules.selectors == ("worker",), "placement uses co-location alone"
    result = _service.compute(root)
    assert result.report.ok, result.report.error_text()
    assert [a["worker"] for a in result.catalog["allocations"] if a["job"] == "agent"] == ["10.0.0.0", "10.0.0.1"]
    assert next(j for j in result.catalog["jobs"] if j["name"] == "agent")["selectors"] == ["worker"]


@settings(max_examples=300, deadline=None)
@given(job=st.text(max_size=20), host=st.text(max_size=20))
def test_alloc_id_is_the_md5_version_3_uuid(job, host):
    """The hex-text alloc_id against the stdlib's own UUID construction (version 3, RFC 4122 variant)."""
    import hashlib
    import uuid

    from ansible_collections.maand.core.plugins.plugin_utils.placement.place import alloc_id

    digest = hashlib.md5(("%s|%s" % (job, host)).encode("utf-8")).digest()
    assert alloc_id(job, host) == str(uuid.UUID(bytes=digest, version=3))


def test_allocations_sort_by_job_then_worker_with_removed_workers_last(tmp_path):
    root = bucket(tmp_path, {"api": {"selectors": ["worker"]}, "web": {"selectors": ["web"]}})
    first = _service.build(root)
    assert first.written
    workers = [{"host": "10.0.0.0", "labels": []}, {"host": "10.0.0.2", "labels": ["web"]}]
    make_bucket(tmp_path, workers, {"api": {"selectors": ["worker"]}, "web": {"selectors": ["web"]}},
                maand_conf=CONF)
    result = _service.compute(root)
    assert [(a["job"], a["worker"], a["state"]) for a in result.catalog["allocations"]] == [
        ("api", "10.0.0.0", "active"), ("api", "10.0.0.2", "active"), ("api", "10.0.0.1", "removed"),
        # a removed allocation on a worker still listed sorts by that worker's place
        ("web", "10.0.0.0", "removed"), ("web", "10.0.0.2", "active"), ("web", "10.0.0.1", "removed")]

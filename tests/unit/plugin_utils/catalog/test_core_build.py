"""Model, placement, validation and catalog, through the public build functions."""

import hashlib
import json
import os
import uuid

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks, storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.placement.place import alloc_id
from tests.bucket_factory import make_bucket, set_job, set_workers, write

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples", "resources-and-placement")

W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
W2 = {"host": "10.0.0.2", "labels": ["worker", "Prod"], "memory": "8 gb", "cpu": "8 ghz", "tags": {"zone": "a"}}


def kinds(result):
    return sorted({p.kind for p in result.report.errors})


def errors(result):
    return [str(p) for p in result.report.errors]


def allocs(result):
    return {(a["job"], a["worker"]): a["state"] for a in result.catalog["allocations"]}


def test_maand_docs_end_to_end_example_places_api_on_prod_only():
    result = _service.compute(EXAMPLE)
    assert result.report.ok, errors(result)
    assert allocs(result) == {("api", "10.0.0.10"): "active", ("api-staging", "10.0.0.20"): "active"}
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert (jobs["api"]["memory_mb"], jobs["api"]["cpu_mhz"]) == (1024.0, 1500.0)
    assert jobs["api"]["memory_source"] == "bucket.jobs.prod.conf"
    # api-staging has no section in the prod file: reservation = manifest max
    assert (jobs["api-staging"]["memory_mb"], jobs["api-staging"]["memory_source"]) == (2048.0, "manifest")


def test_alloc_id_is_maands_md5_uuid_of_job_and_host():
    digest = bytearray(hashlib.md5(b"api|10.0.0.1").digest())
    digest[6] = (digest[6] & 0x0F) | 0x30
    digest[8] = (digest[8] & 0x3F) | 0x80
    assert alloc_id("api", "10.0.0.1") == str(uuid.UUID(bytes=bytes(digest)))
    assert alloc_id("api", "10.0.0.1") != alloc_id("api", "10.0.0.2")


def test_selectors_default_to_job_name_and_labels_are_case_insensitive(tmp_path):
    make_bucket(tmp_path, [W1, W2, {"host": "10.0.0.3", "labels": ["PROMETHEUS"]}],
                {"prometheus": {}, "api": {"selectors": ["PROD"]}, "all": {"selectors": ["worker"]}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    assert set(allocs(result)) == {("prometheus", "10.0.0.3"), ("api", "10.0.0.2"), ("all", "10.0.0.1"),
                                   ("all", "10.0.0.2"), ("all", "10.0.0.3")}
    workers = {w["host"]: w for w in result.catalog["workers"]}
    assert workers["10.0.0.2"]["labels"] == ["prod", "worker"] and workers["10.0.0.2"]["zone"] == "a"
    assert [w["position"] for w in result.catalog["workers"]] == [0, 1, 2]


def test_job_matching_no_worker_warns(tmp_path):
    make_bucket(tmp_path, [W1], {"gpu": {"selectors": ["gpu"]}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok
    assert any("matches no worker" in str(w) for w in result.report.warnings)


@pytest.mark.parametrize("manifest_mem, override, expected", [
    ({"min": "128 mb", "max": "512 mb"}, '"192 mb"', (128.0, 512.0, 192.0)),
    ({"min": "128 mb", "max": "512 mb"}, None, (128.0, 512.0, 512.0)),
    (None, '"256 mb"', (256.0, 256.0, 256.0)),
    ({"min": "256 mb"}, None, (256.0, 256.0, 256.0)),
])
def test_reservation_rules(tmp_path, manifest_mem, override, expected):
    manifest = {"selectors": ["worker"]}
    if manifest_mem:
        manifest["resources"] = {"memory": manifest_mem}
    make_bucket(tmp_path, [W1], {"api": manifest}, jobs_conf="[api]\nmemory = %s\n" % override if override else None)
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    job = result.catalog["jobs"][0]
    assert (job["min_memory_mb"], job["max_memory_mb"], job["memory_mb"]) == expected


def test_override_above_max_is_unsupported_resource_configuration(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"], "resources": {"memory": {"min": "128", "max": "256"}}}},
                jobs_conf='[api]\nmemory = "512 mb"\n')
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrUnsupportedResourceConfiguration"]
    problem = result.report.errors[0]
    assert problem.file == "workspace/bucket.jobs.conf" and problem.field == "api.memory"
    assert "bucket.jobs.conf, job api max_memory_mb 256.00 mb, requested 512.00 mb" in problem.message


def test_job_config_selector_picks_the_env_file(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"], "resources": {"cpu": {"min": "100", "max": "2000"}}}},
                maand_conf='job_config_selector = "staging"\n', jobs_conf='[api]\ncpu = "0.5 ghz"\n',
                jobs_conf_name="bucket.jobs.staging.conf")
    write(os.path.join(str(tmp_path), "workspace", "bucket.jobs.conf"), '[api]\ncpu = "1 ghz"\n')
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    assert (result.catalog["jobs"][0]["cpu_mhz"], result.catalog["jobs"][0]["cpu_source"]) == (500.0, "bucket.jobs.staging.conf")


def test_min_greater_than_max_is_invalid_manifest(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"resources": {"cpu": {"min": "2 ghz", "max": "1 ghz"}}}})
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInvalidManifest"]
    assert result.report.errors[0].field == "resources.cpu"


def test_capacity_error_matches_maands_message(tmp_path):
    jobs = {n: {"selectors": ["worker"], "resources": {"memory": {"max": "2560 mb"}}} for n in ("a", "b")}
    make_bucket(tmp_path, [W1], jobs)
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInsufficientResource"]
    assert "worker_ip 10.0.0.1, available memory is 4096.00 MB, required memory is 5120.00 MB" in errors(result)[0]
    assert result.report.errors[0].file == "workspace/workers.json"


def test_disabled_allocations_do_not_count_against_capacity(tmp_path):
    jobs = {n: {"selectors": ["worker"], "resources": {"memory": {"max": "2560 mb"}}} for n in ("a", "b")}
    make_bucket(tmp_path, [W1], jobs, disabled={"jobs": {"b": {}}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    assert allocs(result) == {("a", "10.0.0.1"): "active", ("b", "10.0.0.1"): "disabled"}


def test_worker_without_capacity_hosting_a_reserving_job(tmp_path):
    make_bucket(tmp_path, [{"host": "10.0.0.9"}], {"api": {"selectors": ["worker"], "resources": {"cpu": {"max": "100 mhz"}}}})
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInsufficientResource"]
    assert "worker_ip 10.0.0.9 must specify cpu in workers.json" in errors(result)[0]


def test_disabled_json_job_allocation_and_worker(tmp_path):
    w3 = {"host": "10.0.0.3", "labels": ["worker"]}
    make_bucket(tmp_path, [W1, W2, w3], {"a": {"selectors": ["worker"]}, "b": {"selectors": ["worker"]}},
                disabled={"jobs": {"a": {"allocations": ["10.0.0.1"]}, "ghost": {}}, "workers": ["10.0.0.3", "10.9.9.9"]})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    states = allocs(result)
    assert states[("a", "10.0.0.1")] == "disabled" and states[("a", "10.0.0.2")] == "active"
    assert states[("b", "10.0.0.3")] == "disabled" and states[("a", "10.0.0.3")] == "disabled"
    warned = " ".join(str(w) for w in result.report.warnings)
    assert "unknown job ghost" in warned and "unknown worker 10.9.9.9" in warned


def test_ports_pool_fixed_and_stable_across_rebuilds(tmp_path):
    make_bucket(tmp_path, [W1], {"b": {"selectors": ["worker"], "resources": {"ports": {"http_port": {}}}},
                                 "c": {"selectors": ["worker"], "resources": {"ports": {"db_port": 5432, "x_port": {}}}}})
    first = _service.build(str(tmp_path))
    assert first.report.ok, errors(first)
    ports = {j["name"]: j["ports"] for j in first.catalog["jobs"]}
    assert ports == {"b": {"http_port": 30000}, "c": {"db_port": 5432, "x_port": 30001}}
    # a new job "a" sorts first: it must not take b's port
    set_job(tmp_path, "a", {"selectors": ["worker"], "resources": {"ports": {"web_port": {}}}})
    second = _service.build(str(tmp_path))
    ports2 = {j["name"]: j["ports"] for j in second.catalog["jobs"]}
    assert ports2["b"] == ports["b"] and ports2["c"] == ports["c"] and ports2["a"] == {"web_port": 30002}


def test_port_errors_all_reported(tmp_path):
    make_bucket(tmp_path, [W1], {
        "a": {"resources": {"ports": {"Bad-Name": {}, "p": 70000}}},
        "b": {"resources": {"ports": {"one": 8080}}}, "c": {"resources": {"ports": {"two": 8080}}},
        "d": {"resources": {"ports": {"x": {}, "y": {}}}},
    }, bucket_conf='port_min = "30000"\nport_max = "30000"\n')
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInvalidManifestPort", "ErrPortCollision", "ErrPortKeyFormat", "ErrPortRangeExhausted"]


def test_bad_port_range_only_matters_when_a_job_uses_the_pool(tmp_path):
    make_bucket(tmp_path, [W1], {"a": {"resources": {"ports": {"p": 80}}}}, bucket_conf='port_min = "x"\n')
    assert _service.compute(str(tmp_path)).report.ok
    set_job(tmp_path, "b", {"resources": {"ports": {"q": {}}}})
    assert kinds(_service.compute(str(tmp_path))) == ["ErrInvalidPortRange"]


def test_min_allocations_count(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["prod"], "min_allocations_count": 2}})
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInsufficientAllocations"]
    assert "has 1 allocation(s), min_allocations_count is 2" in errors(result)[0]


def _cmd(job="", command="", **config):
    return {"executed_on": ["cli"], "demands": {"job": job, "command": command, "config": config}}


def test_demands_give_deployment_seq_by_longest_chain(tmp_path):
    make_bucket(tmp_path, [W1], {
        "database": {"version": "1.0.0", "selectors": ["worker"], "commands": {"command_schema": _cmd()}},
        "api": {"version": "1.0.0", "selectors": ["worker"],
                "commands": {"command_migrate": _cmd("database", "command_schema", min_version="1.0.0")}},
        "frontend": {"version": "1", "selectors": ["worker"], "commands": {
            "command_assets": _cmd("api", "command_migrate"), "command_db": _cmd("database", "command_schema")}},
        "solo": {"selectors": ["worker"]},
    })
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    seq = {j["name"]: j["deployment_seq"] for j in result.catalog["jobs"]}
    assert seq == {"database": 0, "api": 1, "frontend": 2, "solo": 0}
    assert {a["job"]: a["deployment_seq"] for a in result.catalog["allocations"]} == seq


def test_demand_errors_all_reported(tmp_path):
    make_bucket(tmp_path, [W1], {
        "a": {"version": "1.0.0", "commands": {"command_x": _cmd("b", "command_y")}},
        "b": {"version": "1.0.0", "commands": {"command_y": _cmd("a", "command_x")}},
        "c": {"commands": {"command_z": _cmd("a", "command_x", min_version="2.0.0")}},
        "d": {"version": "1.0.0", "commands": {"command_w": _cmd("nope", "command_q"), "command_v": _cmd("a", "")}},
        "e": {"version": "1.2.3.4"},
    })
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrCircularJobCommandDependency", "ErrInvalidJobCommandDemand", "ErrInvalidJobVersion",
                             "ErrJobCommandDemandVersionMismatch"]
    text = "\n".join(errors(result))
    assert "job c takes part in a command demand and must declare a version" in text
    assert "demand cycle" in text and "demands unknown job nope" in text and "1.2.3.4" in text


def test_removed_worker_and_job_stay_until_deploy_cleans_up(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"]}, "old": {"selectors": ["worker"]}})
    assert _service.build(str(tmp_path)).written
    set_workers(tmp_path, [W1])
    import shutil
    shutil.rmtree(os.path.join(str(tmp_path), "workspace", "jobs", "old"))
    result = _service.build(str(tmp_path))
    assert result.report.ok, errors(result)
    assert allocs(result) == {("api", "10.0.0.1"): "active", ("api", "10.0.0.2"): "removed",
                              ("old", "10.0.0.1"): "removed", ("old", "10.0.0.2"): "removed"}
    workers = {w["host"]: w["removed"] for w in result.catalog["workers"]}
    assert workers == {"10.0.0.1": False, "10.0.0.2": True}
    assert {j["name"]: j["removed"] for j in result.catalog["jobs"]} == {"api": False, "old": True}
    # rebuilding without changes keeps them listed; bringing the worker back reactivates its allocation
    assert not _service.build(str(tmp_path)).changed
    set_workers(tmp_path, [W1, W2])
    back = _service.build(str(tmp_path))
    assert allocs(back)[("api", "10.0.0.2")] == "active"


def test_every_error_reported_at_once_and_nothing_written(tmp_path):
    make_bucket(tmp_path, [W1, dict(W1), {"host": "10.0.0.5", "memory": "12 kb"}],
                {"bad name;rm": {}, "api": {"resources": {"memory": {"min": "lots"}}}, "nomake": {}},
                maand_conf="ssh_port = 'x'\n", jobs_conf="[api\n")
    os.unlink(os.path.join(str(tmp_path), "workspace", "jobs", "nomake", "Makefile"))
    os.makedirs(os.path.join(str(tmp_path), "workspace", "jobs", "api", "data"))
    os.symlink("/etc/passwd", os.path.join(str(tmp_path), "workspace", "jobs", "api", "leak"))
    result = _service.build(str(tmp_path))
    assert not result.report.ok and result.catalog is None and not result.written
    assert not os.path.exists(_catalog.catalog_path(str(tmp_path)))
    by_file = {(p.kind, p.file, p.field) for p in result.report.errors}
    assert ("ErrInvalidMaandConf", "maand.conf", "ssh_port") in by_file
    assert ("ErrInvalidBucketJobsConf", "workspace/bucket.jobs.conf", "") in by_file
    assert ("ErrInvalidWorkerJSON", "workspace/workers.json", "[1].host") in by_file
    assert ("ErrInvalidWorkerJSON", "workspace/workers.json", "[2].memory") in by_file
    assert ("ErrInvalidJob", "workspace/jobs/bad name;rm", "") in by_file
    assert ("ErrInvalidManifest", "workspace/jobs/api/manifest.json", "resources.memory.min") in by_file
    assert ("ErrInvalidJob", "workspace/jobs/api", "data") in by_file
    assert ("ErrInvalidJob", "workspace/jobs/api", "leak") in by_file
    assert ("ErrInvalidJob", "workspace/jobs/nomake", "Makefile") in by_file
    assert all(p.fix for p in result.report.errors)


@pytest.mark.parametrize("workers, field, words", [
    ("[{", "", "invalid JSON"),
    ('{"host": "a"}', "$", "expected array"),
    ('[{"labels": ["x"]}]', "$[0]", "'host' is a required property"),
    ('[{"host": "a", "labels": "prod"}]', "$[0].labels", "expected array"),
    ('[{"host": "a b"}]', "[0].host", "not an IP address or host name"),
])
def test_bad_workers_json(tmp_path, workers, field, words):
    make_bucket(tmp_path, workers, {})
    result = _service.compute(str(tmp_path))
    problem = next(p for p in result.report.errors if p.file == "workspace/workers.json")
    assert problem.kind == "ErrInvalidWorkerJSON" and problem.field == field and words in problem.message


def test_unknown_keys_warn_but_build(tmp_path):
    make_bucket(tmp_path, [dict(W1, rack="r1")], {"api": {"selectors": ["worker"], "colour": "blue"}},
                maand_conf='ssh_user = "agent"\nfavourite = 1\n')
    result = _service.compute(str(tmp_path))
    assert result.report.ok
    warned = [(w.file, w.message) for w in result.report.warnings]
    assert any(f == "maand.conf" for f, dummy in warned)
    assert any("rack" in m for dummy, m in warned) and any("colour" in m for dummy, m in warned)


def test_failed_build_leaves_previous_catalog_untouched(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}})
    assert _service.build(str(tmp_path)).written
    path = _catalog.catalog_path(str(tmp_path))
    before = open(path).read()
    set_workers(tmp_path, [W1, W1])
    result = _service.build(str(tmp_path))
    assert not result.report.ok and open(path).read() == before


def test_bucket_id_is_stable_and_check_mode_writes_nothing(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}})
    checked = _service.build(str(tmp_path), check_mode=True)
    assert checked.report.ok and not checked.written and not os.path.exists(os.path.join(str(tmp_path), "data"))
    first = _service.build(str(tmp_path))
    uuid.UUID(first.catalog["bucket_id"])
    set_job(tmp_path, "web", {"selectors": ["worker"]})
    second = _service.build(str(tmp_path))
    assert second.catalog["bucket_id"] == first.catalog["bucket_id"] and second.changed
    assert "+ allocation web@10.0.0.1 (active)" in second.changes


def test_catalog_shape(tmp_path):
    make_bucket(tmp_path, [W2], {"api": {"version": "v2", "selectors": ["prod"]}})
    catalog = _service.build(str(tmp_path)).catalog
    on_disk = json.load(open(_catalog.catalog_path(str(tmp_path))))
    assert on_disk == catalog
    assert set(catalog) >= {"bucket_id", "workers", "jobs", "allocations"}
    assert set(catalog["workers"][0]) >= {"host", "labels", "tags", "zone", "position", "memory_mb", "cpu_mhz",
                                          "removed"}
    assert set(catalog["jobs"][0]) >= {"name", "version", "selectors", "min_memory_mb", "max_memory_mb", "memory_mb",
                                       "memory_source", "min_cpu_mhz", "max_cpu_mhz", "cpu_mhz", "cpu_source",
                                       "deployment_seq", "ports", "removed"}
    assert catalog["allocations"][0] == {"job": "api", "worker": "10.0.0.2", "alloc_id": alloc_id("api", "10.0.0.2"),
                                         "state": "active", "zone": "a", "deployment_seq": 0, "memory_mb": 0.0,
                                         "cpu_mhz": 0.0}
    assert catalog["jobs"][0]["version"] == "v2"  # kept as written, as maand (tests/build_job_test.go TestJobVersionUpdate)


def test_lock_refuses_a_second_run(tmp_path):
    make_bucket(tmp_path, [W1], {})
    with _locks.bucket_lock(str(tmp_path)):
        with pytest.raises(_locks.LockBusy):
            _service.build(str(tmp_path))
    assert _service.build(str(tmp_path)).report.ok


def test_a_writing_build_refuses_while_a_deploy_holds_the_bucket(tmp_path):
    """Security review 4, N10: a build must not change the catalog and KV a running deploy reads; the deploy lock
    held by another live process (an ansible-playbook deploying) refuses a writing build, naming the holder and the
    fix; --check still builds; after the deploy releases the lock the build writes."""
    import subprocess
    import sys
    make_bucket(tmp_path, [W1], {})
    bucket = str(tmp_path)
    deploy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _locks.acquire(bucket, deploy.pid)[0]
        with pytest.raises(_locks.DeployInProgress) as info:
            _service.build(bucket)
        message = str(info.value)
        assert "a deploy of this bucket is running (data/deploy.lock: pid %d on " % deploy.pid in message
        assert "wait for the deploy to finish, then build again" in message
        assert isinstance(info.value, _locks.LockBusy)  # the build action's ErrLocked
        assert not os.path.exists(_catalog.catalog_path(bucket))  # nothing was written
        assert _service.build(bucket, check_mode=True).report.ok  # a check build reads only
        assert _locks.release(bucket, deploy.pid)
        result = _service.build(bucket)
        assert result.report.ok and result.written
    finally:
        deploy.kill()
        deploy.wait()


def test_corrupt_catalog_is_an_error_not_a_traceback(tmp_path):
    make_bucket(tmp_path, [W1], {})
    write(_catalog.catalog_path(str(tmp_path)), "{not json")
    result = _service.compute(str(tmp_path))
    assert kinds(result) == ["ErrInvalidCatalog"]


def test_atomic_write_keeps_old_file_when_replace_fails(tmp_path, monkeypatch):
    path = os.path.join(str(tmp_path), "catalog.json")
    write(path, "old\n")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        _storage.atomic_write(path, "new\n")
    assert open(path).read() == "old\n"
    assert os.listdir(str(tmp_path)) == ["catalog.json"]


def test_rollout_options_reach_the_catalog_and_bad_values_name_file_and_field(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"start_gate": "every_batch", "auto_revert": True, "canary": 1}, "web": {}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, errors(result)
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert (jobs["api"]["start_gate"], jobs["api"]["auto_revert"], jobs["api"]["canary"]) == ("every_batch", True, 1)
    assert not {"start_gate", "auto_revert", "canary"} & set(jobs["web"])  # maand's default: one start gate
    make_bucket(tmp_path, [W1], {"api": {"start_gate": "each", "auto_revert": "yes", "canary": -1}})
    result = _service.compute(str(tmp_path))
    fields = sorted((p.kind, p.file, p.field) for p in result.report.errors)
    assert fields == [("ErrInvalidManifest", "workspace/jobs/api/manifest.json", "$.auto_revert"),
                      ("ErrInvalidManifest", "workspace/jobs/api/manifest.json", "$.canary"),
                      ("ErrInvalidManifest", "workspace/jobs/api/manifest.json", "$.start_gate")], errors(result)

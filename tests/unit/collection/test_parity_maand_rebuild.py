"""maand's build tests that build more than once (maand-sh/maand tests/build_bucket_test.go, build_job_test.go,
build_worker_*_test.go): each row replays the Go test's sequence on a `maand init` bucket, a list of workspace
edits, BUILD (a full build writing data/catalog.json and data/kv.json) and checks (what the Go test reads with
GetKey or a SELECT over maand's tables; here data/kv.json and data/catalog.json), in the order the Go test
makes them. Rows cite their Go test; tests/unit/collection/test_maand_go_tests.py counts them.
"""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.build import service as _build, kv_build as _kv_build
from tests.maand_init import harness_labels, init_bucket, job, ws

BUILD = "build"
ABSENT = object()  # the key is not there (or deleted): maand's GetKey returns ""
SET = object()  # the key is there with a non-empty value


class Check:
    """After the last BUILD: get(catalog, kv) must equal expected (ABSENT / SET for KV values)."""

    def __init__(self, get, expected):
        self.get, self.expected = get, expected


def key(namespace, name):
    return lambda catalog, kv: (kv.get(namespace) or {}).get(name)


def jobs(catalog, kv):
    return sorted(j["name"] for j in catalog["jobs"] if not j.get("removed"))


def active(catalog, kv):
    return sorted((a["job"], a["worker"]) for a in catalog["allocations"] if a["state"] == "active")


def labels(host):
    return lambda catalog, kv: next(w["labels"] for w in catalog["workers"] if w["host"] == host)


def positions(catalog, kv):
    return {w["host"]: w["position"] for w in catalog["workers"] if not w.get("removed")}


def job_field(name, *fields):
    return lambda catalog, kv: tuple(next(j for j in catalog["jobs"] if j["name"] == name)[f] for f in fields)


def workers(text):
    return lambda root: ws(root, "workers.json", text)


def bucket_conf(text):
    return lambda root: ws(root, "bucket.conf", text)


def jobs_conf(text):
    return lambda root: ws(root, "bucket.jobs.conf", text)


def disabled(text):
    return lambda root: ws(root, "disabled.json", text)


def manifest(name, text):
    return lambda root: job(root, name, text)


def remove(rel):
    def run(root):
        path = os.path.join(root, "workspace", rel)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    return run


def same_port(first):
    """TestJobPortOpsKV: the port a later build gives web_port is the one the first gave."""
    seen = {}

    def get(catalog, kv):
        value = (kv.get("maand/bucket") or {}).get("web_port")
        seen.setdefault(first, value)
        return value == seen[first] and bool(value)
    return get


A = manifest("a", '{"version":"1.1"}')
ONE = workers('[{"host":"10.0.0.1"}]')
A_ON_WORKER = manifest("a", '{"selectors": ["worker"]}')
PORT_FIRST = same_port("web_port")

# (id, maand test, steps)
CASES = [
    ("Init", "tests/build_bucket_test.go TestInit", [BUILD, Check(jobs, [])]),
    ("UntouchedBucketConf", "tests/build_bucket_test.go TestUntouchedBucketConf",
     [bucket_conf('a="1"'), BUILD, Check(key("vars/bucket", "a"), "1")]),
    ("BucketConfOps", "tests/build_bucket_test.go TestBucketConfOps",
     [bucket_conf('a="1"'), BUILD, Check(key("vars/bucket", "a"), "1"),
      bucket_conf('\na="3"\nb="1"\n'), BUILD, Check(key("vars/bucket", "a"), "3"), Check(key("vars/bucket", "b"), "1"),
      bucket_conf('a="1"'), BUILD, Check(key("vars/bucket", "a"), "1"), Check(key("vars/bucket", "b"), ABSENT),
      remove("bucket.conf"), BUILD, Check(key("vars/bucket", "a"), ABSENT)]),
    ("EmptyBucketConf", "tests/build_bucket_test.go TestEmptyBucketConf",
     [bucket_conf(""), BUILD, Check(key("maand/bucket", "a"), ABSENT)]),
    ("BucketConfAdded", "tests/build_bucket_test.go TestBucketConfAdded",
     [BUILD, Check(key("maand/bucket", "a"), ABSENT), bucket_conf('a="1"'), BUILD, Check(key("vars/bucket", "a"), "1")]),
    ("JobConfAddedLater", "tests/build_bucket_test.go TestJobConfAddedLater",
     [A, BUILD, Check(key("maand/job/a", "test"), ABSENT), jobs_conf('\n[a]\ntest="1"\n'), BUILD,
      Check(key("vars/bucket/job/a", "test"), "1")]),
    ("JobConfEmptyLater", "tests/build_bucket_test.go TestJobConfEmptyLater",
     [A, jobs_conf(""), BUILD, Check(jobs, ["a"])]),
    ("JobConfUntouched", "tests/build_bucket_test.go TestJobConfUntouched",
     [jobs_conf('\n[a]\ntest="1"\n'), A, BUILD, Check(key("vars/bucket/job/a", "test"), "1")]),
    ("JobKV", "tests/build_bucket_test.go TestJobKV",
     [A, BUILD] + [Check(key("maand/job/a", k), v) for k, v in (
         ("job_id", SET), ("max_cpu_mhz", "0"), ("max_memory_mb", "0"), ("min_cpu_mhz", "0"), ("min_memory_mb", "0"),
         ("name", "a"), ("version", "1.1"), ("memory", "0"), ("cpu", "0"))]),
    ("JobMemoryCPUOpsKV", "tests/build_bucket_test.go TestJobMemoryCPUOpsKV",
     [manifest("a", '{"resources":{"cpu": {"min":"12 Ghz", "max":"23 Ghz"}, "memory":{"min":"12 GB", "max":"24 GB"}}}'),
      BUILD, Check(job_field("a", "min_memory_mb", "max_memory_mb", "min_cpu_mhz", "max_cpu_mhz"),
                   (12288.0, 24576.0, 12000.0, 23000.0)),
      manifest("a", '{"resources":{"cpu": {"min":"12", "max":"23"}, "memory":{"min":"12", "max":"24"}}}'),
      BUILD, Check(job_field("a", "min_memory_mb", "max_memory_mb", "min_cpu_mhz", "max_cpu_mhz"), (12.0, 24.0, 12.0, 23.0)),
      manifest("a", "{}"), BUILD] + [Check(key("maand/job/a", k), "0") for k in (
          "min_cpu_mhz", "max_cpu_mhz", "min_memory_mb", "max_memory_mb")]),
    ("JobPortOpsKV", "tests/build_bucket_test.go TestJobPortOpsKV",
     [manifest("a", '{"selectors": ["worker"], "resources":{"ports": {"web_port": {}}}}'), ONE, BUILD,
      Check(PORT_FIRST, True), BUILD, Check(PORT_FIRST, True),
      manifest("a", '{"selectors": ["worker"], "resources":{"ports": {"web_port": {}, "web_port2": {}}}}'), BUILD,
      Check(PORT_FIRST, True), Check(key("maand/bucket", "web_port2"), SET),
      Check(lambda c, kv: kv["maand/bucket"]["web_port2"] != kv["maand/bucket"]["web_port"], True),
      manifest("a", '{"selectors": ["worker"], "resources":{"ports": {"web_port2": {}}}}'), BUILD,
      Check(key("maand/bucket", "web_port"), ABSENT), Check(key("maand/bucket", "web_port2"), SET)]),
    ("Job", "tests/build_job_test.go TestJob",
     [manifest("a", "{}"), BUILD, Check(jobs, ["a"]), manifest("b", "{}"), BUILD, Check(jobs, ["a", "b"])]),
    ("JobRemoved", "tests/build_job_test.go TestJobRemoved",
     [manifest("a", "{}"), manifest("b", "{}"), BUILD, Check(jobs, ["a", "b"]), remove("jobs/b"), BUILD,
      Check(jobs, ["a"])]),
    ("JobDisabled", "tests/build_job_test.go TestJobDisabled",
     [ONE, A_ON_WORKER, BUILD, Check(active, [("a", "10.0.0.1")]), disabled('{"jobs":{"a":{}}}'), BUILD,
      Check(active, []), disabled('{"jobs":{}}'), BUILD, Check(active, [("a", "10.0.0.1")])]),
    ("AllocationDisabled", "tests/build_job_test.go TestAllocationDisabled",
     [ONE, A_ON_WORKER, BUILD, Check(active, [("a", "10.0.0.1")]),
      # maand's test writes "workers" (its reader knows only "allocations": a job entry whose allocation
      # list is empty disables the whole job); here an unknown key is a warning, with the same outcome
      disabled('{"jobs":{"a":{"workers":["10.0.0.1"]}}}'), BUILD, Check(active, []),
      disabled('{"jobs":{"a":{"allocations":["10.0.0.1"]}}}'), BUILD, Check(active, []),
      disabled('{"jobs":{"a":{"workers":[]}}}'), BUILD, Check(active, []),  # "jobs is still disabled"
      disabled('{"jobs":{}}'), BUILD, Check(active, [("a", "10.0.0.1")])]),
    ("WorkerDisabled", "tests/build_job_test.go TestWorkerDisabled",
     [ONE, A_ON_WORKER, BUILD, Check(active, [("a", "10.0.0.1")]), disabled('{"workers":["10.0.0.1"]}'), BUILD,
      Check(active, [])]),
    ("JobKVMemoryCPUJobConf", "tests/build_job_test.go TestJobKVMemoryCPUJobConf",
     [manifest("a", "{}"), jobs_conf('\n[a]\nmemory="12"\ncpu="112"\n'), BUILD]
     + [Check(key(ns, k), v) for ns, k, v in (
         ("maand/job/a", "memory", "12"), ("vars/bucket/job/a", "memory", "12"), ("maand/job/a", "min_memory_mb", "12"),
         ("maand/job/a", "max_memory_mb", "12"), ("maand/job/a", "cpu", "112"), ("maand/job/a", "min_cpu_mhz", "112"),
         ("maand/job/a", "max_cpu_mhz", "112"), ("vars/bucket/job/a", "cpu", "112"))]),
    ("WorkerJSONEmpty", "tests/build_worker_json_test.go TestWorkerJSONEmpty", [BUILD, Check(positions, {})]),
    ("WorkerJSONValid", "tests/build_worker_json_test.go TestWorkerJSONValid",
     [remove("workers.json"), BUILD, Check(positions, {})]),
    ("WorkerJSON3Worker", "tests/build_worker_json_test.go TestWorkerJSON3Worker",
     [workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.2" }]'), BUILD, Check(lambda c, kv: len(positions(c, kv)), 2)]),
    ("WorkerJSONRemains", "tests/build_worker_json_test.go TestWorkerJSONRemains",
     [ONE, BUILD, Check(lambda c, kv: len(positions(c, kv)), 1)]),
    ("WorkerLabelDefault", "tests/build_worker_label_test.go TestWorkerLabelDefault",
     [ONE, BUILD, Check(labels("10.0.0.1"), ["worker"])]),
    ("WorkerLabelsRemoved", "tests/build_worker_label_test.go TestWorkerLabelsRemoved",
     [workers('[{ "host": "10.0.0.1", "labels": ["a", "z"] }, { "host": "10.0.0.2" }]'), BUILD,
      Check(labels("10.0.0.1"), ["a", "worker", "z"]), Check(labels("10.0.0.2"), ["worker"]),
      workers('[{ "host": "10.0.0.1", "labels": ["a"] }, { "host": "10.0.0.2" }]'), BUILD,
      Check(labels("10.0.0.1"), ["a", "worker"])]),
    ("WorkerLabelsUpdated", "tests/build_worker_label_test.go TestWorkerLabelsUpdated",
     [workers('[{ "host": "10.0.0.1", "labels": ["a", "z"] }]'), BUILD, Check(labels("10.0.0.1"), ["a", "worker", "z"]),
      workers('[{ "host": "10.0.0.1", "labels": ["a", "v"] }]'), BUILD, Check(labels("10.0.0.1"), ["a", "v", "worker"])]),
    ("WorkerPostionRemoved", "tests/build_worker_position_test.go TestWorkerPostionRemoved",
     [workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.2" },{ "host": "10.0.0.3" }]'), BUILD,
      workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.3" }]'), BUILD, Check(positions, {"10.0.0.1": 0, "10.0.0.3": 1})]),
    ("WorkerPostionMoved", "tests/build_worker_position_test.go TestWorkerPostionMoved",
     [workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.3" }]'), BUILD,
      workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.2" },{ "host": "10.0.0.3" }]'), BUILD,
      Check(positions, {"10.0.0.1": 0, "10.0.0.2": 1, "10.0.0.3": 2})]),
    ("WorkerResourcesKVUpdated", "tests/build_worker_resources_test.go TestWorkerResourcesKVUpdated",
     [workers('[{ "host": "10.0.0.1", "memory": "10", "cpu": "100" }]'), BUILD,
      Check(key("maand/worker/10.0.0.1", "worker_memory_mb"), "10"), Check(key("maand/worker/10.0.0.1", "worker_cpu_mhz"), "100"),
      workers('[{ "host": "10.0.0.1", "memory": "20", "cpu": "200" }]'), BUILD,
      Check(key("maand/worker/10.0.0.1", "worker_memory_mb"), "20"), Check(key("maand/worker/10.0.0.1", "worker_cpu_mhz"), "200")]),
    ("WokerTagsKV", "tests/build_worker_tags_test.go TestWokerTagsKV",
     [workers('[{"host":"10.0.0.1", "tags":{"a":"1"}}]'), BUILD, Check(key("maand/worker/10.0.0.1/tags", "a"), "1"),
      workers('[{"host":"10.0.0.1", "tags":{"a":"2", "b":"2"}}]'), BUILD,
      Check(key("maand/worker/10.0.0.1/tags", "a"), "2"), Check(key("maand/worker/10.0.0.1/tags", "b"), "2"),
      workers('[{"host":"10.0.0.1", "tags":{"b":"2"}}]'), BUILD,
      Check(key("maand/worker/10.0.0.1/tags", "a"), ABSENT), Check(key("maand/worker/10.0.0.1/tags", "b"), "2")]),
]


@pytest.mark.parametrize("name, source, steps", CASES, ids=[c[0] for c in CASES])
def test_maand_rebuild(tmp_path, name, source, steps):
    root = init_bucket(tmp_path)
    catalog = kv = None
    for number, step in enumerate(steps):
        if step == BUILD:
            harness_labels(root)
            result = _build.build(root)
            assert result.report.ok, "%s: %s" % (source, [str(p) for p in result.report.errors])
            catalog, kv = result.catalog, _kv_build.read_kv(root, reveal_secrets=True)
        elif isinstance(step, Check):
            assert catalog is not None, "a check before any build"
            got = step.get(catalog, kv)
            if step.expected is ABSENT:
                assert got in (None, ""), "%s step %d: %r" % (source, number, got)
            elif step.expected is SET:
                assert got, "%s step %d: empty" % (source, number)
            else:
                assert got == step.expected, "%s step %d" % (source, number)
        else:
            step(root)


@pytest.mark.parametrize("port, words", [(22, "expected a string"), ("22", "not in resources.ports"),
                                         ("http_port", None)])
def test_health_probe_port_is_a_port_name(tmp_path, port, words):
    """workspace/health_check.go (HealthCheckProbe.Port is a Go string naming a resources.ports key): a number,
    quoted or not, is refused, as maand refuses it (README, docs/deploy.md)."""
    root = init_bucket(tmp_path)
    job(root, "a", {"resources": {"ports": {"http_port": {}}}, "health_check": {"checks": [{"type": "tcp", "port": port}]}})
    result = _build.compute(root)
    found = [(p.kind, p.field) for p in result.report.errors]
    if words is None:
        assert result.report.ok, found
        return
    assert found == [("ErrInvalidManifest", "health_check.checks[0].port")], found
    assert words in str(result.report.errors[0])

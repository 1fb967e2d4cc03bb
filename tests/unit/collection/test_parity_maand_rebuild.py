"""maand's build tests that build more than once (maand-sh/maand tests/build_*_test.go) or start from rows an
earlier build left (build/*_test.go seed maand's SQLite tables: here those rows are the workspace of a first
build): each row replays the Go test's sequence on a `maand init` bucket, a list of workspace edits, BUILD (a full
build writing data/catalog.json and data/kv.json; BUILD_PURGE with --purge-job-kv; Fails(kind) a build maand
refuses) and checks (what the Go test reads with GetKey or a SELECT over maand's tables; here data/kv.json and
data/catalog.json; Keep/Same for a value the Go test compares across builds), in the order the Go test makes
them. Rows of tests/*_test.go build through maand's test harness (tests/maand_init.py harness_labels). Rows cite
their Go test; tests/unit/collection/test_maand_go_tests.py counts them.
"""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils.certs import ca as _ca
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat
from tests.bucket_factory import write
from tests.maand_init import INIT_MAAND_CONF, harness_labels, init_bucket, job, ws

BUILD = "build"
BUILD_PURGE = "build --purge-job-kv"  # maand build --purge-job-kv (build.Options{PurgeJobCommandKV: true})
ABSENT = object()  # the key is not there (or deleted): maand's GetKey returns ""
SET = object()  # the key is there with a non-empty value


class Check:
    """After the last BUILD: get(catalog, kv) must equal expected (ABSENT / SET for KV values)."""

    def __init__(self, get, expected):
        self.get, self.expected = get, expected


class Keep:
    """After the last BUILD: remember get(catalog, kv) (it must be set) as `name`, as the Go test keeps a value."""

    def __init__(self, name, get):
        self.name, self.get = name, get


class Same:
    """After the last BUILD: get(catalog, kv) equals the value kept as `name` (differs=True: is set and differs)."""

    def __init__(self, name, get, differs=False):
        self.name, self.get, self.differs = name, get, differs


class Fails:
    """A build that maand refuses with `kind` (assert.ErrorIs); nothing is written, the last catalog stays."""

    def __init__(self, kind):
        self.kind = kind


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


def allocations(state):
    return lambda catalog, kv: sum(1 for a in catalog["allocations"] if a["state"] == state)


def port(job_name, port_name):
    return lambda catalog, kv: next(j for j in catalog["jobs"] if j["name"] == job_name)["ports"].get(port_name)


def port_kv_matches(*names):
    """maand/bucket <name> is the port the catalog gives the job that declares it (strconv.Itoa(port))."""
    def get(catalog, kv):
        ports = {n: p for j in catalog["jobs"] for n, p in (j.get("ports") or {}).items()}
        return all(kv["maand/bucket"].get(n) == str(ports[n]) for n in names)
    return get


def in_pool(get):
    return lambda catalog, kv: 30000 <= get(catalog, kv) <= 39999


def seqs(catalog, kv):
    return {j["name"]: j["deployment_seq"] for j in catalog["jobs"] if not j.get("removed")}


def commands_on(event, job_name=None):
    """maand's job_commands rows for one event: (job, command) pairs whose executed_on has it."""
    return lambda catalog, kv: sum(1 for j in catalog["jobs"] if not j.get("removed") and job_name in (None, j["name"])
                                   for c in (j.get("commands") or {}).values() if event in c["executed_on"])


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


def maand_conf(text):
    return lambda root: write(os.path.join(root, "maand.conf"), text)


def other_ca(root):
    """TestCAUpdateTriggerCertUpdates writes back the CA of an earlier `maand init`: here another bucket's CA."""
    elsewhere = os.path.join(root, "..", "other-ca")
    _certs.load_or_create_ca(elsewhere, "other")
    for src, dst in zip(_certs.ca_paths(elsewhere), _certs.ca_paths(root)):
        os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
        shutil.copy2(src, dst)


def write_file(rel, text):
    return lambda root: ws(root, rel, text)


A = manifest("a", '{"version":"1.1"}')
ONE = workers('[{"host":"10.0.0.1"}]')
A_ON_WORKER = manifest("a", '{"selectors": ["worker"]}')
PORT_FIRST = same_port("web_port")
CERT_A = manifest("a", '{"selectors":["worker"], "certs":{"a":{"subject":{"common_name":"3"}}}}')
CRT, KEY = (key("maand/job/a/worker/10.0.0.1", "certs/a.%s" % ext) for ext in ("crt", "key"))
MAAND_MAKEFILE = (  # tests/utils.go Makefile()
    "\n.PHONY: start stop restart\n\ndir:\n\tmkdir -p ./data\n\tmkdir -p ./logs\n\tmkdir -p ./bin\n\n"
    "start: dir\n\t@echo $$(($(shell cat ./data/start 2>/dev/null || echo 0) + 1)) > ./data/start\n\n"
    "stop:\n\tmkdir -p ./data\n\t@echo $$(($(shell cat ./data/stop 2>/dev/null || echo 0) + 1)) > ./data/stop\n\n"
    "restart:\n\tmkdir -p ./data\n\t@echo $$(($(shell cat ./data/restart 2>/dev/null || echo 0) + 1)) > ./data/restart\n")


def api_job(name, manifest_text, makefile="start:\n"):
    return lambda root: job(root, name, manifest_text, makefile=makefile)


def command_job(name, manifest_text, *scripts):
    """A job of maand's build_job_command / build_job tests: its manifest, _modules/<script> files, a Makefile."""
    return lambda root: job(root, name, manifest_text, makefile=MAAND_MAKEFILE, modules=scripts)


def maand_kv_count(catalog, kv):
    """maand's `SELECT count(*) FROM cat_kv where deleted = 0` over our data/kv.json, the differences named:
    - maand/worker certs/ca.crt: maand init makes the CA, so maand's build always writes it; here the CA is made
      by the first build that issues a leaf (differs on purpose: go_tests_not_ported.txt, the InitKV test): counted as maand counts it;
    - maand/job/<job> deploy_order: kept beside rollout_order (maand's name before June 2026; docs/parity.md): not counted;
    - maand/job/<job>/worker/<ip> version: maand writes it when the allocation is deployed (deploy/versions.go
      syncAllocationVersionKV), maand.core's build writes the catalog version: not counted."""
    count = sum(len(keys) for keys in kv.values())
    count -= sum(1 for ns, keys in kv.items() if ns.startswith("maand/job/") and ns.count("/") == 2 and "deploy_order" in keys)
    count -= sum(1 for ns, keys in kv.items() if "/worker/" in ns and ns.startswith("maand/job/") and "version" in keys)
    return count + (0 if "certs/ca.crt" in (kv.get("maand/worker") or {}) else 1)


def state_of(job_name, host):
    return lambda catalog, kv: next((a["state"] for a in catalog["allocations"]
                                     if a["job"] == job_name and a["worker"] == host), None)


def cert_of(host, name="tls", job_name="api", ext="crt"):
    return key("maand/job/%s/worker/%s" % (job_name, host), "certs/%s.%s" % (name, ext))


def both_certs(catalog, kv):
    return tuple(cert_of(h)(catalog, kv) for h in ("10.0.0.1", "10.0.0.2"))


# build/build_certs_test.go seedBuildCertsDB: two workers, job api 1.0.0 on both, certs tls (pkcs8, subject api)
CERT_WORKERS = workers('[{"host":"10.0.0.1","memory":"1024","cpu":"2000"},{"host":"10.0.0.2","memory":"1024","cpu":"2000"}]')


def cert_api(one, common_name="api"):
    return manifest("api", '{"version":"1.0.0","selectors":["worker"],"certs":{"tls":{"pkcs8":true,"one":%s,'
                           '"subject":{"common_name":"%s"}}}}' % ("true" if one else "false", common_name))


# build/build_allocations_test.go seedBuildAllocationFixture: w1 10.0.0.1 (web), w2 10.0.0.2 (db); jobs web 1.0.0 and
# db 2.0.0; stored allocations web@10.0.0.1 and db@10.0.0.1 (a placement of an earlier build: w1 carried db too)
ALLOC_JOBS = [manifest("web", '{"version":"1.0.0","selectors":["web"]}'), manifest("db", '{"version":"2.0.0","selectors":["db"]}')]
ALLOC_EARLIER = workers('[{"host":"10.0.0.1","labels":["web","db"]},{"host":"10.0.0.2"}]')
ALLOC_FIXTURE = workers('[{"host":"10.0.0.1","memory":"1024","cpu":"2000","labels":["web"]},'
                        '{"host":"10.0.0.2","memory":"1024","cpu":"2000","labels":["db"]}]')
ALLOC_SEED = ALLOC_JOBS + [ALLOC_EARLIER, BUILD, ALLOC_FIXTURE]

# build/execute_test.go TestExecute_fullWorkspacePipeline
PIPELINE = [
    workers('[\n\t\t{"host":"10.0.0.1","labels":["web"],"memory":"1024","cpu":"2000","position":0},\n\t\t{"host":"10.0.0.2",'
            '"labels":["web"],"memory":"1024","cpu":"2000","position":1}\n\t]'),
    lambda root: job(root, "db", '{\n\t\t"version": "2.0.0",\n\t\t"selectors": ["web"],\n\t\t"commands": {"command_schema": '
                     '{"executed_on": ["cli"]}}\n\t}', modules=["command_schema.py"]),
    lambda root: job(root, "api", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t'
                     '"memory": {"min": "128", "max": "256"},\n\t\t\t"cpu": {"min": "100", "max": "200"},\n\t\t\t"ports": '
                     '{"http_port": {}}\n\t\t},\n\t\t"certs": {\n\t\t\t"tls": {\n\t\t\t\t"pkcs8": true,\n\t\t\t\t"one": '
                     'false,\n\t\t\t\t"subject": {"common_name": "api.local"}\n\t\t\t}\n\t\t},\n\t\t"commands": {\n\t\t\t'
                     '"command_migrate": {\n\t\t\t\t"executed_on": ["cli"],\n\t\t\t\t"demands": {\n\t\t\t\t\t"job": "db",'
                     '\n\t\t\t\t\t"command": "command_schema",\n\t\t\t\t\t"config": {"min_version": "2.0.0"}\n\t\t\t\t}'
                     '\n\t\t\t}\n\t\t}\n\t}', modules=["command_migrate.py"]),
    write_file("jobs/api/vars.toml", 'cluster = "primary"'),
    jobs_conf('[api]\nmemory = "192 mb"\n'),
]


def max_seq(job_name):
    return lambda catalog, kv: max(a["deployment_seq"] for a in catalog["allocations"] if a["job"] == job_name)


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

    # tests/build_bucket_test.go: certificates (the CA is made by the first build that issues a leaf)
    ("CertInKV", "tests/build_bucket_test.go TestCertInKV", [ONE, CERT_A, BUILD, Check(CRT, SET), Check(KEY, SET)]),
    ("CAAndCertNotUpdatedOnEveryBuild", "tests/build_bucket_test.go TestCAAndCertNotUpdatedOnEveryBuild",
     [ONE, CERT_A, BUILD, Keep("crt", CRT), BUILD, BUILD, Same("crt", CRT)]),
    ("CAUpdateTriggerCertUpdates", "tests/build_bucket_test.go TestCAUpdateTriggerCertUpdates",
     [ONE, CERT_A, BUILD, Keep("crt", CRT), other_ca, BUILD, Same("crt", CRT, differs=True)]),
    ("CertUpdateAfterExpire", "tests/build_bucket_test.go TestCertUpdateAfterExpire",
     [ONE, CERT_A, BUILD, Keep("crt", CRT),
      maand_conf(INIT_MAAND_CONF.replace("certs_renewal_buffer = 0", "certs_renewal_buffer = 60")),  # = certs_ttl
      BUILD, Same("crt", CRT, differs=True)]),
    ("CertsRemovedFromManifestPurgesKV", "tests/build_bucket_test.go TestCertsRemovedFromManifestPurgesKV",
     [ONE, CERT_A, BUILD, Check(CRT, SET), manifest("a", '{"selectors":["worker"]}'), BUILD, Check(CRT, ABSENT)]),
    ("Allocations", "tests/build_bucket_test.go TestAllocations",
     [workers('[\n\t\t{ "host": "10.0.0.1", "labels": ["a"] },\n\t\t{ "host": "10.0.0.2", "labels": ["a"] }\n\t]'),
      manifest("a", '{\n\t\t"selectors": ["a"]\n\t}'), BUILD, Check(allocations("active"), 2),
      workers('[\n\t\t{ "host": "10.0.0.1", "labels": ["a"] },\n\t\t{ "host": "10.0.0.2" }\n\t]'), BUILD,
      Check(allocations("active"), 1), Check(allocations("removed"), 1),
      workers('[\n\t\t{ "host": "10.0.0.1", "labels": ["a"] },\n\t\t{ "host": "10.0.0.2", "labels": ["a"] }\n\t]'), BUILD,
      Check(allocations("active"), 2), Check(allocations("removed"), 0),
      workers('[\n\t\t{ "host": "10.0.0.1", "labels": ["a"] },\n\t\t{ "host": "10.0.0.2", "labels": ["a"] },\n'
              '\t\t{ "host": "10.0.0.3", "labels": ["b"] }\n\t]'), BUILD, Check(allocations("active"), 2)]),
    ("JobPortRangeExhausted_rebuild", "tests/build_bucket_test.go TestJobPortRangeExhausted",
     [bucket_conf('port_min = "30000"\nport_max = "30000"\n'), manifest("a", '{"resources":{"ports": {"p1": {}}}}'), BUILD,
      manifest("b", '{"resources":{"ports": {"p1": {}}}}'), Fails("ErrPortRangeExhausted")]),
    ("JobPortPrefixFormat_rebuild", "tests/build_bucket_test.go TestJobPortPrefixFormat",
     [manifest("a", '{"resources":{"ports": {"web_port": {}}}}'), manifest("b", '{"resources":{"ports": {"b_port_web": {}}}}'),
      BUILD, manifest("b", '{"resources":{"ports": {"Bad-Port": {}}}}'), Fails("ErrPortKeyFormat")]),
    # tests/build_job_test.go
    ("JobPortFixedInManifest", "tests/build_job_test.go TestJobPortFixedInManifest",
     [api_job("api", '{\n\t\t"selectors": ["worker"],\n\t\t"resources": {"ports": {"api_http_port": 30010, '
              '"api_metrics_port": {}}}\n\t}'), ONE, BUILD,
      Check(port("api", "api_http_port"), 30010), Check(lambda c, kv: port("api", "api_metrics_port")(c, kv) != 30010, True),
      Check(key("maand/bucket", "api_http_port"), "30010"), Check(port_kv_matches("api_metrics_port"), True),
      BUILD, Check(port("api", "api_http_port"), 30010), Keep("metrics", port("api", "api_metrics_port")),
      BUILD, Same("metrics", port("api", "api_metrics_port"))]),
    ("JobPortFixedToProvisionedOutsidePool", "tests/build_job_test.go TestJobPortFixedToProvisionedOutsidePool",
     [api_job("node_agent", '{\n\t\t"selectors": ["worker"],\n\t\t"resources": {"ports": {"node_agent_port_metrics": 9500}}\n\t}'),
      ONE, BUILD, Check(port("node_agent", "node_agent_port_metrics"), 9500),
      api_job("node_agent", '{\n\t\t"selectors": ["worker"],\n\t\t"resources": {"ports": {"node_agent_port_metrics": {}}}\n\t}'),
      BUILD, Check(in_pool(port("node_agent", "node_agent_port_metrics")), True),
      Check(port("node_agent", "node_agent_port_metrics"), lambda got: got != 9500),
      Check(port_kv_matches("node_agent_port_metrics"), True)]),
    ("JobPortFixedCollisionAcrossJobs_as_maand", "tests/build_job_test.go TestJobPortFixedCollisionAcrossJobs",
     [api_job("a", '{\n\t\t\t"resources": {"ports": {"shared_port": 30010}}\n\t\t}'),
      api_job("b", '{\n\t\t\t"resources": {"ports": {"shared_port": 30010}}\n\t\t}'), Fails("ErrPortCollision")]),
    ("JobPortsStableAcrossRebuilds", "tests/build_job_test.go TestJobPortsStableAcrossRebuilds",
     [api_job("api", '{"selectors": ["worker"], "resources":{"ports": {"api_http_port": {}}}}'),
      api_job("database", '{"selectors": ["worker"], "resources":{"ports": {"database_port": {}}}}'), ONE, BUILD,
      Keep("api", port("api", "api_http_port")), Keep("db", port("database", "database_port")),
      Check(port_kv_matches("api_http_port", "database_port"), True),
      BUILD, Same("api", port("api", "api_http_port")), Same("db", port("database", "database_port")),
      lambda root: ws(root, "jobs/api/README", "rebuild"), BUILD,
      Same("api", port("api", "api_http_port")), Same("db", port("database", "database_port")),
      Check(port_kv_matches("api_http_port", "database_port"), True)]),
    ("JobKVCountJobRemovedNoWorker", "tests/build_job_test.go TestJobKVCountJobRemovedNoWorker",
     [manifest("a", '{"selectors": ["worker"]}'), BUILD, Check(maand_kv_count, 23), remove("jobs/a"), BUILD,
      Check(maand_kv_count, 9)]),
    ("JobKVCountJobRemoved", "tests/build_job_test.go TestJobKVCountJobRemoved",
     [ONE, manifest("a", '{"selectors": ["worker"]}'), BUILD, Check(maand_kv_count, 38), remove("jobs/a"), BUILD,
      Check(maand_kv_count, 21)]),
    ("JobKVCountWorkerJSONRemovedLater", "tests/build_job_test.go TestJobKVCountWorkerJSONRemovedLater",
     [ONE, BUILD, Check(maand_kv_count, 21), remove("workers.json"), BUILD, Check(maand_kv_count, 9)]),
    ("CountKVWorkerJSONAndJobRemoved", "tests/build_job_test.go TestCountKVWorkerJSONAndJobRemoved",
     [ONE, manifest("a", '{"selectors": ["worker"]}'), BUILD, Check(maand_kv_count, 38), remove("workers.json"), BUILD,
      Check(maand_kv_count, 9), remove("jobs/a"), BUILD, Check(maand_kv_count, 9)]),
    ("JobKVMaxMemoryAsDefaultIfNotInJobConf", "tests/build_job_test.go TestJobKVMaxMemoryAsDefaultIfNotInJobConf",
     [workers('[{"host":"10.0.0.1", "memory": "12", "cpu": "12"}]'),
      manifest("a", '{"selectors":["worker"], "resources":{"cpu": {"min":"12", "max": "12"}}}'), BUILD,
      Check(key("maand/job/a", "cpu"), "12"),
      manifest("a", '{"selectors":["worker"], "resources":{"memory": {"min":"11", "max": "12"}}}'), BUILD,
      Check(key("maand/job/a", "memory"), "12")]),
    ("JobInsufficientMemoryJobConf", "tests/build_job_test.go TestJobInsufficientMemoryJobConf",
     [workers('[{"host":"10.0.0.1", "memory": "12 mb"}]'), manifest("a", '{"selectors":["worker"]}'), BUILD,
      jobs_conf('\n[a]\nmemory="1 GB"\ncpu="1 GHZ"\n\t'), Fails("ErrInsufficientResource")]),
    ("JobInsufficientMemoryManifest1", "tests/build_job_test.go TestJobInsufficientMemoryManifest1",
     [workers('[{"host":"10.0.0.1", "memory": "12gb"}]'),
      manifest("a", '{"selectors":["worker"], "resources": { "memory":{ "min":"1GB", "max": "22gb" }}}'),
      Fails("ErrInsufficientResource")]),
    ("JobDepsAndConfig", "tests/build_job_test.go TestJobDepsAndConfig",
     [command_job("a", '{\n\t"version": "1.0.0",\n\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t"command_test_command": '
                  '{\n\t\t\t\t"executed_on": ["post_deploy"]\n\t\t\t}\n\t\t}\n\t}', "command_test_command.py"),
      command_job("b", '{\n\t"version": "1.0.0",\n\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t"command_test_command": '
                  '{\n\t\t\t\t"executed_on": ["post_deploy"],\n\t\t\t\t"demands": {\n\t\t\t\t\t"job": "a",\n\t\t\t\t\t'
                  '"command": "command_test_command",\n\t\t\t\t\t"config": {"a":1}\n\t\t\t\t}\n\t\t\t}\n\t\t}\n\t}',
                  "command_test_command.py"), BUILD, Check(seqs, {"a": 0, "b": 1}), Check(commands_on("post_deploy"), 2)]),
    ("JobDepsLevel3", "tests/build_job_test.go TestJobDepsLevel3",
     [workers('[{"host":"10.0.0.1"},{"host":"10.0.0.2"},{"host":"10.0.0.3"}]')]
     + [command_job(name, '{\n\t"version": "1.0.0",\n\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t'
                    '"command_test_command": {\n\t\t\t\t"executed_on": ["post_deploy"]%s\n\t\t\t}\n\t\t}\n\t}' % (
                        ',\n\t\t\t\t"demands": {\n\t\t\t\t\t"job": "%s",\n\t\t\t\t\t"command": "command_test_command"\n'
                        '\t\t\t\t}' % demand if demand else ""), "command_test_command.py")
        for name, demand in (("a", None), ("b", "a"), ("c", "b"))]
     + [command_job("d", '{\n\t"version": "1.0.0",\n\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t'
                    + ',\n\t\t\t'.join('"command_test_command%d": {\n\t\t\t\t"executed_on": ["post_deploy"],\n\t\t\t\t'
                                       '"demands": {\n\t\t\t\t\t"job": "%s",\n\t\t\t\t\t"command": "command_test_command"\n'
                                       '\t\t\t\t}\n\t\t\t}' % (n, d) for n, d in ((1, "a"), (2, "b")))
                    + '\n\t\t}\n\t}', "command_test_command1.py", "command_test_command2.py"),
        BUILD, Check(seqs, {"a": 0, "b": 1, "c": 2, "d": 2})]),
    # tests/build_job_command_test.go, build_job_command_bun_test.go
    ("JobCommandAddedUpdatedRemoved", "tests/build_job_command_test.go TestJobCommandAddedUpdatedRemoved",
     [command_job("a", '{"commands":{"command_health_check1":{"executed_on":["post_build"]}}}',
                  "command_health_check1.py", "command_health_check2.py", "command_health_check3.py"),
      BUILD, Check(commands_on("post_build"), 1),
      manifest("a", '{"commands":{"command_health_check1":{"executed_on":["post_build"]}, '
                    '"command_health_check2":{"executed_on":["post_build"]}}}'), BUILD, Check(commands_on("post_build"), 2),
      manifest("a", '{"commands":{"command_health_check3":{"executed_on":["post_build"]}, '
                    '"command_health_check2":{"executed_on":["post_build"]}}}'), BUILD, Check(commands_on("post_build"), 2),
      Check(lambda c, kv: sorted(job_field("a", "commands")(c, kv)[0]), ["command_health_check2", "command_health_check3"])]),
    ("JobDepsAndDeploymentSeq", "tests/build_job_command_test.go TestJobDepsAndDeploymentSeq",
     [command_job("a", '{"version":"1.0.0","selectors": ["worker"], "commands":{"command_health_check1":{"executed_on":["cli"]}}}',
                  "command_health_check1.py"),
      command_job("b", '{"version":"1.0.0","selectors": ["worker"], "commands":{"command_health_check2":{"executed_on":["cli"], '
                       '"demands":{"job":"a","command":"command_health_check1"}}}}', "command_health_check2.py"),
      command_job("c", '{"version":"1.0.0","selectors": ["worker"], "commands":{"command_health_check3":{"executed_on":["cli"], '
                       '"demands":{"job":"a","command":"command_health_check1"}}}}', "command_health_check3.py"),
      ONE, BUILD, Check(commands_on("cli"), 3), Check(seqs, {"a": 0, "b": 1, "c": 1})]),
    ("JobCommandBunEventsUpdatedOnRebuild", "tests/build_job_command_bun_test.go TestJobCommandBunEventsUpdatedOnRebuild",
     [ONE, command_job("bunevents", '{\n\t\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t"command_health_check": {\n'
                                    '\t\t\t\t"executed_on": ["cli"],\n\t\t\t\t"demands": {"job": "", "command": ""}\n\t\t\t}\n'
                                    '\t\t}\n\t}', "command_health_check.ts"),
      BUILD, Check(commands_on("cli", "bunevents"), 1),
      manifest("bunevents", '{\n\t\t"selectors": ["worker"],\n\t\t"commands": {\n\t\t\t"command_health_check": {\n'
                            '\t\t\t\t"executed_on": ["cli", "pre_deploy"],\n\t\t\t\t"demands": {"job": "", "command": ""}\n'
                            '\t\t\t}\n\t\t}\n\t}'),
      BUILD, Check(lambda c, kv: commands_on("cli", "bunevents")(c, kv) + commands_on("pre_deploy", "bunevents")(c, kv), 2)]),
    # build/ package tests whose SQLite rows are earlier builds' state, replayed as builds
    ("MinAllocations_skipsRemovedAllocations", "build/validate_test.go TestValidateMinAllocationsCount_skipsRemovedAllocations",
     [workers('[{"host":"10.0.0.1","labels":["app"]},{"host":"10.0.0.2","labels":["app"]}]'), manifest("app", "{}"), BUILD,
      manifest("app", '{"min_allocations_count":2}'), workers('[{"host":"10.0.0.1","labels":["app"]},{"host":"10.0.0.2"}]'),
      Fails("ErrInsufficientAllocations")]),
    ("Execute_purgeJobCommandKVOption", "build/execute_test.go TestExecute_purgeJobCommandKVOption",
     [workers('[{"host":"10.0.0.1","labels":["web"],"memory":"1024","cpu":"2000","position":0}]'),
      manifest("api", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t"memory": {"min": "128", '
                      '"max": "256"},\n\t\t\t"cpu": {"min": "100", "max": "200"}\n\t\t}\n\t}'), BUILD_PURGE,
      Check(active, [("api", "10.0.0.1")])]),
    ("Execute_fullWorkspacePipeline", "build/execute_test.go TestExecute_fullWorkspacePipeline",
     PIPELINE + [BUILD_PURGE, BUILD, Check(lambda c, kv: sum(1 for a in c["allocations"] if a["state"] != "removed"), 4),
                 Check(lambda c, kv: max_seq("db")(c, kv) < max_seq("api")(c, kv), True),
                 Check(key("vars/job/api", "cluster"), "primary"), Check(cert_of("10.0.0.2"), SET)]),
    ("BuildWorkersSyncsTagsAndRemovesStaleWorker", "build/build_jobs_test.go TestBuildWorkersSyncsTagsAndRemovesStaleWorker",
     [workers('[{"host":"10.0.0.99","memory":"1024","cpu":"2000"}]'), BUILD,
      workers('[{"host":"10.0.0.1","labels":["web"],"tags":{"rack":"a1"},"memory":"1024","cpu":"2000","position":0}]'), BUILD,
      Check(positions, {"10.0.0.1": 0}), Check(key("maand/worker/10.0.0.99", "worker_ip"), ABSENT),
      Check(key("maand/worker/10.0.0.1/tags", "rack"), "a1")]),
    ("BuildJobsRemovesStaleJobFromDatabase", "build/build_jobs_test.go TestBuildJobsRemovesStaleJobFromDatabase",
     [manifest("legacy", '{"version":"1.0.0"}'), manifest("api", '{"selectors":["web"]}'), BUILD, remove("jobs/legacy"), BUILD,
      Check(jobs, ["api"])]),
    ("BuildAllocationsMatchesLabelsAndRemovesStaleJobs", "build/build_allocations_test.go TestBuildAllocationsMatchesLabelsAndRemovesStaleJobs",
     ALLOC_SEED + [BUILD, Check(state_of("web", "10.0.0.1"), "active"), Check(state_of("db", "10.0.0.1"), "removed"),
                   Check(state_of("db", "10.0.0.2"), "active"), Check(job_field("web", "version"), ("1.0.0",))]),
    ("BuildAllocationsAppliesDisabledConfigAndReenable", "build/build_allocations_test.go TestBuildAllocationsAppliesDisabledConfigAndReenable",
     # maand's hash row reset (previous_hash NULL: the re-enabled allocation is deployed again) is the deploy's
     # business here: a re-enabled allocation is planned from its worker's deploy record (tests/unit/plugin_utils/deploy)
     ALLOC_SEED + [disabled('{"jobs":{"web":{"allocations":["10.0.0.1"]}}}'), BUILD, Check(state_of("web", "10.0.0.1"), "disabled"),
                   remove("disabled.json"), BUILD, Check(state_of("web", "10.0.0.1"), "active")]),
    ("BuildAllocations_disablesWorkerFromConfig", "build/build_allocations_test.go TestBuildAllocations_disablesWorkerFromConfig",
     # maand counts 2 rows with disabled = 1 on 10.0.0.1: web, and the stale db row (removed = 1 and disabled = 1);
     # here an allocation has one state, and removed is kept for the stale one
     ALLOC_SEED + [disabled('{"workers":["10.0.0.1"]}'), BUILD, Check(state_of("web", "10.0.0.1"), "disabled"),
                   Check(state_of("db", "10.0.0.1"), "removed")]),
    ("BuildAllocations_disablesEntireJobFromConfig", "build/build_allocations_test.go TestBuildAllocations_disablesEntireJobFromConfig",
     ALLOC_SEED + [disabled('{"jobs":{"web":{}}}'), BUILD, Check(allocations("disabled"), 1), Check(state_of("web", "10.0.0.1"), "disabled")]),
    ("BuildVariablesSyncsWorkerAndBucketKV", "build/build_execute_helpers_test.go TestBuildVariablesSyncsWorkerAndBucketKV",
     # maand's test writes secrets/ca.crt = "test-ca" alone; here a CA is a pair (half a CA is refused by every
     # build, test_certs_build.py test_half_present_ca_refuses_and_writes_nothing): another bucket's CA pair
     [other_ca, workers('[{"host":"10.0.0.1","memory":"1024","cpu":"2000","position":0}]'), manifest("api", '{"version":"1.0.0"}'),
      BUILD, Check(key("maand/worker/10.0.0.1", "worker_ip"), "10.0.0.1"), Check(key("maand/bucket", "bucket_id"), SET),
      Check(key("maand/worker", "certs/ca.crt"), SET)]),
    ("StableJobIDDeterministic", "workspace/ids_test.go TestStableJobIDDeterministic",
     [manifest("my-job", "{}"), manifest("other", "{}"), BUILD, Keep("id", key("maand/job/my-job", "job_id")), BUILD,
      Same("id", key("maand/job/my-job", "job_id")),
      Check(lambda c, kv: kv["maand/job/other"]["job_id"] != kv["maand/job/my-job"]["job_id"], True)]),
    ("PlacementSelectors_usesManifestSelectorsWhenSet_kv", "workspace/manifest_test.go TestPlacementSelectors_usesManifestSelectorsWhenSet",
     [manifest("api", '{"selectors":["worker","prod"]}'), BUILD, Check(key("maand/job/api", "selectors"), "worker,prod")]),
    # build/build_certs_test.go (seedBuildCertsDB as a workspace)
    ("BuildCerts_generatesPerWorkerCerts", "build/build_certs_test.go TestBuildCerts_generatesPerWorkerCerts",
     [CERT_WORKERS, cert_api(False), BUILD] + [Check(cert_of(h, ext=e), SET) for h in ("10.0.0.1", "10.0.0.2") for e in ("crt", "key")]
     + [Check(lambda c, kv: len(set(both_certs(c, kv))), 2)]),
    ("BuildCerts_generatesSharedCert", "build/build_certs_test.go TestBuildCerts_generatesSharedCert",
     [CERT_WORKERS, cert_api(True), BUILD] + [Check(cert_of(h, ext=e), SET) for h in ("10.0.0.1", "10.0.0.2") for e in ("crt", "key")]
     + [Check(lambda c, kv: len(set(both_certs(c, kv))), 1)]),
    ("BuildWorkerCertPEM_reusesStoredKV", "build/build_certs_test.go TestBuildWorkerCertPEM_reusesStoredKV",
     [CERT_WORKERS, cert_api(False), BUILD, Keep("certs", both_certs), BUILD, Same("certs", both_certs)]),
    ("BuildSharedCertPEM_reusesStoredKV", "build/build_certs_test.go TestBuildSharedCertPEM_reusesStoredKV",
     [CERT_WORKERS, cert_api(True), BUILD, Keep("certs", both_certs), BUILD, Same("certs", both_certs)]),
    # maand's regenerate flag is set when a job's cert entry changed (jobRegenerate); here: the subject changes
    ("BuildWorkerCertPEM_regenerates", "build/build_certs_test.go TestBuildWorkerCertPEM_regenerates, "
     "TestCertNeedsRegeneration_jobRegenerate",
     [CERT_WORKERS, cert_api(False), BUILD, Keep("one", cert_of("10.0.0.1")), cert_api(False, "api2"), BUILD,
      Same("one", cert_of("10.0.0.1"), differs=True)]),
    ("BuildSharedCertPEM_regeneratesAllWorkers", "build/build_certs_test.go TestBuildSharedCertPEM_regeneratesAllWorkers",
     [CERT_WORKERS, cert_api(True), BUILD, Keep("certs", both_certs), cert_api(True, "api2"), BUILD,
      Check(lambda c, kv: len(set(both_certs(c, kv))), 1), Same("certs", both_certs, differs=True)]),
    ("BuildCerts_purgesCertKVWhenJobHasNoSpecs", "build/build_certs_test.go TestBuildCerts_purgesCertKVWhenJobHasNoSpecs",
     [CERT_WORKERS, cert_api(False), BUILD, Check(cert_of("10.0.0.1"), SET),
      manifest("api", '{"version":"1.0.0","selectors":["worker"]}'), BUILD, Check(cert_of("10.0.0.1"), ABSENT),
      Check(cert_of("10.0.0.1", ext="key"), ABSENT)]),
]


@pytest.fixture(autouse=True)
def small_keys(monkeypatch):
    monkeypatch.setattr(_ca, "KEY_SIZE", 1024)  # maand's test-mode size (test_certs_build.py): keeps the rows fast


@pytest.mark.parametrize("name, source, steps", CASES, ids=[c[0] for c in CASES])
def test_maand_rebuild(tmp_path, name, source, steps):
    root = init_bucket(tmp_path / "bucket")
    catalog = kv = None
    kept = {}
    for number, step in enumerate(steps):
        where = "%s step %d" % (source, number)
        if step in (BUILD, BUILD_PURGE) or isinstance(step, Fails):
            if source.startswith("tests/"):  # maand's tests/ package builds through its harness (tests/maand_init.py)
                harness_labels(root)
            # maand has no ErrRemoveAll guard (a job losing every allocation builds): maand_allow_remove_all=true
            result = _service.build(root, purge_job_kv=step == BUILD_PURGE, allow_remove_all=True)
            if isinstance(step, Fails):
                found = {p.kind for p in result.report.errors}
                assert step.kind in found, "%s: maand refuses with %s; here: %s" % (where, step.kind, found or "OK")
                continue
            assert result.report.ok, "%s: %s" % (where, [str(p) for p in result.report.errors])
            catalog, kv = result.catalog, _kv_build.read_kv(root, reveal_secrets=True)
        elif isinstance(step, (Check, Keep, Same)):
            assert catalog is not None, "a check before any build"
            got = step.get(catalog, kv)
            if isinstance(step, Keep):
                assert got, "%s: nothing to keep" % where
                kept[step.name] = got
            elif isinstance(step, Same):
                assert (got != kept[step.name] and bool(got)) if step.differs else got == kept[step.name], where
            elif step.expected is ABSENT:
                assert got in (None, ""), "%s: %r" % (where, got)
            elif step.expected is SET:
                assert got, "%s: empty" % where
            elif callable(step.expected):
                assert step.expected(got), "%s: %r" % (where, got)
            else:
                assert got == step.expected, "%s: %r" % (where, got)
        else:
            step(root)


@pytest.mark.parametrize("port, words", [(22, "expected a string"), ("22", "not in resources.ports"),
                                         ("http_port", None)])
def test_health_probe_port_is_a_port_name(tmp_path, port, words):
    """workspace/health_check.go (HealthCheckProbe.Port is a Go string naming a resources.ports key): a number,
    quoted or not, is refused, as maand refuses it (docs/parity.md, docs/deploy.md)."""
    root = init_bucket(tmp_path)
    job(root, "a", {"resources": {"ports": {"http_port": {}}}, "health_check": {"checks": [{"type": "tcp", "port": port}]}})
    result = _service.compute(root)
    found = [(p.kind, p.field) for p in result.report.errors]
    if words is None:
        assert result.report.ok, found
        return
    assert found == [("ErrInvalidManifest", "health_check.checks[0].port")], found
    assert words in str(result.report.errors[0])


def test_cat_command(tmp_path):
    """tests/build_bucket_test.go TestCatCommand: after maand's build, its cat verbs answer (JobCommands, Jobs,
    JobPorts, KV, Allocations, Workers); here the maand.core.cat views, each with its rows. maand's `cat
    job_commands` has no view of its own here: a job's commands are in data/catalog.json (checked below)."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host": "10.0.0.1"}]')
    job(root, "a", '{"selectors": ["worker"], "commands":{"command_health_check":{"executed_on":["cli"]}}, '
                   '"resources":{"ports":{"web_port":{}}}}', modules=["command_health_check.py"])
    job(root, "b", '{"selectors": ["worker"], "commands":{"command_health_check":{"executed_on":["cli"]}}}',
        modules=["command_health_check.py"])
    result = _service.build(root)
    assert result.report.ok, result.report.error_text()
    rows = {view: _cat.cat(root, _cat.Request(view=view)).rows for view in ("jobs", "ports", "kv", "allocations", "workers")}
    assert [r[0] for r in rows["jobs"]] == ["a", "b"] and rows["ports"] == [("a", "web_port", rows["ports"][0][2])]
    assert sorted((r[0], r[1]) for r in rows["allocations"]) == [("a", "10.0.0.1"), ("b", "10.0.0.1")]
    assert [r[0] for r in rows["workers"]] == ["10.0.0.1"] and len(rows["kv"]) > 20
    assert commands_on("cli")(result.catalog, None) == 2


def test_sync_cert_key_values_preserves_allocation_metadata(tmp_path):
    """build/build_allocation_variables_test.go TestSyncCertKeyValuesPreservesAllocationMetadata: the certificate
    keys and the allocation keys (zookeeper_allocation_index, peer_workers) of maand/job/zookeeper/worker/10.48.200.1
    live side by side; a rebuild that keeps the certificate keeps the allocation keys at their versions."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.48.200.1"},{"host":"10.48.200.2"},{"host":"10.48.200.3"}]')
    job(root, "zookeeper", '{"selectors":["worker"],"certs":{"quorum":{"subject":{"common_name":"zookeeper"}}}}')
    ns = "maand/job/zookeeper/worker/10.48.200.1"
    entries = []
    for _build_number in range(2):
        assert _service.build(root).report.ok
        space = _store.KVStore.load(root).namespaces[ns]
        entries.append({k: (space[k].value, space[k].version) for k in (
            "certs/quorum.crt", "certs/quorum.key", "zookeeper_allocation_index", "peer_workers")})
    assert entries[0] == entries[1]
    assert entries[1]["zookeeper_allocation_index"][0] == "0"
    assert entries[1]["peer_workers"][0] == "10.48.200.2,10.48.200.3"

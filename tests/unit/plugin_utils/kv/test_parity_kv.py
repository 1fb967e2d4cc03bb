"""maand's KV and build-state tests (maand-sh/maand tests/build_kv_variables_test.go, build_vars_job_test.go,
build_job_config_selector_test.go, build_post_build_test.go, build_worker_tags_test.go,
build_worker_operation_test.go, build/build_variables_test.go, build/build_allocation_variables_test.go,
tests/init_test.go, port_range_test.go, bucket_paths_test.go) as a data-driven table.

Each row replays the Go test on a `maand init` bucket: a list of steps (workspace edits, KV seeds, and BUILD,
a full build that writes data/catalog.json and data/kv.json), then checks the keys the Go test reads with
GetKey / store.Get (here: data/kv.json, secrets revealed). maand's Go unit tests that poke one internal
function over a hand-made SQLite database are replayed through the whole build with the workspace that
produces the same rows. Rows where maand.core differs on purpose are xfail with the reason (docs/parity.md,
Differences from maand).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.hooks import points as _points
from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws

BUILD = "build"
BUILD_PURGE = "build --purge-job-kv"  # -e maand_purge_job_kv=true
ABSENT = object()  # the key is not there (or deleted)
SET = object()  # the key is there with a non-empty value


def workers(text):
    return lambda root: ws(root, "workers.json", text)


def manifest(name, text, **kw):
    return lambda root: job(root, name, text, **kw)


def write_ws(rel, text):
    return lambda root: ws(root, rel, text)


def maand_conf(text):
    def run(root):
        with open(os.path.join(root, "maand.conf"), "w", encoding="utf-8") as handle:
            handle.write(text)
    return run


def remove_job(name):
    return lambda root: shutil.rmtree(os.path.join(root, "workspace", "jobs", name))


def seed(namespace, key, value):
    """A key written outside build (a job command's put, or a key a test plants in a build-owned namespace)."""
    def run(root):
        with _store.KVStore.edit(root) as store:
            if _store.is_user_ns(namespace):
                store.put(namespace, key, value)
            else:
                store.namespaces.setdefault(namespace, {})[key] = _store.Entry(value)
                store.dirty = True
    return run


def replay(root, steps):
    for step in steps:
        if step in (BUILD, BUILD_PURGE):
            # maand has no ErrRemoveAll guard: its steps that remove every allocation build (maand_allow_remove_all)
            result = _service.build(root, purge_job_kv=step == BUILD_PURGE, allow_remove_all=True)
            assert result.report.ok, [str(p) for p in result.report.errors]
        else:
            step(root)
    return _kv_build.read_kv(root, reveal_secrets=True)


SVC_WORKERS = workers('[{"host":"10.0.0.1","labels":["svc"],"position":1,"hostname":"w1"},'
                      '{"host":"10.0.0.2","labels":["svc"],"position":0,"hostname":"w2"}]')
APP_WORKER = workers('[{"host":"10.0.0.1","labels":["app"]}]')
TWO_API = workers('[{"host":"10.0.0.1","labels":["api"],"memory":"1024","cpu":"2000"},'
                  '{"host":"10.0.0.2","labels":["api"],"memory":"1024","cpu":"2000"}]')
API_8080 = manifest("api", '{"selectors":["api"],"version":"1.0.0","resources":{"ports":{"http_port":8080}}}')
VAULT = [workers('[{"host":"10.0.0.1","labels":["vault"]}]'), manifest("vault", '{"selectors":["vault"],"version":"1.0.0"}'),
         BUILD, seed("vars/job/vault", "cluster_initialized", "true"), seed("secrets/job/vault", "root_token", "enc:v1:token"),
         manifest("vault", '{"selectors":["nomatch"],"version":"1.0.0"}'), BUILD]
VAULT_PURGED = VAULT[:-1] + [BUILD_PURGE]

# (id, maand test, steps, {(namespace, key): expected value, ABSENT or SET}, xfail reason or None)
CASES = [
    ("BuildKVJobAndAllocationVariables", "tests/build_kv_variables_test.go TestBuildKVJobAndAllocationVariables",
     [SVC_WORKERS, manifest("svc", '{"selectors":["svc"],"resources":{"ports":{"svc_http_port":{},"svc_cql_port":{}}}}'),
      BUILD],
     {("maand/job/svc", "workers"): "10.0.0.2,10.0.0.1", ("maand/job/svc", "workers_length"): "2",
      ("maand/job/svc", "worker_0"): "10.0.0.2", ("maand/job/svc", "worker_1"): "10.0.0.1",
      ("maand/bucket", "svc_http_port"): SET, ("maand/bucket", "svc_cql_port"): SET,
      ("maand/job/svc", "ports_json"): ABSENT, ("maand/bucket", "jobs"): "svc", ("maand/bucket", "activejobs"): "svc",
      ("maand/bucket", "bucket_id"): SET, ("maand/worker/10.0.0.1", "position"): "1",
      ("maand/worker/10.0.0.1", "hostname"): "w1", ("maand/job/svc/worker/10.0.0.2", "svc_allocation_index"): "0",
      ("maand/job/svc/worker/10.0.0.2", "peer_workers"): "10.0.0.1"}, None),
    ("VarsJobFromWorkspaceSurvivesRebuild", "tests/build_vars_job_test.go TestVarsJobFromWorkspaceSurvivesRebuild",
     [APP_WORKER, manifest("app", '{"selectors":["app"]}'),
      write_ws("jobs/app/vars.toml", 'cluster_name = "prod"\ndc = "us-east"\n'), BUILD,
      manifest("app", '{"selectors":["app"],"version":"2"}'), BUILD],
     {("vars/job/app", "cluster_name"): "prod", ("vars/job/app", "dc"): "us-east"}, None),
    ("VarsJobKVPutSurvivesRebuild", "tests/build_vars_job_test.go TestVarsJobKVPutSurvivesRebuild",
     [APP_WORKER, manifest("app", '{"selectors":["app"]}'), BUILD, seed("vars/job/app", "from_script", "stable"), BUILD],
     {("vars/job/app", "from_script"): "stable"}, None),
    ("VarsJobWorkspaceMergeDoesNotDeleteScriptKeys",
     "tests/build_vars_job_test.go TestVarsJobWorkspaceMergeDoesNotDeleteScriptKeys",
     [APP_WORKER, manifest("app", '{"selectors":["app"]}'), write_ws("jobs/app/vars.toml", 'tracked = "yes"'),
      seed("vars/job/app", "runtime_only", "keep-me"), BUILD],
     {("vars/job/app", "tracked"): "yes", ("vars/job/app", "runtime_only"): "keep-me"}, None),
    ("BuildPurgesJobCommandKVWhenFlagSet",
     "tests/build_vars_job_test.go TestBuildPurgesJobCommandKVWhenFlagSetAndNoActiveAllocations (build.Options{PurgeJobCommandKV})",
     VAULT_PURGED, {("vars/job/vault", "cluster_initialized"): ABSENT, ("secrets/job/vault", "root_token"): ABSENT}, None),
    ("BuildDoesNotPurgeJobCommandKVWhenNoActiveAllocations",
     "tests/build_vars_job_test.go TestBuildDoesNotPurgeJobCommandKVWhenNoActiveAllocations",
     VAULT, {("vars/job/vault", "cluster_initialized"): "true", ("secrets/job/vault", "root_token"): "enc:v1:token"}, None),
    ("BuildUsesJobConfigSelectorConf", "tests/build_job_config_selector_test.go TestBuildUsesJobConfigSelectorConf",
     [workers('[{"host":"10.0.0.1"}]'), manifest("app", '{"selectors":["worker"]}'),
      write_ws("bucket.jobs.prod.conf", '[app]\nmarker = "from-prod-conf"\n'),
      maand_conf('ssh_user = "agent"\nssh_key = "worker.key"\nuse_sudo = true\njob_config_selector = "prod"\n'), BUILD],
     {("vars/bucket/job/app", "marker"): "from-prod-conf"}, None),
    ("WorkerTagAdded", "tests/build_worker_tags_test.go TestWorkerTagAdded",
     [workers('[{"host": "10.0.0.1"}]'), BUILD, workers('[{"host": "10.0.0.1", "tags": {"a":"v", "b": "v3"}}]'), BUILD],
     {("maand/worker/10.0.0.1/tags", "a"): "v", ("maand/worker/10.0.0.1/tags", "b"): "v3"}, None),
    ("WorkerTagUpdated", "tests/build_worker_tags_test.go TestWorkerTagUpdated",
     [workers('[{"host": "10.0.0.1", "tags": {"b": "v2"}}]'), BUILD,
      workers('[{"host": "10.0.0.1", "tags": {"a":"v", "b": "v3"}}]'), BUILD],
     {("maand/worker/10.0.0.1/tags", "a"): "v", ("maand/worker/10.0.0.1/tags", "b"): "v3"}, None),
    ("WorkerTagRemoved", "tests/build_worker_tags_test.go TestWorkerTagRemoved",
     [workers('[{"host": "10.0.0.1", "tags": {"a":"v", "b": "v2"}}]'), BUILD, workers('[{"host": "10.0.0.1"}]'), BUILD],
     {("maand/worker/10.0.0.1/tags", "a"): ABSENT, ("maand/worker/10.0.0.1/tags", "b"): ABSENT}, None),
    ("WorkerDefaultKVLabels", "tests/build_worker_operation_test.go TestWorkerDefaultKVLabels",
     [workers('[{"host": "10.0.0.1"}, {"host": "10.0.0.3"}]'), BUILD],
     {("maand/worker", "worker_workers"): "10.0.0.1,10.0.0.3", ("maand/worker", "worker_workers_length"): "2",
      ("maand/worker", "worker_label_id"): SET, ("maand/worker", "worker_0"): "10.0.0.1",
      ("maand/worker", "worker_1"): "10.0.0.3", ("maand/worker/10.0.0.1", "labels"): "worker",
      ("maand/worker/10.0.0.3", "labels"): "worker", ("maand/worker/10.0.0.1", "worker_allocation_index"): "0",
      ("maand/worker/10.0.0.3", "worker_allocation_index"): "1", ("maand/worker/10.0.0.1", "worker_id"): SET,
      ("maand/worker/10.0.0.1", "worker_ip"): "10.0.0.1", ("maand/worker/10.0.0.3", "worker_ip"): "10.0.0.3",
      ("maand/worker/10.0.0.1", "worker_peers"): "10.0.0.3", ("maand/worker/10.0.0.3", "worker_peers"): "10.0.0.1",
      ("maand/worker/10.0.0.1", "worker_memory_mb"): "0", ("maand/worker/10.0.0.3", "worker_memory_mb"): "0",
      ("maand/worker/10.0.0.1", "worker_cpu_mhz"): "0", ("maand/worker/10.0.0.3", "worker_cpu_mhz"): "0"}, None),
    ("JobShouldPurgeBuildKV_disabled_only", "build/build_variables_test.go TestJobShouldPurgeBuildKV (disabled rows keep KV)",
     [TWO_API, API_8080, write_ws("disabled.json", '{"jobs":{"api":{}}}'), BUILD],
     {("maand/job/api", "name"): "api", ("maand/job/api", "workers"): ""}, None),
    ("JobShouldPurgeBuildKV_all_removed", "build/build_variables_test.go TestJobShouldPurgeBuildKV (all rows removed: purged)",
     [TWO_API, API_8080, BUILD, manifest("api", '{"selectors":["nomatch"],"version":"1.0.0"}'), BUILD],
     {("maand/job/api", "name"): ABSENT, ("maand/job/api", "workers"): ABSENT,
      ("maand/job/api/worker/10.0.0.1", "api_allocation_index"): ABSENT}, None),
    ("BuildJobVariablesSyncsRolloutOrder", "build/build_variables_test.go TestBuildJobVariablesSyncsRolloutOrder",
     [TWO_API, API_8080, BUILD], {("maand/job/api", "rollout_order"): "10.0.0.1,10.0.0.2"}, None),
    ("BuildJobVariables_emptyWorkersWhenDisabledOnly",
     "build/build_variables_test.go TestBuildJobVariables_emptyWorkersWhenDisabledOnly",
     [workers('[{"host":"10.0.0.1","labels":["api"]}]'), API_8080,
      write_ws("disabled.json", '{"jobs":{"api":{"allocations":["10.0.0.1"]}}}'), BUILD],
     {("maand/job/api", "workers"): "", ("maand/job/api", "workers_length"): "0"}, None),
    ("BuildJobVariablesPurgesCommandKVWhenRequested",
     "build/build_variables_test.go TestBuildJobVariablesPurgesCommandKVWhenRequested / TestPurgeJobCommandKVNamespaces",
     VAULT_PURGED, {("vars/job/vault", "cluster_initialized"): ABSENT, ("secrets/job/vault", "root_token"): ABSENT}, None),
    ("PurgeJobCommandKV_removed_job", "build/build_variables.go buildJobVariables (removedJobs, purgeJobCommandKV)",
     [TWO_API, API_8080, manifest("gone", '{"selectors":["api"]}'), BUILD, seed("vars/job/gone", "k", "v"),
      seed("secrets/job/gone", "s", "x"), seed("vars/job/api", "k", "v"), remove_job("gone"), BUILD_PURGE],
     {("vars/job/gone", "k"): ABSENT, ("secrets/job/gone", "s"): ABSENT, ("vars/job/api", "k"): "v"}, None),
    ("PurgeJobCommandKV_keeps_disabled_only", "build/build_variables.go jobShouldPurgeBuildKV (disabled rows keep KV)",
     [TWO_API, API_8080, BUILD, seed("vars/job/api", "k", "v"), write_ws("disabled.json", '{"jobs":{"api":{}}}'),
      BUILD_PURGE], {("vars/job/api", "k"): "v", ("maand/job/api", "workers"): ""}, None),
    ("BuildJobVariablesPurgesRemovedJobKV",
     "build/build_variables_test.go TestBuildJobVariablesPurgesRemovedJobKV / TestPurgeBuildJobKVNamespaces",
     [TWO_API, manifest("gone", '{"selectors":["api"],"version":"1.0.0"}'), write_ws("bucket.jobs.conf", '[gone]\nmemory = "512"\n'),
      BUILD, seed("vars/job/gone", "cluster_initialized", "true"), remove_job("gone"), write_ws("bucket.jobs.conf", ""), BUILD],
     {("maand/job/gone", "version"): ABSENT, ("vars/bucket/job/gone", "memory"): ABSENT,
      ("maand/job/gone/worker/10.0.0.1", "gone_allocation_index"): ABSENT,
      ("vars/job/gone", "cluster_initialized"): "true"}, None),
    ("SyncKeyValuesRemovesStaleKeys", "build/build_variables_test.go TestSyncKeyValuesRemovesStaleKeys",
     [workers('[{"host":"10.0.0.1"}]'), BUILD, seed("maand/worker/10.0.0.1", "stale", "old"), BUILD],
     {("maand/worker/10.0.0.1", "worker_ip"): "10.0.0.1", ("maand/worker/10.0.0.1", "stale"): ABSENT}, None),
    ("LoadJobBucketConfig_readsPerJobSettings", "build/build_variables_test.go TestLoadJobBucketConfig_readsPerJobSettings",
     [TWO_API, API_8080, write_ws("bucket.jobs.conf", '[api]\nmemory = "256 mb"\ncpu = "200 mhz"\n'), BUILD],
     {("vars/bucket/job/api", "memory"): "256 mb", ("vars/bucket/job/api", "cpu"): "200 mhz",
      ("maand/job/api", "memory"): "256", ("maand/job/api", "cpu"): "200"}, None),
    ("LoadJobBucketConfigMissingFile", "build/build_variables_test.go TestLoadJobBucketConfigMissingFile",
     [TWO_API, API_8080, BUILD], {("maand/job/api", "name"): "api", ("vars/bucket/job/api", "memory"): ABSENT}, None),
    ("BuildBucketVariablesSyncsBucketConf", "build/build_variables_test.go TestBuildBucketVariablesSyncsBucketConf",
     [TWO_API, API_8080, write_ws("bucket.conf", 'ssh_user = "deploy"'), BUILD],
     {("vars/bucket", "ssh_user"): "deploy", ("maand/bucket", "http_port"): "8080", ("maand/bucket", "activejobs"): "api"},
     None),
    ("BuildBucketVariables_skipsPortsWithoutActiveAllocations",
     "build/build_variables_test.go TestBuildBucketVariables_skipsPortsWithoutActiveAllocations",
     [TWO_API, API_8080, manifest("idle", '{"selectors":["nomatch"],"resources":{"ports":{"idle_port":9091}}}'), BUILD],
     {("maand/bucket", "http_port"): "8080", ("maand/bucket", "idle_port"): ABSENT, ("maand/bucket", "activejobs"): "api",
      ("maand/bucket", "jobs"): "api,idle"}, None),
    ("BuildJobVariablesSyncsActiveJobKV", "build/build_variables_test.go TestBuildJobVariablesSyncsActiveJobKV",
     [TWO_API, API_8080, BUILD],
     {("maand/job/api", "name"): "api", ("maand/job/api", "job_name"): "api", ("maand/job/api", "workers"): "10.0.0.1,10.0.0.2",
      ("maand/job/api", "job_id"): SET, ("maand/job/api", "version"): "1.0.0", ("maand/job/api", "selectors"): "api"}, None),
    ("MergeWorkspaceJobVars", "build/build_variables_test.go TestMergeWorkspaceJobVars",
     [TWO_API, API_8080, write_ws("jobs/api/vars.toml", 'name = "maand"'), BUILD], {("vars/job/api", "name"): "maand"}, None),
    ("BuildVariablesPurgesRemovedWorkerKV", "build/build_variables_test.go TestBuildVariablesPurgesRemovedWorkerKV",
     [TWO_API, API_8080, BUILD, workers('[{"host":"10.0.0.1","labels":["api"],"memory":"1024","cpu":"2000"}]'), BUILD],
     {("maand/worker/10.0.0.2", "worker_ip"): ABSENT, ("maand/job/api/worker/10.0.0.2", "api_allocation_index"): ABSENT,
      ("maand/worker/10.0.0.1", "worker_ip"): "10.0.0.1"}, None),
    ("BuildVariablesSyncsWorkerLabelsAndPeers", "build/build_variables_test.go TestBuildVariablesSyncsWorkerLabelsAndPeers",
     [workers('[{"host":"10.0.0.1","labels":["web"],"memory":"1024","cpu":"2000","position":0},'
              '{"host":"10.0.0.2","labels":["web"],"memory":"1024","cpu":"2000","position":1}]'), BUILD],
     {("maand/worker/10.0.0.1", "web_peers"): "10.0.0.2", ("maand/worker", "web_workers"): "10.0.0.1,10.0.0.2"}, None),
    ("WorkerMetaByIP", "build/build_variables_test.go TestWorkerMetaByIP",
     [workers('[{"host":"10.0.0.1","hostname":"worker-one","memory":"1024","cpu":"2000","position":0}]'), BUILD],
     {("maand/worker/10.0.0.1", "hostname"): "worker-one"}, None),
    ("SyncAllocationKeyValuesDropsStaleKeepsVersion",
     "build/build_allocation_variables_test.go TestSyncAllocationKeyValuesPreservesCertKeys (stale_meta dropped, version kept)",
     [TWO_API, API_8080, BUILD, seed("maand/job/api/worker/10.0.0.1", "stale_meta", "old"), BUILD],
     {("maand/job/api/worker/10.0.0.1", "stale_meta"): ABSENT, ("maand/job/api/worker/10.0.0.1", "version"): "1.0.0",
      ("maand/job/api/worker/10.0.0.1", "api_allocation_index"): "0"}, None),
    ("BuildJobAllocationVariables", "build/build_allocation_variables_test.go TestBuildJobAllocationVariables",
     [TWO_API, API_8080, BUILD],
     {("maand/job/api/worker/10.0.0.1", "api_allocation_index"): "0",
      ("maand/job/api/worker/10.0.0.1", "peer_workers"): "10.0.0.2",
      ("maand/job/api/worker/10.0.0.2", "api_allocation_index"): "1"}, None),
    ("BuildJobAllocationVariablesSyncsDisabledWorker",
     "build/build_allocation_variables_test.go TestBuildJobAllocationVariablesSyncsDisabledWorker",
     [TWO_API, API_8080, write_ws("disabled.json", '{"jobs":{"api":{"allocations":["10.0.0.2"]}}}'), BUILD,
      seed("maand/job/api/worker/10.0.0.2", "stale_meta", "old"), BUILD],
     {("maand/job/api/worker/10.0.0.2", "api_allocation_index"): "1",
      ("maand/job/api/worker/10.0.0.2", "peer_workers"): "10.0.0.1",
      ("maand/job/api/worker/10.0.0.2", "stale_meta"): ABSENT,
      ("maand/job/api/worker/10.0.0.1", "api_allocation_index"): "0", ("maand/job/api", "workers"): "10.0.0.1"}, None),
    ("BuildJobAllocationVariablesPurgeRemovedWorker",
     "build/build_allocation_variables_test.go TestBuildJobAllocationVariablesPurgeRemovedWorker",
     [TWO_API, API_8080, BUILD, workers('[{"host":"10.0.0.1","labels":["api"]},{"host":"10.0.0.2"}]'), BUILD],
     {("maand/job/api/worker/10.0.0.2", "api_allocation_index"): ABSENT,
      ("maand/job/api/worker/10.0.0.2", "peer_workers"): ABSENT,
      ("maand/job/api/worker/10.0.0.1", "peer_workers"): ""}, None),
    ("BuildJobAllocationVariablesClearsRemovedJobWorkers",
     "build/build_allocation_variables_test.go TestBuildJobAllocationVariablesClearsRemovedJobWorkers",
     [workers('[{"host":"10.0.0.1","labels":["legacy"]}]'), manifest("legacy", '{"version":"1.0.0"}'), BUILD,
      remove_job("legacy"), BUILD],
     {("maand/job/legacy/worker/10.0.0.1", "legacy_allocation_index"): ABSENT, ("maand/job/legacy", "name"): ABSENT}, None),
]


@pytest.mark.parametrize("name, source, steps, expected, differs", CASES, ids=[c[0] for c in CASES])
def test_maand_kv_outcome(tmp_path, name, source, steps, expected, differs):
    if differs:
        pytest.xfail(differs)
    kv = replay(init_bucket(tmp_path), steps)
    for (namespace, key), want in expected.items():
        got = (kv.get(namespace) or {}).get(key)
        where = "%s: %s %s (%s)" % (name, namespace, key, source)
        if want is ABSENT:
            assert got is None, where + " should be absent, is %r" % got
        elif want is SET:
            assert got, where + " should be set"
        else:
            assert got == want, where + " is %r, maand has %r" % (got, want)


def _live_workers(root):
    catalog = _catalog.read_catalog(root)
    return {w["host"]: w["position"] for w in catalog["workers"] if not w.get("removed")}


# tests/build_worker_operation_test.go: `SELECT worker_ip, position FROM worker` after each build
WORKER_OPERATIONS = [
    ("WorkerOperationAdded", "TestWorkerOperationAdded", '[{"host":"10.0.0.1"},{"host":"10.0.0.2"}]',
     '[{"host":"10.0.0.1"},{"host":"10.0.0.2"},{"host":"10.0.0.3"}]', {"10.0.0.1": 0, "10.0.0.2": 1, "10.0.0.3": 2}),
    ("WorkerOperationUpdated", "TestWorkerOperationUpdated", '[{"host":"10.0.0.1"},{"host":"10.0.0.2"}]',
     '[{"host":"10.0.0.1"},{"host":"10.0.0.3"}]', {"10.0.0.1": 0, "10.0.0.3": 1}),
    ("WorkerOperationRemoved", "TestWorkerOperationRemoved", '[{"host":"10.0.0.1"},{"host":"10.0.0.2"},{"host":"10.0.0.3"}]',
     '[{"host":"10.0.0.1"},{"host":"10.0.0.3"}]', {"10.0.0.1": 0, "10.0.0.3": 1}),
]


@pytest.mark.parametrize("name, go_test, first, second, positions", WORKER_OPERATIONS, ids=[c[0] for c in WORKER_OPERATIONS])
def test_maand_worker_operations(tmp_path, name, go_test, first, second, positions):
    root = init_bucket(tmp_path)
    replay(root, [workers(first), BUILD])
    assert len(_live_workers(root)) == len(json.loads(first)), go_test
    kv = replay(root, [workers(second), BUILD])
    assert _live_workers(root) == positions, go_test
    assert {ns.split("/")[-1] for ns in kv if ns.startswith("maand/worker/") and ns.count("/") == 2} == set(positions)


def test_post_build_command_is_recorded_in_the_catalog(tmp_path):
    """tests/build_post_build_test.go TestBuildFailsWhenPostBuildHooksFail: the job_commands row (job, post_build).
    The failing hook failing the build is tests/integration/test_parity_post_build.py (it runs a process)."""
    root = init_bucket(tmp_path)
    replay(root, [workers('[{"host":"10.0.0.1"}]'),
                  manifest("hookjob", '{"selectors":["worker"],"commands":{"command_post":{"executed_on":["post_build"]}}}',
                           modules=["command_post.py"]), BUILD])
    jobs = {j["name"]: j for j in _catalog.read_catalog(root)["jobs"]}
    assert jobs["hookjob"]["commands"]["command_post"]["executed_on"] == ["post_build"]


def test_secrets_ca_lands_in_maand_worker(tmp_path):
    """build/build_variables.go buildSharedWorkerVariables: secrets/ca.crt is maand/worker certs/ca.crt."""
    root = init_bucket(tmp_path)
    _certs.load_or_create_ca(root, "bucket-1", key_size=1024)
    with open(os.path.join(root, "secrets", "ca.crt"), encoding="utf-8") as handle:
        ca_pem = handle.read()
    kv = replay(root, [workers('[{"host":"10.0.0.1"}]'), BUILD])
    assert ca_pem.startswith("-----BEGIN CERTIFICATE-----") and kv["maand/worker"]["certs/ca.crt"] == ca_pem.strip()  # Put trims, as maand


def test_init_port_range_defaults(tmp_path):
    """tests/port_range_test.go TestInitDefaultBucketConfPortRange: init's bucket.conf gives 30000-39999."""
    root = init_bucket(tmp_path)
    kv = replay(root, [BUILD])
    catalog = _catalog.read_catalog(root)
    assert (catalog["port_min"], catalog["port_max"]) == (30000, 39999)
    assert (kv["vars/bucket"]["port_min"], kv["vars/bucket"]["port_max"]) == ("30000", "39999")


@pytest.mark.parametrize("present", ["ca.crt", "ca.key"])
def test_incomplete_ca_fails(tmp_path, present):
    """tests/init_test.go TestInitIncompleteCAFails ("CA is incomplete"); here build refuses it (maand: init),
    writing nothing."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    os.makedirs(os.path.join(root, "secrets"))
    with open(os.path.join(root, "secrets", present), "w", encoding="utf-8") as handle:
        handle.write("partial")
    result = _service.build(root)
    assert [p.kind for p in result.report.errors] == ["ErrInvalidCA"]
    assert "CA is incomplete" in str(result.report.errors[0])
    assert not os.path.exists(os.path.join(root, "data", "catalog.json"))


def test_build_resets_a_hook_rollout_order_and_its_own_is_no_override(tmp_path):
    """build/build_variables.go syncs rollout_order from the catalog; docs/reference/cli/job-command.md: a
    pre_deploy put_rollout_order() lasts one deploy, build resets it. Deploy reads only a hook's order."""
    root = init_bucket(tmp_path)
    replay(root, [TWO_API, API_8080, BUILD])
    assert _points.rollout_orders(root, ["api"]) == {}
    with _store.KVStore.edit(root) as store:
        store.put_rollout_order("api", "10.0.0.2,10.0.0.1")
    assert _points.rollout_orders(root, ["api"]) == {"api": "10.0.0.2,10.0.0.1"}
    kv = replay(root, [BUILD])
    assert kv["maand/job/api"]["rollout_order"] == "10.0.0.1,10.0.0.2"
    assert _points.rollout_orders(root, ["api"]) == {}

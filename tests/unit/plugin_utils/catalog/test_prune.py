"""catalog/prune.py: the catalog after a deploy cleaned removed allocations, and the KV keys of the jobs that
left with them, under the bucket lock (the deploy says what to drop: deploy/service.finish)."""

from __future__ import annotations

import shutil

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog, prune as _prune
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws


def removed_web(tmp_path):
    """A built bucket whose job web was removed from the workspace (its rows: state removed)."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": "10.0.0.1", "labels": ["worker"]}])
    job(root, "api", {"version": "1.0.0", "selectors": ["worker"]})
    job(root, "web", {"version": "1.0.0", "selectors": ["worker"]})
    assert _service.build(root).report.ok
    store = _store.KVStore.load(root)
    store.put("vars/job/web", "kept", "yes")
    store.save()
    shutil.rmtree(root + "/workspace/jobs/web")
    assert _service.build(root).report.ok
    return root


def drop(job_name):
    return lambda catalog: dict(catalog, allocations=[a for a in catalog["allocations"] if a["job"] != job_name],
                                jobs=[j for j in catalog["jobs"] if j["name"] != job_name])


def test_prune_writes_the_new_catalog_and_drops_the_kv_of_the_jobs_that_left(tmp_path):
    root = removed_web(tmp_path)
    lines = []
    out = _prune.prune(root, _catalog.read_catalog(root)["bucket_id"], drop("web"),
                       lambda msg, color=None: lines.append(msg))
    assert (out.changed, out.pruned, out.problem) == (True, ["web@10.0.0.1"], None)
    assert [j["name"] for j in _catalog.read_catalog(root)["jobs"]] == ["api"]
    assert "vars/job/web" not in _store.KVStore.load(root).snapshot()
    assert lines == ["catalog: dropped 1 cleaned removed allocation(s): web@10.0.0.1",
                     "KV: 1 key(s) of removed job(s) web deleted"]


def test_a_catalog_of_another_bucket_or_nothing_to_drop_is_left_alone(tmp_path):
    root = removed_web(tmp_path)
    before = _catalog.read_catalog(root)
    assert _prune.prune(root, "another-bucket-id", drop("web")) == _prune.Pruned()
    assert _prune.prune(root, before["bucket_id"], lambda catalog: catalog) == _prune.Pruned()
    assert _catalog.read_catalog(root) == before


def test_a_catalog_that_cannot_be_written_is_the_problem_not_an_exception(tmp_path, monkeypatch):
    root = removed_web(tmp_path)

    def refuse(bucket, catalog):
        raise OSError("read-only file system")
    monkeypatch.setattr(_catalog, "write_catalog", refuse)
    out = _prune.prune(root, _catalog.read_catalog(root)["bucket_id"], drop("web"))
    assert (out.changed, out.pruned) == (False, [])
    assert out.problem == "could not update data/catalog.json or data/kv.json: read-only file system"

"""maand.core.cat tables (_cat): views as maand's `maand cat` (maand-sh/maand cat/*.go columns),
filters with did-you-mean, secrets masked unless revealed, deployments honest about what exists."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.build import service as _build
from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _kv_store
from tests.unit.plugin_utils.build.test_kv_build import bucket


@pytest.fixture()
def built(tmp_path):
    root = bucket(tmp_path)
    assert _build.build(root).written
    store = _kv_store.KVStore.load(root)
    store.put("secrets/job/api", "db_password", "hunter2-secret")
    store.save()
    return root


def rows(root, view, **kw):
    return _cat.cat(root, _cat.Request(view, **kw)).as_dicts()


def test_kv_masks_secrets_unless_revealed(built):
    table = _cat.cat(built, _cat.Request("kv", jobs=("api",)))
    text = "\n".join(table.lines())
    assert "hunter2-secret" not in text and "secrets are shown as ***" in text
    secret = [r for r in table.as_dicts() if r["namespace"] == "secrets/job/api"]
    assert secret == [dict(secret[0], key="db_password", value="***", version="1")]
    revealed = rows(built, "kv", jobs=("api",), reveal=True)
    assert {"namespace": "secrets/job/api", "key": "db_password", "value": "hunter2-secret"}.items() <= \
        [r for r in revealed if r["key"] == "db_password"][0].items()


def test_kv_filters_by_job_and_worker(built):
    by_job = {r["namespace"] for r in rows(built, "kv", jobs=("api",))}
    assert by_job == {"maand/job/api", "maand/job/api/worker/10.0.0.1", "maand/job/api/worker/10.0.0.2",
                      "vars/job/api", "secrets/job/api"}
    by_worker = {r["namespace"] for r in rows(built, "kv", workers=("10.0.0.2",))}
    assert by_worker == {"maand/worker/10.0.0.2", "maand/job/api/worker/10.0.0.2"}
    both = {r["namespace"] for r in rows(built, "kv", jobs=("api",), workers=("10.0.0.2",))}
    assert both == {"maand/job/api", "maand/job/api/worker/10.0.0.2", "vars/job/api", "secrets/job/api"}
    everything = {r["namespace"] for r in rows(built, "kv")}
    assert {"maand/bucket", "vars/bucket", "maand/worker"} <= everything


def test_kv_deleted_keys_only_when_asked(built):
    store = _kv_store.KVStore.load(built)
    store.put("vars/job/api", "temp", "1")
    store.delete("vars/job/api", "temp")
    store.save()
    assert not [r for r in rows(built, "kv", jobs=("api",)) if r["key"] == "temp"]
    [row] = [r for r in rows(built, "kv", jobs=("api",), deleted=True) if r["key"] == "temp"]
    assert row["value"] == "(deleted)" and row["version"] == "2"


def test_kv_before_the_store_exists_is_computed_and_says_so(built):
    os.unlink(os.path.join(built, "data", "kv.json"))
    table = _cat.cat(built, _cat.Request("kv", jobs=("api",)))
    assert any(r[1] == "service_name" for r in table.rows)
    assert "build has not written data/kv.json yet" in table.notes[-1]


def test_catalog_views(built):
    assert [(r["job"], r["worker"], r["state"]) for r in rows(built, "allocations")] == [
        ("api", "10.0.0.1", "active"), ("api", "10.0.0.2", "active")]
    assert [r["worker"] for r in rows(built, "allocations", workers=("10.0.0.2",))] == ["10.0.0.2"]
    [job] = rows(built, "jobs")
    assert job["job"] == "api" and job["version"] == "1.2.0" and job["allocations"] == "2 active / 2"
    workers = rows(built, "workers")
    assert [(w["worker"], w["memory"], w["position"], w["jobs"]) for w in workers] == [
        ("10.0.0.1", "4096 MB", "0", "api"), ("10.0.0.2", "4096 MB", "1", "api")]
    assert rows(built, "ports") == [{"job": "api", "name": "api_http_port", "port": "30000"}]


def test_deployments_without_and_with_a_kept_run(built):
    table = _cat.cat(built, _cat.Request("deployments"))
    assert [r["last run"] for r in table.as_dicts()] == ["-", "-"]
    assert "keeps no deploy run" in table.notes[-1]
    run = os.path.join(built, "data", ".deploy-run", "20261123T110000-1")
    os.makedirs(run)
    with open(os.path.join(run, "plan.json"), "w") as handle:
        json.dump({"rows": [{"job": "api", "worker": "10.0.0.1", "action": "start", "reason": "new"},
                            {"job": "api", "worker": "10.0.0.2", "action": "start", "reason": "new"}]}, handle)
    with open(os.path.join(run, "state.json"), "w") as handle:
        json.dump({"done": [{"job": "api", "host": "10.0.0.1"}], "failed_by_job": {"api": ["x"]}}, handle)
    table = _cat.cat(built, _cat.Request("deployments"))
    got = [(r["worker"], r["last run"], r["action"], r["outcome"]) for r in table.as_dicts()]
    assert got == [("10.0.0.1", "20261123T110000-1", "start", "done"),
                   ("10.0.0.2", "20261123T110000-1", "start", "failed")]
    assert "kept because it failed or is still running" in table.notes[-1]


@pytest.mark.parametrize("request_, words", [
    (_cat.Request("kvv"), 'unknown view \'kvv\' (did you mean "kv"?)'),
    (_cat.Request("jobs", jobs=("apii",)), 'unknown job apii (did you mean "api"?); the jobs are: api'),
    (_cat.Request("kv", workers=("10.0.0.l",)), 'unknown worker 10.0.0.l (did you mean "10.0.0.'),
])
def test_unknown_names_get_did_you_mean(built, request_, words):
    with pytest.raises(_cat.CatError) as err:
        _cat.cat(built, request_)
    assert words in str(err.value)


def test_no_catalog_says_build_first(tmp_path):
    with pytest.raises(_cat.CatError, match="no data/catalog.json; build the bucket first"):
        _cat.cat(str(tmp_path), _cat.Request("jobs"))


def test_table_lines_align_and_values_are_cut():
    table = _cat.Table("T", ("A", "LONG HEADER"), [("x", "1"), ("yyyy", "2")], ["note"])
    assert table.lines() == ["T", "A     LONG HEADER", "----  -----------", "x     1", "yyyy  2", "note"]
    assert _cat.Table("T", ("A",)).lines()[-1] == "(none)"
    assert _cat.shown_value("maand/worker", "certs/ca.crt", "-----BEGIN\nabc", False) == "-----BEGIN ..."
    assert len(_cat.shown_value("vars/job/a", "k", "x" * 200, False)) == _cat.MAX_VALUE
    assert _cat.shown_value("secrets/job/a", "k", "v", False) == "***"
    assert _cat.split_names("a, b,,c") == ("a", "b", "c") and _cat.split_names(["a"]) == ("a",)
    assert _cat.split_names(None) == ()


def test_namespace_owner():
    assert _cat.namespace_owner("maand/job/api/worker/10.0.0.1") == ("api", "10.0.0.1")
    assert _cat.namespace_owner("maand/worker/10.0.0.1/tags") == (None, "10.0.0.1")
    assert _cat.namespace_owner("vars/bucket/job/api") == ("api", None)
    assert _cat.namespace_owner("secrets/job/api") == ("api", None)
    assert _cat.namespace_owner("maand/bucket") == (None, None)

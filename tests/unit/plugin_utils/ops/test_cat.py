"""maand.core.cat tables (_cat): views as maand's `maand cat` (maand-sh/maand cat/*.go columns),
filters with did-you-mean, secrets masked unless revealed, kv get, job_commands, deployments' rollout states
from the deploy records (maand cat deployments --active)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog, service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import record as _record, run as _run
from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.catalog.test_kv_build import bucket


@pytest.fixture()
def built(tmp_path):
    root = bucket(tmp_path)
    assert _service.build(root).written
    store = _store.KVStore.load(root)
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
    store = _store.KVStore.load(built)
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


def record(run_id, allocations, rollout, outcome="ok"):
    return _record.DeployRecord(run_id=run_id, bucket_id="b", outcome=outcome, started="s", finished="f",
                                seconds=1.0, user="u", controller="c", pid=1, allocations=allocations,
                                rollout=rollout)


def test_deployments_rollout_states_from_the_records(built):
    table = _cat.cat(built, _cat.Request("deployments"))
    assert [(r["worker"], r["rollout"], r["hash"], r["last_run"]) for r in table.as_dicts()] == [
        ("10.0.0.1", "new", "-", "-"), ("10.0.0.2", "new", "-", "-")]
    assert "no deploy record is kept yet" in table.notes[-1]
    R = _record
    first = R.carry_rollout({}, [R.Allocation("api", h, "start", "started", hash="a" * 64, from_version="-",
                                              to_version="1.2.0") for h in ("10.0.0.1", "10.0.0.2")], "20261123T110000-1", "t")
    R.write(built, record("20261123T110000-1", [], first))
    second = R.carry_rollout(first, [R.Allocation("api", "10.0.0.2", "restart", "gate failed", hash="b" * 64,
                                                  from_version="1.2.0", to_version="1.2.0")], "20261123T120000-1", "t")
    R.write(built, record("20261123T120000-1", [], second, outcome="failed"))
    got = [(r["worker"], r["rollout"], r["hash"], r["failed_hash"], r["current_version"], r["new_version"],
            r["last_run"], r["result"]) for r in rows(built, "deployments")]
    assert got == [("10.0.0.1", "promoted", "a" * 12, "-", "1.2.0", "1.2.0", "20261123T110000-1", "started"),
                   ("10.0.0.2", "health_failed", "a" * 12, "b" * 12, "1.2.0", "1.2.0", "20261123T120000-1",
                    "gate failed")]
    # build placed another version than the one promoted: restart (maand's version comparison)
    catalog = _catalog.read_catalog(built)
    catalog["jobs"][0]["version"] = "1.3.0"
    _catalog.write_catalog(built, catalog)
    assert [r["rollout"] for r in rows(built, "deployments")] == ["restart", "health_failed"]
    catalog["allocations"][0]["state"] = "disabled"
    _catalog.write_catalog(built, catalog)
    assert [r["rollout"] for r in rows(built, "deployments")] == ["disabled_restart", "health_failed"]
    catalog["allocations"][0]["state"] = "active"
    _catalog.write_catalog(built, catalog)
    # a run that has not finished (no record yet) plans a change: deploying
    run = os.path.join(built, "data", ".deploy-run", "20261123T130000-1")
    os.makedirs(run)
    with open(os.path.join(run, "plan.json"), "w") as handle:
        json.dump({"rows": [{"job": "api", "worker": "10.0.0.1", "action": "restart"},
                            {"job": "api", "worker": "10.0.0.2", "action": "skip"}]}, handle)
    table = _cat.cat(built, _cat.Request("deployments"))
    assert [r["rollout"] for r in table.as_dicts()] == ["deploying", "health_failed"]
    assert "run 20261123T130000-1 has not finished" in table.notes[-1]


def test_a_run_folder_cat_cannot_read_is_tolerated_by_cat_and_still_refused_by_the_deploy(built):
    run = os.path.join(_run.runs_root(built), "20261123T130000-1")
    os.makedirs(run)
    plan = {"rows": [{"job": "api", "worker": "10.0.0.1", "action": "restart"}]}
    with open(os.path.join(run, "plan.json"), "w") as handle:
        json.dump(plan, handle)
    with open(os.path.join(run, "state.json"), "w") as handle:
        handle.write('{"run_id": "20261123T1300')  # cut off mid-write
    assert _run.read_run(run) == (plan, None)
    table = _cat.cat(built, _cat.Request("deployments"))
    assert [r["rollout"] for r in table.as_dicts()] == ["deploying", "new"]
    assert "run 20261123T130000-1 has not finished" in table.notes[-1]
    with pytest.raises(_run.RunError, match="state.json: cannot read"):
        _run.load_state(run)
    # a plan.json that is JSON but not a plan: no rows to show, the deploy refuses it
    with open(os.path.join(run, "plan.json"), "w") as handle:
        json.dump([plan], handle)
    assert _run.read_run(run) == (None, None)
    assert [r["rollout"] for r in rows(built, "deployments")] == ["new", "new"]
    with pytest.raises(_run.RunError, match="plan.json is not a plan"):
        _run.load_plan(run)


def test_active_keeps_only_active_allocations_and_is_refused_elsewhere(built):
    catalog = _catalog.read_catalog(built)
    catalog["allocations"][1]["state"] = "disabled"
    _catalog.write_catalog(built, catalog)
    got = [(r["worker"], r["rollout"]) for r in rows(built, "deployments")]
    assert got == [("10.0.0.1", "new"), ("10.0.0.2", "disabled")]
    assert [r["worker"] for r in rows(built, "deployments", active=True)] == ["10.0.0.1"]
    assert [r["worker"] for r in rows(built, "allocations", active=True)] == ["10.0.0.1"]
    with pytest.raises(_cat.CatError, match="maand_active narrows the deployments and allocations views only"):
        _cat.cat(built, _cat.Request("kv", active=True))


def test_kv_get_one_key_in_full(built):
    store = _store.KVStore.load(built)
    store.put("vars/job/api", "long", "line one\nline two " + "x" * 200)
    store.save()
    table = _cat.cat(built, _cat.Request("kv", namespace="vars/job/api", key="long"))
    fields = dict(table.rows)
    assert fields["value"] == "line one\nline two " + "x" * 200 and fields["version"] == "1"
    assert (fields["namespace"], fields["key"]) == ("vars/job/api", "long")
    secret = dict(_cat.cat(built, _cat.Request("kv", namespace="secrets/job/api", key="db_password")).rows)
    assert secret["value"] == "***"
    revealed = dict(_cat.cat(built, _cat.Request("kv", namespace="secrets/job/api", key="db_password",
                                                 reveal=True)).rows)
    assert revealed["value"] == "hunter2-secret"
    store = _store.KVStore.load(built)
    store.delete("vars/job/api", "long")
    store.save()
    with pytest.raises(_cat.CatError, match="key long not found in vars/job/api \\(it was deleted\\); its keys are: "
                                            "service_name"):
        _cat.cat(built, _cat.Request("kv", namespace="vars/job/api", key="long"))
    with pytest.raises(_cat.CatError, match='key service_nam not found in vars/job/api \\(did you mean "service_name"'):
        _cat.cat(built, _cat.Request("kv", namespace="vars/job/api", key="service_nam"))
    with pytest.raises(_cat.CatError, match='no KV namespace vars/job/apii \\(did you mean "vars/job/api"'):
        _cat.cat(built, _cat.Request("kv", namespace="vars/job/apii", key="x"))


@pytest.mark.parametrize("request_, words", [
    (_cat.Request("kv", key="x"), "needs both maand_namespace and maand_key"),
    (_cat.Request("jobs", namespace="a", key="x"), "use them with maand_cat=kv"),
    (_cat.Request("kv", namespace="a", key="x", jobs=("api",)), "maand_key reads one key"),
])
def test_kv_get_options_are_refused_where_they_would_be_ignored(built, request_, words):
    with pytest.raises(_cat.CatError, match=words):
        _cat.cat(built, request_)


def test_job_commands_view(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": "10.0.0.1", "labels": ["worker"]}])
    job(root, "db", {"version": "1.0.0", "commands": {"command_ready": {"executed_on": ["cli"]}}},
        modules=["command_ready.py"])
    job(root, "api", {"version": "1.0.0", "commands": {"command_migrate": {
        "executed_on": ["pre_deploy", "cli"], "demands": {"job": "db", "command": "command_ready",
                                                          "config": {"min_version": "1.0.0"}}}}},
        modules=["command_migrate.py"])
    assert _service.build(root).report.ok
    assert [tuple(r.values()) for r in rows(root, "job_commands")] == [
        ("api", "command_migrate", "pre_deploy,cli", "db", "command_ready", '{"min_version": "1.0.0"}'),
        ("db", "command_ready", "cli", "-", "-", "-")]
    assert [r["job"] for r in rows(root, "job_commands", jobs=("db",))] == ["db"]


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

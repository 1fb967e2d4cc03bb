"""Taking over a bucket from maand (issue 13, item 3): data/maand.db built from maand's own schema SQL
(tests/data/maand/schema_v1.sql, taken from maand-sh/maand data/schema.go) is read by _maand_db and
the first build keeps maand's bucket_id, worker ids, KV (vars, secrets still decrypting with
secrets/kv.key, certificates) and deployed allocations; an unknown schema refuses, naming the file."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog, maand_db as _maand_db
from ansible_collections.maand.core.plugins.plugin_utils.certs import ca as _ca
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store, secrets as _secrets
from ansible_collections.maand.core.plugins.plugin_utils.placement import place as _place
from tests.maand_init import init_bucket, job, ws

SCHEMA = Path(__file__).resolve().parents[3] / "data" / "maand" / "schema_v1.sql"
BUCKET_ID = "5d0f1c7e-2b3a-4c5d-8e9f-0a1b2c3d4e5f"
HOSTS = ["10.0.0.1", "10.0.0.2"]
WORKER_IDS = {"10.0.0.1": "0b7c9a2e-1111-4a4a-9a9a-000000000001", "10.0.0.2": "0b7c9a2e-1111-4a4a-9a9a-000000000002"}


def make_db(root, schema_version=1, secret=None, certs=None, update_seq=7):
    """data/maand.db as maand leaves it after `maand build && maand deploy` of job api on HOSTS."""
    path = os.path.join(root, "data", "maand.db")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA.read_text())
    conn.execute("UPDATE schema_version SET version = ?", (schema_version,))
    conn.execute("INSERT INTO bucket VALUES (?, ?)", (BUCKET_ID, update_seq))
    for pos, host in enumerate(HOSTS):
        conn.execute("INSERT INTO worker (worker_id, worker_ip, available_memory_mb, available_cpu_mhz, position)"
                     " VALUES (?, ?, '0', '0', ?)", (WORKER_IDS[host], host, pos))
        alloc = _place.alloc_id("api", host)
        conn.execute("INSERT INTO allocations VALUES (?, ?, 'api', 0, 0, 0, '1.0.0')", (alloc, host))
        conn.execute("INSERT INTO hash (namespace, key, current_hash, previous_hash, current_version) VALUES"
                     " ('api_allocation', ?, 'md5hash', '', '1.0.0')", (alloc,))
        for key, value in (certs or {}).get(host, {}).items():
            conn.execute("INSERT INTO key_value VALUES (?, ?, ?, 1, '0', '', 0)",
                         (key, value, "maand/job/api/worker/%s" % host))
    rows = [("vars/job/api", "mode", "old", 1, 0), ("vars/job/api", "mode", "blue", 2, 0),
            ("vars/job/api", "gone", "x", 1, 0), ("vars/job/api", "gone", "", 2, 1),
            ("maand/bucket", "bucket_id", BUCKET_ID, 1, 0)]
    if secret is not None:
        rows.append(("secrets/job/api", "db_password", secret, 1, 0))
    for ns, key, value, version, deleted in rows:
        conn.execute("INSERT INTO key_value VALUES (?, ?, ?, ?, '0', '', ?)", (key, value, ns, version, deleted))
    conn.commit()
    conn.close()
    return path


def bucket(tmp_path, manifest=None):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in HOSTS])
    job(root, "api", manifest or {"version": "1.0.0", "selectors": ["worker"]})
    return root


def test_reader_keeps_latest_values_and_deployed(tmp_path):
    root = bucket(tmp_path)
    make_db(root)
    db = _maand_db.read(root)
    assert db.bucket_id == BUCKET_ID and db.update_seq == 7 and db.worker_ids == WORKER_IDS
    assert db.kv_values()["vars/job/api"] == {"mode": "blue"}  # latest version, tombstone dropped
    dep = db.deployed[("api", HOSTS[0])]
    assert dep.alloc_id == _place.alloc_id("api", HOSTS[0]) and dep.version == "1.0.0"


@pytest.mark.parametrize("folder", ["a?mode=rwc", "b#c", "d%3Fe", "f g"])
def test_a_bucket_path_with_uri_characters_opens_that_file_read_only(tmp_path, folder):
    root = bucket(tmp_path / folder)
    make_db(root)
    before = sorted(os.listdir(tmp_path))
    db = _maand_db.read(root)
    assert db.bucket_id == BUCKET_ID
    assert sorted(os.listdir(tmp_path)) == before   # no other file created beside the bucket


def test_first_build_takes_over(tmp_path):
    root = bucket(tmp_path)
    key = _secrets.load_key(root, create=True)  # maand's secrets/kv.key
    make_db(root, secret=_secrets.encrypt(key, "s3cret"))
    result = _service.build(root)
    assert result.report.ok, result.report.error_text()
    assert any("taking the bucket over from maand" in str(w) for w in result.report.warnings)
    catalog = _catalog.read_catalog(root)
    assert catalog["bucket_id"] == BUCKET_ID
    assert {w["host"]: w["worker_id"] for w in catalog["workers"]} == WORKER_IDS
    store = _store.KVStore.load(root)
    assert store.get("secrets/job/api", "db_password", reveal_secrets=True) == "s3cret"
    assert store.get("vars/job/api", "mode") == "blue"
    assert store.get("maand/worker/%s" % HOSTS[0], "worker_id") == WORKER_IDS[HOSTS[0]]
    again = _service.build(root)  # the catalog exists now: maand.db is no longer read (a warning says so)
    assert _catalog.read_catalog(root)["bucket_id"] == BUCKET_ID
    assert any(w.file == "data/maand.db" and "not read" in str(w) for w in again.report.warnings)


def test_maands_certs_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(_ca, "KEY_SIZE", 1024)
    root = bucket(tmp_path, {"version": "1.0.0", "selectors": ["worker"],
                             "certs": {"tls": {"subject": {"common_name": "api"}}}})
    ca = _certs.load_or_create_ca(root, BUCKET_ID, key_size=1024)  # maand init made it
    leaves = {h: _certs.issue_leaf(ca, "api", [h], 60, False, key_size=1024) for h in HOSTS}
    make_db(root, certs={h: {"certs/tls.crt": leaf.cert_pem.strip(), "certs/tls.key": leaf.key_pem.strip()}
                         for h, leaf in leaves.items()})
    result = _service.build(root)
    assert result.report.ok, result.report.error_text()
    assert not any("issued" in line for line in result.changes), result.changes
    store = _store.KVStore.load(root)
    for host in HOSTS:
        assert store.get("maand/job/api/worker/%s" % host, "certs/tls.key") == leaves[host].key_pem.strip()


@pytest.mark.parametrize("version,words", [(0, "Upgrade it first: run `maand init`"),
                                           (2, "written by a newer maand")])
def test_unknown_schema_refused_nothing_written(tmp_path, version, words):
    root = bucket(tmp_path)
    path = make_db(root, schema_version=version)
    before = Path(path).read_bytes()
    result = _service.build(root)
    assert not result.report.ok and not result.written
    text = result.report.error_text()
    assert "data/maand.db has maand schema version %d" % version in text and words in text
    assert _catalog.read_catalog(root) is None and not _store.KVStore.exists(root)
    assert Path(path).read_bytes() == before


def test_not_sqlite_refused(tmp_path):
    root = bucket(tmp_path)
    os.makedirs(os.path.join(root, "data"))
    Path(root, "data", "maand.db").write_text("not a database")
    result = _service.build(root)
    assert "data/maand.db is not a readable SQLite database" in result.report.error_text()
    assert _catalog.read_catalog(root) is None


def test_missing_column_refused(tmp_path):
    root = bucket(tmp_path)
    path = make_db(root)
    conn = sqlite3.connect(path)
    conn.execute("DROP VIEW cat_deployments")
    conn.execute("ALTER TABLE hash DROP COLUMN current_version")
    conn.commit()
    conn.close()
    with pytest.raises(_maand_db.MaandDBError, match="table hash has no column current_version"):
        _maand_db.read(root)


def test_schema_fixture_is_maands(tmp_path):
    """The fixture really is maand's DDL: every table and view maand's CheckSchemaVersion requires."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA.read_text())
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"bucket", "worker", "allocations", "job", "job_certs", "key_value", "hash", "schema_version",
            "cat_allocations", "cat_jobs", "cat_kv", "cat_workers", "cat_deployments"} <= names
    assert json.dumps(sorted(r[1] for r in conn.execute("PRAGMA table_info(hash)"))) == json.dumps(sorted(
        ["namespace", "key", "current_hash", "previous_hash", "current_files", "previous_files", "current_version"]))


def test_adopted_versions_for_the_deploy_plan(tmp_path):
    root = bucket(tmp_path)
    make_db(root)
    adopted, warning = _maand_db.adopted_versions(root, BUCKET_ID)
    assert adopted == {("api", h): "1.0.0" for h in HOSTS} and warning == ""
    assert _maand_db.adopted_versions(root, "00000000-0000-4000-8000-000000000000") == ({}, "")  # other bucket
    Path(root, "data", "maand.db").write_text("garbage")
    adopted, warning = _maand_db.adopted_versions(root, BUCKET_ID)
    assert adopted == {} and "not adopted" in warning and "data/maand.db" in warning


def test_takeover_carries_maands_update_seq_into_the_next_deploy(tmp_path):
    """maand.db's bucket.update_seq (7) is kept in the catalog by every build: the first maand.core deploy's
    update_seq is above it even where the workers report less (issue 13, item 3)."""
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
    from tests.unit.plugin_utils.deploy.test_deploy_plan import catalog as plan_catalog, content, job as plan_job, states

    root = bucket(tmp_path)
    make_db(root, update_seq=7)
    assert _service.build(root).report.ok
    catalog = _catalog.read_catalog(root)
    assert catalog["update_seq_floor"] == 7
    ws(root, "workers.json", [{"host": h, "labels": ["worker"], "hostname": "w"} for h in HOSTS])
    assert _service.build(root).changed and _catalog.read_catalog(root)["update_seq_floor"] == 7  # carried
    reported = {h: {"worker": {"update_seq": 3}} for h in HOSTS}
    assert _plan.seen_update_seq(reported) == 3 and _plan.seen_update_seq(reported, catalog) == 7
    assert _plan.seen_update_seq({h: {"worker": {"update_seq": 9}} for h in HOSTS}, catalog) == 9
    cat = plan_catalog([plan_job("api")], [("api", h, "active") for h in ("h1", "h2")])
    cat["update_seq_floor"] = 7
    plan = _plan.compute_plan(cat, content("api"), states(["h1", "h2"]), ["h1", "h2"])
    assert (plan["previous_update_seq"], plan["update_seq"]) == (7, 8)
    fresh = init_bucket(tmp_path / "fresh")
    assert _service.build(fresh).report.ok and "update_seq_floor" not in _catalog.read_catalog(fresh)

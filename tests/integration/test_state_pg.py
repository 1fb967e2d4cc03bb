"""The PostgreSQL state store on a real server (tests/fleet/pg.py: initdb + pg_ctl from Debian's
packages): documents with generations, the refused stale write, the KV document with its secrets
sealed, the bucket lock across sessions, the deploy lock held by its holder process (refused or
waited for, freed when the run or the holder dies), the schema version, and moving a bucket's state
into the store and back (maand.core.state)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import state_pg, storage
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store

pytestmark = [pytest.mark.slow]

BUCKET_ID = "0f2736e5-c303-4a3d-ad5b-4a78b488dbc0"


def catalog_doc(workers=("10.0.0.1",)):
    return {"format": 1, "bucket_id": BUCKET_ID, "job_config_selector": "", "job_config_file": "bucket.jobs.conf",
            "bucket_vars": {}, "port_min": 30000, "port_max": 39999, "jobs": [], "allocations": [],
            "workers": [{"host": h, "labels": ["worker"], "memory_mb": 0, "cpu_mhz": 0, "zone": "",
                         "position": i, "tags": {}} for i, h in enumerate(workers)]}


@pytest.fixture(scope="module")
def url(pg_server):
    return pg_server.database()


@pytest.fixture()
def bucket(tmp_path, url, pg_server, monkeypatch):
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(storage.URL_ENV, url)
    (tmp_path / "maand.conf").write_text('ssh_user = "agent"\n')
    return str(tmp_path)


def sql(pg_server, url, statement):
    return pg_server.psql(statement, db=url.rsplit("/", 1)[1])


def fresh(url):
    """A store object of another process (its own session and read generations)."""
    return state_pg.PgStore(url)


def test_the_store_is_chosen_by_the_environment_and_nothing_lands_in_data(bucket, url):
    assert storage.store(bucket).kind == "postgresql"
    _catalog.write_catalog(bucket, catalog_doc())
    assert _catalog.read_catalog(bucket)["bucket_id"] == BUCKET_ID
    assert _catalog.recorded_bucket_id(bucket) == BUCKET_ID
    assert not os.path.exists(os.path.join(bucket, "data", "catalog.json"))
    assert not os.path.exists(os.path.join(bucket, "data", "bucket_id"))


def test_a_write_is_refused_when_another_writer_moved_the_catalog_since_the_read(bucket, url):
    _catalog.write_catalog(bucket, catalog_doc())
    assert _catalog.read_catalog(bucket) is not None  # this process read generation N
    other = fresh(url)
    other.read("catalog")
    other.write("catalog", _catalog.dumps(catalog_doc(("10.0.0.2",))), expect=other.seen["catalog"])
    moved = other.seen["catalog"]
    with pytest.raises(storage.StaleState) as info:
        _catalog.write_catalog(bucket, catalog_doc(("10.0.0.3",)))
    message = str(info.value)
    assert "update_seq %d" % moved in message and "written at " in message and "moved since this run read it" in message
    assert "maand-test-password" not in message
    assert [w["host"] for w in _catalog.read_catalog(bucket)["workers"]] == ["10.0.0.2"]  # the other write stands
    _catalog.write_catalog(bucket, catalog_doc(("10.0.0.3",)))  # after a fresh read it goes through
    assert [w["host"] for w in _catalog.read_catalog(bucket)["workers"]] == ["10.0.0.3"]


def test_gc_drops_a_cleaned_departed_row_from_the_store(bucket, url):
    """The catalog's departed list (issue 23 item 4) round-trips through the store, and gc's commit (a
    read-modify-write under the store's bucket lock) drops the row of the worker it cleaned."""
    from ansible_collections.maand.core.plugins.plugin_utils.ops import gc as _gc
    doc = dict(catalog_doc(), departed=[{"host": "10.0.0.9", "hostname": None}, {"host": "10.0.0.8", "hostname": "n8"}])
    _catalog.write_catalog(bucket, doc)
    assert _catalog.read_catalog(bucket)["departed"] == doc["departed"]
    states = {h: {"state": {"reachable": True, "exists": True, "trees": []}} for h in ("10.0.0.1", "10.0.0.9")}
    planned = _gc.plan_bucket(bucket, states, sorted(states), time.time(), 0)
    assert planned.trees() == ["10.0.0.9"]
    done = _gc.commit(bucket, planned, states, {"10.0.0.9": {"results": [{"job": "", "ok": True}]}}, sorted(states))
    assert not done.problems and done.changed
    assert fresh(url).read("catalog") is not None
    assert _catalog.read_catalog(bucket)["departed"] == [{"host": "10.0.0.8", "hostname": "n8"}]
    assert not os.path.exists(os.path.join(bucket, "data", "catalog.json"))


def test_the_kv_document_keeps_history_and_secrets_stay_sealed_with_the_local_key(bucket, url, pg_server):
    with _store.KVStore.edit(bucket) as kv:
        kv.put("vars/job/api", "color", "blue")
        kv.put("secrets/job/api", "token", "s3cret-value")
    with _store.KVStore.edit(bucket) as kv:
        kv.put("vars/job/api", "color", "green")
    kv = _store.KVStore.load(bucket)
    assert kv.get("vars/job/api", "color") == "green"
    assert [r.value for r in kv.history("vars/job/api", "color")] == ["blue", "green"]
    assert kv.get("secrets/job/api", "token", reveal_secrets=True) == "s3cret-value"
    body = sql(pg_server, url, "SELECT body FROM maand_documents WHERE name = 'kv'")
    assert "s3cret-value" not in body and "secrets/job/api" in body
    key = open(os.path.join(bucket, "secrets", "kv.key"), "rb").read()
    assert key.hex() not in sql(pg_server, url, "SELECT string_agg(body, '') FROM maand_documents")
    assert not os.path.exists(os.path.join(bucket, "data", "kv.json"))


def test_a_stale_kv_save_is_refused(bucket, url):
    kv = _store.KVStore.load(bucket)
    with _store.KVStore.edit(bucket) as other:
        other.put("vars/job/api", "size", "1")
    kv.put("vars/job/api", "size", "2")
    with pytest.raises(storage.StaleState):
        kv.save()
    assert _store.KVStore.load(bucket).get("vars/job/api", "size") == "1"


def test_the_bucket_lock_is_shared_by_every_session(bucket, url):
    other = fresh(url)
    with _locks.bucket_lock(bucket):
        with pytest.raises(state_pg.StateLocked) as info:
            with other.shared_lock(wait=False):
                pass
        assert "holds the bucket lock" in str(info.value) and "maand.core" in str(info.value)
    with other.shared_lock(wait=False):  # free again
        with pytest.raises(_locks.LockBusy):
            with _locks.bucket_lock(bucket):
                pass


def _sleeper():
    return subprocess.Popen(["sleep", "120"])  # pylint: disable=consider-using-with


def _gone(proc):
    proc.kill()
    proc.wait()


def _wait_free(bucket, timeout=30):
    end = time.monotonic() + timeout
    while _locks.holder(bucket) is not None:
        assert time.monotonic() < end, _locks.holder(bucket)
        time.sleep(0.2)


def test_the_deploy_lock_refuses_a_second_run_naming_the_holder_and_is_freed_when_the_run_dies(bucket, url):
    first, second = _sleeper(), _sleeper()
    try:
        taken, note = _locks.acquire(bucket, first.pid)
        assert taken and "deploy lock taken" in note, note
        assert _locks.acquire(bucket, first.pid) == (False, "deploy lock already held by this run")
        with pytest.raises(_locks.DeployLocked) as info:
            _locks.acquire(bucket, second.pid)
        assert "ansible-playbook pid %d" % first.pid in str(info.value), info.value
        assert "maand_lock_wait" in str(info.value)
        with pytest.raises(_locks.DeployLocked):
            _locks.acquire(bucket, second.pid, check_only=True)
        _gone(first)  # the controller dies: its holder notices and the session ends
        _wait_free(bucket)
        taken, note = _locks.acquire(bucket, second.pid)
        assert taken and "stale" not in note, note  # the holder removed its row on the way out
        assert _locks.release(bucket, second.pid) is True
        assert _locks.holder(bucket) is None
    finally:
        _gone(first)
        _gone(second)


def test_a_writing_build_refuses_while_a_deploy_holds_the_store_and_a_deploy_waits_for_a_build(
        tmp_path, pg_server, monkeypatch):
    """Security review 4, N10: a build on one controller never interleaves with a deploy on another: while a
    deploy's holder has the store's deploy lock a writing build refuses naming it (a --check build reads on);
    while a build holds it a deploy refuses (or waits); after the deploy the build writes."""
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
    from tests.bucket_factory import make_bucket
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    url = pg_server.database()  # its own: the build writes a catalog
    monkeypatch.setenv(storage.URL_ENV, url)
    make_bucket(tmp_path, [{"host": "10.0.0.1", "labels": ["worker"]}], {})
    bucket = str(tmp_path)
    deploy, other = _sleeper(), _sleeper()
    try:
        assert _locks.acquire(bucket, deploy.pid)[0]
        with pytest.raises(_locks.DeployInProgress) as info:
            _service.build(bucket)
        message = str(info.value)
        assert "a deploy of this bucket is running" in message and "ansible-playbook pid %d" % deploy.pid in message
        assert "wait for the deploy to finish" in message and "maand-test-password" not in message
        assert fresh(url).read("catalog") is None  # nothing was written
        assert _service.build(bucket, check_mode=True).report.ok
        assert _locks.release(bucket, deploy.pid)
        _wait_free(bucket)
        with storage.store(bucket).deploy_lock_for_build():  # a build in progress: a deploy does not start beside it
            with pytest.raises(_locks.DeployLocked, match="a build or a starting deploy"):
                _locks.acquire(bucket, other.pid)
        result = _service.build(bucket)
        assert result.report.ok and result.written
        assert fresh(url).read("catalog") is not None
        assert _locks.acquire(bucket, other.pid)[0]  # the build let the lock go
        assert _locks.release(bucket, other.pid)
    finally:
        _gone(deploy)
        _gone(other)


def test_a_killed_holder_frees_the_lock_and_the_next_run_says_it_took_over(bucket, url):
    first, second = _sleeper(), _sleeper()
    try:
        _locks.acquire(bucket, first.pid)
        holder_pid = _locks.holder(bucket)["holder_pid"]
        os.kill(holder_pid, signal.SIGKILL)  # no clean-up at all: only PostgreSQL ending the session frees it
        _wait_free(bucket)
        taken, note = _locks.acquire(bucket, second.pid)
        assert taken and "took over a stale deploy lock" in note and "pid %d" % first.pid in note, note
        _locks.release(bucket, second.pid)
    finally:
        _gone(first)
        _gone(second)


@pytest.mark.parametrize("holder", ["init", "sleeper"])
def test_a_stale_lock_row_naming_this_run_is_not_the_lock(bucket, url, pg_server, holder):
    """Security review 4, N6: a row naming this host and run with some live process as its holder (SIGKILL, a
    reboot, reused pids) while no session holds the advisory lock: the run takes the lock instead of deploying
    unlocked, and a second controller then finds it held."""
    import socket  # pylint: disable=import-outside-toplevel
    run, other, fake = _sleeper(), _sleeper(), _sleeper()
    try:
        _locks.acquire(bucket, run.pid)  # makes the tables; then a stale row replaces the real one
        _locks.release(bucket, run.pid)
        _wait_free(bucket)
        holder_pid = 1 if holder == "init" else fake.pid
        sql(pg_server, url, "INSERT INTO maand_deploy_lock (id, host, run_pid, run_start, holder_pid, owner) VALUES "
            "(1, '%s', %d, %d, %d, 'stale')" % (socket.gethostname(), run.pid, _locks.process_start(run.pid),
                                                holder_pid))
        assert fresh(url).deploy_holder() is None  # no session holds the advisory lock
        taken, note = _locks.acquire(bucket, run.pid)
        assert taken and "took over a stale deploy lock" in note, note
        assert _locks.acquire(bucket, run.pid) == (False, "deploy lock already held by this run")  # now truly
        with pytest.raises(_locks.DeployLocked):
            _locks.acquire(bucket, other.pid)
        assert _locks.release(bucket, run.pid) is True
    finally:
        for proc in (run, other, fake):
            _gone(proc)


def test_a_second_deploy_waits_for_the_lock_with_maand_lock_wait(bucket, url):
    first, second = _sleeper(), _sleeper()
    try:
        _locks.acquire(bucket, first.pid)
        releaser = subprocess.Popen(["sh", "-c", "sleep 2; kill %d" % first.pid])  # pylint: disable=consider-using-with
        started = time.monotonic()
        taken, note = _locks.acquire(bucket, second.pid, wait=60)
        assert taken, note
        assert time.monotonic() - started >= 1.5  # it did wait for the first run to end
        releaser.wait()
        _locks.release(bucket, second.pid)
    finally:
        _gone(first)
        _gone(second)


def test_run_records_are_kept_in_the_store(bucket, url):
    from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat  # pylint: disable=import-outside-toplevel

    store = storage.store(bucket)
    plan = {"rows": [{"job": "api", "worker": "10.0.0.1", "action": "start"}], "steps": []}
    store.write_run("20260101T000000-1", json.dumps(plan), json.dumps({"done": [{"job": "api", "host": "10.0.0.1"}]}))
    record = _cat.last_run(bucket)
    assert record.run_id == "20260101T000000-1"
    assert record.outcome == {("api", "10.0.0.1"): "done"}


def test_deploy_records_are_kept_in_the_store_bounded_with_the_run_records(pg_server, monkeypatch):
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    url = pg_server.database()  # its own: the trimming below would drop other tests' run records
    store = fresh(url)
    for i in range(5):
        run_id = "2026010%dT000000-1" % i
        store.write_run(run_id, "{}", "{}")
        store.write_record(run_id, json.dumps({"i": i}), 3)
    assert [json.loads(text)["i"] for dummy, text in fresh(url).records()] == [2, 3, 4]
    assert [r for r, dummy in fresh(url).records(limit=1)] == ["20260104T000000-1"]
    assert [r[0] for r in fresh(url).runs()] == ["20260102T000000-1", "20260103T000000-1", "20260104T000000-1"]


def test_a_store_of_schema_1_gets_the_deploy_records_table(pg_server, monkeypatch):
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    url = pg_server.database()
    fresh(url).read("catalog")
    sql(pg_server, url, "DROP TABLE maand_deploy_records; UPDATE maand_schema SET version = 1")
    store = fresh(url)
    store.write_record("20260101T000000-1", "{}", 3)
    assert store.records() == [("20260101T000000-1", "{}")]
    assert sql(pg_server, url, "SELECT version FROM maand_schema") == str(state_pg.SCHEMA_VERSION)


def test_a_newer_schema_is_refused_and_a_wrong_password_is_never_printed(bucket, url, pg_server, monkeypatch):
    sql(pg_server, url, "UPDATE maand_schema SET version = %d" % (state_pg.SCHEMA_VERSION + 1))
    try:
        with pytest.raises(state_pg.StateStoreError) as info:
            fresh(url).read("catalog")
        assert "newer than this maand.core's" in str(info.value)
    finally:
        sql(pg_server, url, "UPDATE maand_schema SET version = %d" % state_pg.SCHEMA_VERSION)
    monkeypatch.setenv("PGPASSWORD", "wrong-password-xyz")
    with pytest.raises(state_pg.StateStoreError) as info:
        fresh(url).read("catalog")
    assert "cannot connect to the state store" in str(info.value) and "wrong-password-xyz" not in str(info.value)
    with_password = url.replace("maand@", "maand:inline-pass-xyz@")
    with pytest.raises(state_pg.StateStoreError) as info:
        fresh(with_password.replace("/maand_", "/nodb_")).read("catalog")
    assert "inline-pass-xyz" not in str(info.value)


def test_a_table_pre_created_by_another_role_refuses_the_store_naming_its_owner(pg_server, monkeypatch):
    """Security review 4, N9: a role that can create in the shared schema pre-creates maand_documents (to read the
    state or steer it); the store refuses, naming the table, its owner and the fix, and writes nothing."""
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    url = pg_server.database()
    db = url.rsplit("/", 1)[1]
    pg_server.psql("DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'intruder') THEN "
                   "CREATE ROLE intruder; END IF; END$$")
    pg_server.psql("CREATE TABLE maand_documents (name text PRIMARY KEY, body text NOT NULL, generation bigint NOT NULL, "
                   "written_at timestamptz NOT NULL DEFAULT now(), written_by text NOT NULL DEFAULT '', "
                   "source text NOT NULL DEFAULT ''); ALTER TABLE maand_documents OWNER TO intruder; "
                   "GRANT ALL ON maand_documents TO PUBLIC", db=db)
    with pytest.raises(state_pg.StateStoreError) as info:
        fresh(url).read("catalog")
    message = str(info.value)
    assert "table public.maand_documents is owned by role intruder, not by maand" in message
    assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC" in message and "dedicated database or schema" in message
    assert "maand-test-password" not in message
    assert pg_server.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'maand_%' AND tableowner = 'maand'",
                          db=db) == "0"  # the migration was rolled back: nothing of maand's was created
    with pytest.raises(state_pg.StateStoreError, match="owned by role intruder"):  # the holder refuses as well
        state_pg.PgStore(url).lock_deploy(os.getpid(), None)
    # once the table is the store role's, the store works (the fix for a table that is in fact one's own)
    pg_server.psql("ALTER TABLE maand_documents OWNER TO maand", db=db)
    store = fresh(url)
    store.write("catalog", "{}")
    assert fresh(url).read("catalog").text == "{}"


def test_the_search_path_is_pinned_to_the_schema_maand_creates_in(bucket, url):
    conn = fresh(url).conn()
    assert conn.execute("SHOW search_path").fetchone()[0] == "public, pg_temp"
    assert conn.execute("SELECT current_schema()").fetchone()[0] == "public"


def _state_playbook(bucket, to, env, *extra):
    full = dict(os.environ, **env)
    full.pop(storage.URL_ENV, None)
    full.update({k: v for k, v in env.items() if v is not None})
    cmd = ["ansible-playbook", "maand.core.state", "-e", "maand_bucket=%s" % bucket, "-e", "maand_state_to=%s" % to,
           *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=full)
    return done.returncode, " ".join((done.stdout + done.stderr).split())  # the YAML callback wraps lines


def _file_bucket(path):
    path.mkdir()
    (path / "maand.conf").write_text('ssh_user = "agent"\n')
    bucket = str(path)
    _catalog.write_catalog(bucket, catalog_doc(("10.0.0.7", "10.0.0.8")))
    with _store.KVStore.edit(bucket) as kv:
        kv.put("vars/job/api", "color", "blue")
        kv.put("secrets/job/api", "token", "moved-secret")
    storage.FileStore(bucket).write_record("20260101T000000-1", json.dumps({"moved": "record"}))
    return bucket


def test_moving_state_into_the_store_and_back_to_files(tmp_path, pg_server, monkeypatch):
    monkeypatch.delenv(storage.URL_ENV, raising=False)
    source = _file_bucket(tmp_path / "source")
    before = {name: open(os.path.join(source, "data", name)).read() for name in ("catalog.json", "kv.json", "bucket_id")}
    url = pg_server.database()
    rc, out = _state_playbook(source, url, pg_server.env)
    assert rc == 0, out
    assert "copied bucket_id, catalog, kv from %s/data to %s" % (source, url) in out, out
    assert "maand-test-password" not in out
    rc, out = _state_playbook(source, url, pg_server.env)  # the store holds a catalog now: refused
    assert rc != 0 and "already holds a catalog (bucket_id %s)" % BUCKET_ID in out, out

    # another controller: only maand.conf, the URL and the key
    other = tmp_path / "other"
    other.mkdir()
    (other / "maand.conf").write_text('ssh_user = "agent"\n')
    (other / "secrets").mkdir()
    (other / "secrets" / "kv.key").write_bytes(open(os.path.join(source, "secrets", "kv.key"), "rb").read())
    (other / "secrets" / "kv.key").chmod(0o600)  # a key others may read is refused
    monkeypatch.setenv(storage.URL_ENV, url)
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)
    assert [w["host"] for w in _catalog.read_catalog(str(other))["workers"]] == ["10.0.0.7", "10.0.0.8"]
    assert _store.KVStore.load(str(other)).get("secrets/job/api", "token", reveal_secrets=True) == "moved-secret"
    assert storage.store(str(other)).records() == [("20260101T000000-1", json.dumps({"moved": "record"}))]

    rc, out = _state_playbook(str(other), "files", dict(pg_server.env, **{storage.URL_ENV: url}))
    assert rc == 0, out
    after = {name: (other / "data" / name).read_text() for name in ("catalog.json", "kv.json", "bucket_id")}
    assert after == before
    assert oct((other / "data" / "kv.json").stat().st_mode & 0o777) == "0o600"
    assert json.loads((other / "data" / "deploys" / "20260101T000000-1.json").read_text()) == {"moved": "record"}


def test_a_move_with_an_invalid_document_writes_nothing(tmp_path, pg_server, monkeypatch):
    monkeypatch.delenv(storage.URL_ENV, raising=False)
    source = _file_bucket(tmp_path / "source")
    with open(os.path.join(source, "data", "kv.json"), "w") as handle:
        handle.write('{"format": 2, "namespaces": {"vars/job/api": {"color": {"version": "x"}}}}')
    url = pg_server.database()
    rc, out = _state_playbook(source, url, pg_server.env)
    assert rc != 0 and "the source KV document is not valid" in out, out
    if sql(pg_server, url, "SELECT to_regclass('maand_documents') IS NOT NULL") == "t":
        assert sql(pg_server, url, "SELECT count(*) FROM maand_documents") == "0"

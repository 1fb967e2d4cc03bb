"""The board of a sliced run (deploy/slices.py) on a real PostgreSQL server (tests/fleet/pg.py): entries by run key
(the table maand_board, schema version 3), the member tokens (a session advisory lock a holder process keeps while
the slice's run lives), and the sliced protocol itself (planner and hands in threads, tests/unit/.../test_slices.py)
over the PostgreSQL store instead of a bucket folder."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import bucket as _bucket_door
from ansible_collections.maand.core.plugins.plugin_utils.bucket import state_pg, storage
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _build
from ansible_collections.maand.core.plugins.plugin_utils.deploy import slices as SL
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.deploy.test_slices import HOSTS, MAKEFILE, Run, check_run

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def url(pg_server):
    return pg_server.database()


@pytest.fixture(autouse=True)
def pg_env(pg_server, monkeypatch):
    """libpq's password for every session (the member holders inherit it)."""
    for key, value in pg_server.env.items():
        monkeypatch.setenv(key, value)


def wait_for(check, timeout=20):
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "not within %ss" % timeout
        time.sleep(0.1)


def test_entries_by_run_key(url, pg_server):
    store = state_pg.PgStore(url)
    store.board_put("awx-workflow-1", "run", '{"phase": "planning"}')
    store.board_put("awx-workflow-1", "run", '{"phase": "running"}')  # one row per name: the last write
    store.board_put("awx-workflow-1", "member/awx-job-2", "{}")
    store.board_put("awx-workflow-2", "member/awx-job-9", "{}")
    other = state_pg.PgStore(url)  # another controller's session
    assert other.board_get("awx-workflow-1", "run") == '{"phase": "running"}'
    assert other.board_get("awx-workflow-1", "nothing") is None
    assert other.board_items("awx-workflow-1", "member/") == {"member/awx-job-2": "{}"}
    assert other.board_keys()[-2:] == ["awx-workflow-1", "awx-workflow-2"]
    other.board_drop("awx-workflow-1")
    assert store.board_items("awx-workflow-1") == {} and store.board_get("awx-workflow-2", "member/awx-job-9") == "{}"
    assert pg_server.psql("SELECT version FROM maand_schema", db=url.rsplit("/", 1)[1]) == str(state_pg.SCHEMA_VERSION)
    for key, name in (("bad key", "x"), ("", "x"), ("k" * 101, "x"), ("ok", "a\0b"), ("ok", "")):
        with pytest.raises(state_pg.StateStoreError, match="run key|board entry"):
            store.board_put(key, name, "{}")


def test_a_member_token_lives_with_its_run_and_is_refused_twice(url):
    run = subprocess.Popen(["sleep", "120"])  # pylint: disable=consider-using-with  # the slice's ansible-playbook
    store, other = state_pg.PgStore(url), state_pg.PgStore(url)
    try:
        assert other.board_alive("k-token", "awx-job-1") is False  # never joined
        store.board_join("k-token", "awx-job-1", run.pid)
        assert other.board_alive("k-token", "awx-job-1") is True
        with pytest.raises(state_pg.StateStoreError, match="already alive"):
            other.board_join("k-token", "awx-job-1", os.getpid())
        store.board_leave("k-token", "awx-job-1", run.pid)
        wait_for(lambda: other.board_alive("k-token", "awx-job-1") is False)
        store.board_join("k-token", "awx-job-1", run.pid)  # joined again (a relaunched slice of the same name)
        assert other.board_alive("k-token", "awx-job-1") is True
    finally:
        run.kill()
        run.wait()
    wait_for(lambda: other.board_alive("k-token", "awx-job-1") is False)  # its run died: the holder let go


@pytest.fixture
def pg_bucket(tmp_path, pg_server, monkeypatch):
    """test_slices' bucket (db in batches of 2, web of 1, on six workers) built into the PostgreSQL store."""
    monkeypatch.setenv(storage.URL_ENV, pg_server.database())  # a database of its own: no catalog before it
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    root = init_bucket(tmp_path / "planner")
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in HOSTS])
    job(root, "db", {"version": "1.0.0", "selectors": ["worker"], "max_concurrent_upgrades": 2}, makefile=MAKEFILE)
    job(root, "web", {"version": "1.0.0", "selectors": ["worker"], "max_concurrent_upgrades": 1}, makefile=MAKEFILE)
    assert _build.build(root).report.ok
    assert not os.path.exists(os.path.join(root, "data", "catalog.json"))  # in the store, not the folder
    return root


@pytest.mark.parametrize("n", [2, 3])
def test_the_sliced_protocol_over_postgresql(pg_bucket, n):
    assert _bucket_door.store(pg_bucket) is storage.store(pg_bucket)  # no earlier test left its store in the door
    run = Run(pg_bucket, n, key="pg-run-%d" % n)
    run.go()
    check_run(run)
    assert SL.Board(storage.store(pg_bucket), "pg-run-%d" % n).get("run")["phase"] == "ended"

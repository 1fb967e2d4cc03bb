"""Unit tests for the deploy lock (data/deploy.lock): refuse while live, take over when stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import lock as L


def test_acquire_release_and_refuse_while_owner_lives(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        taken, dummy = L.acquire(str(tmp_path), sleeper.pid)
        assert taken and L.holder(str(tmp_path))["pid"] == sleeper.pid
        # the same run re-acquiring is a no-op
        assert L.acquire(str(tmp_path), sleeper.pid)[0] is False
        with pytest.raises(L.DeployLocked, match="another deploy holds data/deploy.lock .*pid %d" % sleeper.pid):
            L.acquire(str(tmp_path), os.getpid())
        with pytest.raises(L.DeployLocked):
            L.acquire(str(tmp_path), os.getpid(), check_only=True)
        assert L.release(str(tmp_path), os.getpid()) is False  # not the owner: untouched
        assert L.release(str(tmp_path), sleeper.pid) is True
        assert L.read_lock(str(tmp_path)) is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stale_lock_of_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert L.acquire(str(tmp_path), dead.pid)[0]
    taken, note = L.acquire(str(tmp_path), os.getpid())
    assert taken and "stale" in note
    assert L.holder(str(tmp_path))["pid"] == os.getpid()


def test_recycled_pid_is_not_mistaken_for_the_owner(tmp_path):
    (tmp_path / "data").mkdir()
    import socket
    (tmp_path / "data" / "deploy.lock").write_text(json.dumps(
        {"pid": os.getpid(), "start": (L.process_start(os.getpid()) or 0) + 12345, "host": socket.gethostname()}))
    assert L.holder(str(tmp_path)) is None


def test_check_only_writes_nothing(tmp_path):
    assert L.acquire(str(tmp_path), os.getpid(), check_only=True)[0] is False
    assert not (tmp_path / "data" / "deploy.lock").exists()

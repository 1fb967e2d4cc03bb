"""Unit tests for the deploy lock (data/deploy.lock): refuse while live, take over when stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks


def test_acquire_release_and_refuse_while_owner_lives(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        taken, dummy = _locks.acquire(str(tmp_path), sleeper.pid)
        assert taken and _locks.holder(str(tmp_path))["pid"] == sleeper.pid
        # the same run re-acquiring is a no-op
        assert _locks.acquire(str(tmp_path), sleeper.pid)[0] is False
        with pytest.raises(_locks.DeployLocked, match="another deploy holds data/deploy.lock .*pid %d" % sleeper.pid):
            _locks.acquire(str(tmp_path), os.getpid())
        with pytest.raises(_locks.DeployLocked):
            _locks.acquire(str(tmp_path), os.getpid(), check_only=True)
        assert _locks.release(str(tmp_path), os.getpid()) is False  # not the owner: untouched
        assert _locks.release(str(tmp_path), sleeper.pid) is True
        assert _locks.read_lock(str(tmp_path)) is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stale_lock_of_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert _locks.acquire(str(tmp_path), dead.pid)[0]
    taken, note = _locks.acquire(str(tmp_path), os.getpid())
    assert taken and "stale" in note
    assert _locks.holder(str(tmp_path))["pid"] == os.getpid()


def test_recycled_pid_is_not_mistaken_for_the_owner(tmp_path):
    (tmp_path / "data").mkdir()
    import socket
    (tmp_path / "data" / "deploy.lock").write_text(json.dumps(
        {"pid": os.getpid(), "start": (_locks.process_start(os.getpid()) or 0) + 12345, "host": socket.gethostname()}))
    assert _locks.holder(str(tmp_path)) is None


def test_check_only_writes_nothing(tmp_path):
    assert _locks.acquire(str(tmp_path), os.getpid(), check_only=True)[0] is False
    assert not (tmp_path / "data" / "deploy.lock").exists()


def test_maand_lock_wait_waits_for_a_live_owner_then_refuses_or_takes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_locks, "POLL", 0.01)
    owner = os.getppid()  # alive for the whole test
    assert _locks.acquire(str(tmp_path), owner)[0]
    with pytest.raises(_locks.DeployLocked, match=r"waited 0.2s, -e maand_lock_wait"):
        _locks.acquire(str(tmp_path), os.getpid(), wait=0.2)
    calls = []
    real = _locks._acquire_file  # pylint: disable=protected-access

    def releasing(*args):  # the owner finishes while the second deploy waits
        calls.append(1)
        if len(calls) == 3:
            _locks.release(str(tmp_path), owner)
        return real(*args)

    monkeypatch.setattr(_locks, "_acquire_file", releasing)
    taken, note = _locks.acquire(str(tmp_path), os.getpid(), wait=30)
    assert taken and len(calls) == 3 and _locks.holder(str(tmp_path))["pid"] == os.getpid()

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's two locks: the short bucket lock around a read-modify-write, and the deploy lock.

**The bucket lock** (``bucket_lock``): every stage that persists something under ``<bucket>/data/``
(build, the KV store, the deploy's pruning, gc, facts, state moves) holds it around its
read-modify-write: an exclusive flock on ``data/.lock`` and, with a PostgreSQL state store, also the
store's advisory bucket lock (``state_pg.PgStore.shared_lock``), shared by every controller. A second
run refuses (``LockBusy``) or waits (``wait=True``).

**The deploy lock**: one deploy per bucket at a time, held for the whole ansible-playbook run.
`<bucket>/data/deploy.lock` holds JSON naming the owning process (the ansible-playbook process:
the parent of the worker process that runs the action), its start time (from /proc, so a recycled
pid does not look alive) and the host name. A lock whose owner is dead is stale and is taken over.
The file is created and inspected under the short bucket lock (`data/.lock`, flock) so two deploys
that start at the same moment cannot both win.

With a PostgreSQL state store (state_url / MAAND_STATE_URL) the deploy lock is the store's: a session
advisory lock that a holder process keeps for the whole run (state_pg.PgStore.lock_deploy; state_pg.py
runs alone as that holder, so its side of both locks stays in it), shared by every controller of the
bucket and freed by PostgreSQL when the controller dies. Either way a second deploy refuses
(``DeployLocked``), naming the holder, or waits up to `wait` seconds (-e maand_lock_wait), and a
writing build refuses while a deploy runs (``no_deploy_running``, ``DeployInProgress``).
Nothing here imports ansible.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time

from ..errors import MaandError
from . import state_pg, storage

POLL = 0.25  # seconds between attempts while waiting for the deploy lock
LOCK_FILE = ".lock"  # data/.lock: the bucket lock's flock


# --- the bucket lock (data/.lock, and the PostgreSQL store's advisory bucket lock) ------------------

class LockBusy(MaandError):
    """Another maand.core run holds the bucket lock."""


@contextlib.contextmanager
def bucket_lock(bucket_dir, wait=False):
    """Exclusive lock on the bucket's data/ folder (and, with a PostgreSQL store, its advisory bucket
    lock, shared by every controller). Raises LockBusy when another run holds it."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_flock(bucket_dir, wait))
        if storage.is_shared(bucket_dir):
            try:
                stack.enter_context(storage.store(bucket_dir).shared_lock(wait))
            except state_pg.StateLocked as exc:
                raise LockBusy(str(exc)) from None
        yield


@contextlib.contextmanager
def _flock(bucket_dir, wait):
    path = os.path.join(storage.ensure_data_dir(bucket_dir), LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LockBusy("another maand.core run holds %s/%s on this bucket; wait for it to finish" % (
                    storage.DATA_DIR, LOCK_FILE))
            raise
        yield
    finally:
        os.close(fd)


# --- the deploy lock (data/deploy.lock, or the PostgreSQL store's holder process) -------------------

LOCK_NAME = "deploy.lock"


class DeployLocked(MaandError):
    """Another live deploy holds the bucket."""


def lock_path(bucket_dir):
    return os.path.join(bucket_dir, storage.DATA_DIR, LOCK_NAME)


process_start = state_pg.process_start  # /proc/<pid>/stat start time, shared with the PostgreSQL lock holder
pid_alive = state_pg.pid_alive


def read_lock(bucket_dir):
    try:
        with open(lock_path(bucket_dir), "r", encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"pid": None, "corrupt": True}


def describe(owner):
    return "pid %s on %s since %s" % (owner.get("pid"), owner.get("host", "?"), owner.get("started", "?"))


def holder(bucket_dir):
    """The live owner of the lock (a dict), or None when free or stale."""
    store = storage.store(bucket_dir)
    if store.kind != "file":
        return store.deploy_holder()
    owner = read_lock(bucket_dir)
    if not owner or owner.get("corrupt"):
        return None
    if owner.get("host") not in (None, socket.gethostname()):
        return owner  # a deploy on another machine sharing this bucket: cannot check, assume live
    return owner if pid_alive(owner.get("pid"), owner.get("start")) else None


def acquire(bucket_dir, pid, check_only=False, wait=0.0):
    """Take the deploy lock for pid. Returns (taken: bool, note: str); raises DeployLocked.

    Re-acquiring a lock this pid already holds is a no-op (taken False). check_only verifies that the
    lock is free without writing anything (check mode). wait: seconds to wait for a busy lock.
    """
    store = storage.store(bucket_dir)
    if store.kind != "file":
        try:
            return store.lock_deploy(pid, process_start(pid), wait=wait, check_only=check_only)
        except storage.StateLocked as exc:
            raise DeployLocked(str(exc)) from None
    deadline = time.monotonic() + max(0.0, float(wait or 0))
    while True:
        try:
            return _acquire_file(bucket_dir, pid, check_only)
        except DeployLocked as exc:
            if time.monotonic() >= deadline:
                if wait:
                    raise DeployLocked("%s (waited %ss, -e maand_lock_wait)" % (exc, wait)) from None
                raise
        time.sleep(POLL)


def _acquire_file(bucket_dir, pid, check_only):
    with bucket_lock(bucket_dir, wait=True):
        owner = read_lock(bucket_dir)
        if owner and not owner.get("corrupt") and owner.get("pid") == pid and owner.get("host") == socket.gethostname():
            return False, "deploy lock already held by this run"
        live = holder(bucket_dir)
        if live is not None:
            raise DeployLocked("another deploy holds %s/%s (%s); wait for it to finish. If that process is gone "
                               "from another machine, delete the file." % (storage.DATA_DIR, LOCK_NAME, describe(live)))
        note = ("took over a stale deploy lock (%s, no longer running)" % describe(owner)) if owner else "deploy lock taken"
        if check_only:
            return False, "check mode: deploy lock is free (not taken)"
        record = {"pid": pid, "start": process_start(pid), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        storage.atomic_write(lock_path(bucket_dir), json.dumps(record, sort_keys=True) + "\n")
        return True, note


# --- a writing build beside a running deploy (security review 4, N10) -------------------------------

class DeployInProgress(LockBusy):
    """A writing build was refused: a live deploy holds the bucket's deploy lock."""


@contextlib.contextmanager
def no_deploy_running(bucket_dir):
    """Refuse (DeployInProgress, naming the holder) while a live deploy holds the bucket's deploy lock; the
    caller holds the bucket lock. With the bucket folder, a deploy that starts meanwhile waits for that
    bucket lock (_acquire_file); with PostgreSQL the store's advisory deploy lock is held until the block
    ends (PgStore.deploy_lock_for_build), so a deploy on any controller starts after it, never beside it.
    A deploy never runs a writing build itself (the deploy role has no build step)."""
    store = storage.store(bucket_dir)
    with contextlib.ExitStack() as stack:
        if store.kind != "file":
            try:
                stack.enter_context(store.deploy_lock_for_build())
            except state_pg.StateLocked as exc:
                raise DeployInProgress(str(exc)) from None
        else:
            live = holder(bucket_dir)
            if live is not None:
                raise DeployInProgress(
                    "a deploy of this bucket is running (%s/%s: %s); a build now would change the catalog and KV it "
                    "deploys from: wait for the deploy to finish, then build again (--check builds are not refused). "
                    "If that process is gone from another machine, delete the file."
                    % (storage.DATA_DIR, LOCK_NAME, describe(live)))
        yield


def release(bucket_dir, pid):
    """Remove the lock if pid owns it. Returns True when a file was removed (a store's holder stopped)."""
    store = storage.store(bucket_dir)
    if store.kind != "file":
        return store.release_deploy(pid)
    with bucket_lock(bucket_dir, wait=True):
        owner = read_lock(bucket_dir)
        if not owner or owner.get("pid") != pid or owner.get("host") != socket.gethostname():
            return False
        try:
            os.unlink(lock_path(bucket_dir))
        except FileNotFoundError:
            return False
        return True

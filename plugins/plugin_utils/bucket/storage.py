# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's storage primitives: the ``data/`` folder, atomic writes and the bucket lock.

Every stage that persists something under ``<bucket>/data/`` (the catalog, the KV store, the deploy
lock and run folders, facts) writes through ``atomic_write`` (temp file in the same folder, fsync,
os.replace) under ``bucket_lock`` (an exclusive flock on ``data/.lock``), so two runs on one bucket
cannot interleave and a crash never leaves a truncated file. ``link_or_copy`` fills the staged trees
under ``data/`` with hard links. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile

DATA_DIR = "data"
LOCK_FILE = ".lock"


class LockBusy(Exception):
    """Another maand.core run holds the bucket lock."""


def data_dir(bucket_dir):
    """``<bucket>/data``, the folder every stage persists its state under."""
    return os.path.join(bucket_dir, DATA_DIR)


def atomic_write(path, text, mode=0o644):
    """Write text to path so that readers see either the old or the new file, never a mix.

    The temp file is `.<name>.<random>.tmp` in the same folder (so os.replace is atomic and a killed
    writer's leftovers are recognisable). An existing file keeps its mode and, when permitted, its
    owner; a new one gets `mode`. On any error or interrupt the temp file is removed."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        existing = os.stat(path)
    except FileNotFoundError:
        existing = None
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), existing.st_mode & 0o7777 if existing else mode)
            if existing is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(handle.fileno(), existing.st_uid, existing.st_gid)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # persist the rename itself
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def link_or_copy(src, dest):
    """dest as a hard link to src (a copy where linking fails, as across file systems); a symlink stays a symlink."""
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
        return
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


@contextlib.contextmanager
def bucket_lock(bucket_dir, wait=False):
    """Exclusive lock on the bucket's data/ folder. Raises LockBusy when another run holds it."""
    os.makedirs(data_dir(bucket_dir), exist_ok=True)
    path = os.path.join(data_dir(bucket_dir), LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LockBusy("another maand.core run holds %s/%s on this bucket; wait for it to finish" % (
                    DATA_DIR, LOCK_FILE))
            raise
        yield
    finally:
        os.close(fd)

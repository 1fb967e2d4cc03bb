# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's storage primitives: the ``data/`` folder, atomic writes and the bucket lock.

Every stage that persists something under ``<bucket>/data/`` (the catalog, the KV store, the deploy
lock and run folders, facts) writes through ``atomic_write`` (temp file in the same folder, fsync,
os.replace) under ``bucket_lock`` (an exclusive flock on ``data/.lock``), so two runs on one bucket
cannot interleave and a crash never leaves a truncated file. ``link_or_copy`` fills the staged trees
under ``data/`` with hard links. ``data/`` is the controller user's alone (0700, tightened when found
wider: run outputs, output tails and the lock live there) and new files in it are 0600.
``key_mode_problem`` names a key file (kv.key, ca.key, the SSH key) that group or others may read.
No Ansible imports.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile

DATA_DIR = "data"
SECRETS_DIR = "secrets"
LOCK_FILE = ".lock"
LAYER_FIX = 'give a folder inside the bucket that is not secrets/ or data/, e.g. "layers/common"'


class LockBusy(Exception):
    """Another maand.core run holds the bucket lock."""


def data_dir(bucket_dir):
    """``<bucket>/data``, the folder every stage persists its state under."""
    return os.path.join(bucket_dir, DATA_DIR)


def ensure_data_dir(bucket_dir):
    """``<bucket>/data``, created 0700 or narrowed to 0700 (it holds run outputs, output tails, the locks)."""
    path = data_dir(bucket_dir)
    os.makedirs(path, mode=0o700, exist_ok=True)
    with contextlib.suppress(OSError):  # not ours to change: the files in it are still 0600
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o700)
    return path


def private_dir(path):
    """A folder only the controller's user may enter (a run folder under data/)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def key_mode_problem(path, rel, with_fix=True):
    """"" when the key file at path is readable by its owner only (or missing), else a sentence naming it
    (and the fix)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if not mode & 0o077:
        return ""
    text = "%s may be read by group or others (mode %04o): it must be the controller user's alone" % (rel, mode & 0o7777)
    return text + ("; run chmod 600 %s" % rel if with_fix else "")


def atomic_write(path, text, mode=0o600):
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
    path = os.path.join(ensure_data_dir(bucket_dir), LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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


def _under(root, path):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def layer_problem(bucket_dir, layer):
    """Why a folder layer may not ship (a sentence naming the layer), or "": it must lie in the bucket, not be
    the bucket itself (which holds secrets/ and data/), nor lie in secrets/ or data/, and hold no symlink
    that leads out of the bucket (a layer is copied into every worker's job tree)."""
    root = os.path.realpath(bucket_dir)
    real = os.path.realpath(os.path.join(bucket_dir, layer))
    if not _under(root, real):
        return "layer %s leaves the bucket folder" % layer
    if real == root:
        return "layer %s is the bucket folder itself, with secrets/ (kv.key, the CA key) and data/" % layer
    for private in (SECRETS_DIR, DATA_DIR):
        if _under(os.path.join(root, private), real):
            return "layer %s lies in %s/, which never ships to workers" % (layer, private)
    for dirpath, dirnames, filenames in os.walk(real):
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and (os.path.isabs(os.readlink(path)) or not _under(root, os.path.realpath(path))):
                return "layer %s holds a symlink %s -> %s that leads out of the bucket" % (
                    layer, os.path.relpath(path, bucket_dir), os.readlink(path))
    return ""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's storage: the state store, the ``data/`` folder and atomic writes.

The bucket's shared state (the catalog, ``bucket_id``, the KV document, the deploy lock and the run
records) lives in one **state store**, ``store(bucket_dir)``:

* ``FileStore`` (the default): files under ``<bucket>/data/`` exactly as before: ``catalog.json``,
  ``bucket_id``, ``kv.json``; the deploy lock is ``data/deploy.lock`` (bucket/locks.py), the run
  records are the run folders (deploy/run.py);
* ``state_pg.PgStore`` when ``state_url = "postgresql://..."`` is set in maand.conf or
  ``MAAND_STATE_URL`` in the environment (the variable wins): several controllers (a team, AWX
  jobs) then share one bucket's state, its deploy lock and run records.

Both also keep the **deploy records** (one JSON document per finished deploy run, written by
deploy/record.py, read by ``maand.core.logs``, ``info`` and ``cat -e maand_cat=deployments``):
``write_record(run_id, text, keep)`` stores one and drops all but the newest ``keep``
(``RECORDS_KEPT``), ``records(limit=None)`` returns ``[(run_id, text)]`` oldest first. Files:
``data/deploys/<run_id>.json``; PostgreSQL: the ``maand_deploy_records`` table.

Both keep the **board** of sliced deploys (deploy/slices.py): ``board_put(run_key, name, text)``,
``board_get``, ``board_items(run_key, prefix)``, ``board_drop``, ``board_keys`` and each member's liveness
(``board_join``, ``board_alive``, ``board_leave``); files: ``data/.deploy-board/<run_key>/`` (slices of one
controller), PostgreSQL: the ``maand_board`` table and a holder process per member (several controllers).

Both have the same document interface: ``read(name) -> Doc | None`` (its text and generation),
``write(name, text, expect=None)`` (expect: the generation read; a PostgreSQL write refuses when
another writer moved it), ``exists(name)``. Secrets stay sealed with ``secrets/kv.key`` in the KV
document: the key never enters a store.

Every stage that persists something under ``<bucket>/data/`` writes through ``atomic_write`` (temp
file in the same folder, fsync, os.replace) under the bucket lock (locks.py ``bucket_lock``: an
exclusive flock on ``data/.lock``, and with a PostgreSQL store also its advisory bucket lock), so two
runs on one bucket cannot interleave and a crash never leaves a truncated file. ``link_or_copy``
fills the staged trees under ``data/`` with hard links. ``data/`` is the controller user's alone
(0700, tightened when found wider: run outputs, output tails and the lock live there) and new files
in it are 0600.
``key_mode_problem`` names a key file (kv.key, ca.key, the SSH key) that group or others may read.
``own_private_dir`` makes a folder reused by a name others can guess (in the shared temp folder: ssh
ControlPath sockets, --check plan summaries) or refuses one it did not make (``UnsafeFolder``).
No Ansible imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import tempfile
import urllib.parse

from . import readers, state_pg
from ..errors import MaandError

DATA_DIR = "data"
SECRETS_DIR = "secrets"
MAAND_CONF = "maand.conf"
URL_ENV = state_pg.URL_ENV
# document name -> (file under data/, mode of a new file)
DOCUMENTS = {"catalog": ("catalog.json", 0o600), "bucket_id": ("bucket_id", 0o600), "kv": ("kv.json", 0o600)}
RECORDS_DIR = "deploys"  # data/deploys/<run_id>.json: the deploy records of a FileStore
BOARD_DIR = ".deploy-board"  # data/.deploy-board/<run_key>/<name>.json: a FileStore's board
RECORDS_KEPT = 50  # deploy records a store keeps (the newest; older ones are dropped when one is written)

Doc = state_pg.Doc
StateStoreError = state_pg.StateStoreError
StaleState = state_pg.StaleState
StateLocked = state_pg.StateLocked
LAYER_FIX = 'give a folder inside the bucket that is not secrets/ or data/, e.g. "layers/common"'


class UnsafeFolder(MaandError):
    """A folder reused by a name others can guess is not this user's own 0700 folder (own_private_dir)."""


# --- choosing the store -----------------------------------------------------------------------------

_CONF_CACHE = {}


def conf_state_url(bucket_dir):
    """state_url from the bucket's maand.conf ('' when absent, unreadable or not a string: the model
    reports a broken maand.conf itself)."""
    path = os.path.join(bucket_dir, MAAND_CONF)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return ""
    cached = _CONF_CACHE.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    try:
        with open(path, "rb") as handle:
            url = readers.parse_toml(handle.read(readers.MAX_FILE_BYTES).decode("utf-8")).get("state_url", "")
    except (OSError, ValueError, RecursionError, readers.InputError):
        url = ""
    url = url if isinstance(url, str) else ""
    _CONF_CACHE[path] = (stamp, url)
    return url


def state_url(bucket_dir, environ=None):
    """The bucket's state store URL: MAAND_STATE_URL, else maand.conf's state_url, else '' (files)."""
    env = (os.environ if environ is None else environ).get(URL_ENV, "").strip()
    return env or conf_state_url(bucket_dir).strip()


def check_url(url, origin):
    """StateStoreError unless url is '' (the bucket folder) or a postgresql:// URL without a password (as
    maand.conf refuses one: MAAND_STATE_URL shows in process listings, CI logs and AWX job settings)."""
    if url and not state_pg.is_url(url):
        raise StateStoreError("%s %r is not a state store URL: use postgresql://[user@]host[:port]/database (the "
                              "password through PGPASSWORD, ~/.pgpass or a service file), or leave it unset to keep "
                              "the state in the bucket's data/ folder" % (origin, state_pg.redact(url)))
    if url and state_pg.has_password(url):
        raise StateStoreError("%s %s holds a password, which is refused as in maand.conf: remove it from the URL and "
                              "give it through PGPASSWORD, ~/.pgpass or a service file" % (origin, state_pg.redact(url)))
    return url


_STORES = {}


def store(bucket_dir):
    """The bucket's state store (one per process, bucket and URL)."""
    url = state_url(bucket_dir)
    key = (os.getpid(), os.path.abspath(bucket_dir), url)
    found = _STORES.get(key)
    if found is None:
        if len(_STORES) > 64 or any(k[0] != key[0] for k in _STORES):
            _STORES.clear()  # a forked child never reuses its parent's connections
        origin = URL_ENV if os.environ.get(URL_ENV, "").strip() else "%s/%s state_url" % (bucket_dir, MAAND_CONF)
        found = state_pg.PgStore(check_url(url, origin)) if url else FileStore(bucket_dir)
        _STORES[key] = found
    return found


def is_shared(bucket_dir):
    """True when the bucket's state is in a shared (PostgreSQL) store."""
    return bool(state_url(bucket_dir))


class FileStore:
    """The bucket folder as the state store: data/catalog.json, data/bucket_id, data/kv.json."""

    kind = "file"

    def __init__(self, bucket_dir):
        self.bucket_dir = bucket_dir
        self.label = os.path.join(bucket_dir, DATA_DIR)
        self.seen = {}

    def path(self, name):
        return os.path.join(self.bucket_dir, DATA_DIR, DOCUMENTS[name][0])

    def where(self, name):
        return "%s/%s" % (DATA_DIR, DOCUMENTS[name][0])

    def read(self, name):
        """The document, or None when its file is missing; OSError and UnicodeDecodeError as open() raises them."""
        try:
            with open(self.path(name), "r", encoding="utf-8") as handle:
                return Doc(handle.read())
        except FileNotFoundError:
            return None

    def exists(self, name):
        return os.path.isfile(self.path(name))

    def write(self, name, text, expect=None, source=""):  # pylint: disable=unused-argument
        """Atomically replace the file (the caller holds locks.bucket_lock: files need no generation)."""
        ensure_data_dir(self.bucket_dir)
        atomic_write(self.path(name), text, mode=DOCUMENTS[name][1])

    def documents(self):
        """{name: Doc} of the documents present."""
        out = {}
        for name in DOCUMENTS:
            doc = self.read(name)
            if doc is not None:
                out[name] = doc
        return out

    # --- deploy records (data/deploys/<run_id>.json) ------------------------------------------------

    def records_dir(self):
        return os.path.join(self.bucket_dir, DATA_DIR, RECORDS_DIR)

    def write_record(self, run_id, text, keep=RECORDS_KEPT):
        """Store one deploy record and drop all but the newest `keep` (by run id: runs ids start with their UTC
        start time)."""
        check_run_id(run_id)
        ensure_data_dir(self.bucket_dir)
        folder = private_dir(self.records_dir())
        atomic_write(os.path.join(folder, run_id + ".json"), text)
        for old in self._record_ids()[:-max(1, int(keep))]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, old + ".json"))

    def _record_ids(self):
        try:
            names = os.listdir(self.records_dir())
        except FileNotFoundError:
            return []
        return sorted(n[:-len(".json")] for n in names if n.endswith(".json") and not n.startswith("."))

    def records(self, limit=None):
        """[(run_id, text)] of the kept deploy records, oldest first (the last `limit` ones); a record removed
        while this reads is left out."""
        ids = self._record_ids()
        out = []
        for run_id in ids[-limit:] if limit else ids:
            with contextlib.suppress(FileNotFoundError):
                with open(os.path.join(self.records_dir(), run_id + ".json"), encoding="utf-8") as handle:
                    out.append((run_id, handle.read()))
        return out

    # --- the board (data/.deploy-board/<run_key>/: sliced deploys of one controller, deploy/slices.py) --------

    def board_dir(self, run_key):
        state_pg.check_board(run_key)
        return os.path.join(self.bucket_dir, DATA_DIR, BOARD_DIR, run_key)

    def _entry(self, run_key, name):
        state_pg.check_board(run_key, name)
        return os.path.join(self.board_dir(run_key), urllib.parse.quote(name, safe="") + ".json")

    def board_put(self, run_key, name, text):
        ensure_data_dir(self.bucket_dir)
        private_dir(os.path.dirname(self.board_dir(run_key)))
        private_dir(self.board_dir(run_key))
        atomic_write(self._entry(run_key, name), text)

    def board_get(self, run_key, name):
        try:
            with open(self._entry(run_key, name), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def board_items(self, run_key, prefix=""):
        try:
            files = os.listdir(self.board_dir(run_key))
        except FileNotFoundError:
            return {}
        out = {}
        for file_name in files:
            name = urllib.parse.unquote(file_name[:-len(".json")]) if file_name.endswith(".json") else None
            if name is not None and name.startswith(prefix) and not file_name.startswith("."):
                text = self.board_get(run_key, name)
                if text is not None:
                    out[name] = text
        return out

    def board_join(self, run_key, member, run_pid, run_start=None):
        """The member's token: its run process (pid and start time) on this host."""
        self.board_put(run_key, "alive/%s" % member, json.dumps(
            {"host": socket.gethostname(), "pid": run_pid, "start": run_start or state_pg.process_start(run_pid)}))

    def board_alive(self, run_key, member):
        """True while the member's run process lives, False when it is gone or never joined, None when it runs on
        another host (a bucket folder shared between machines: cannot tell)."""
        text = self.board_get(run_key, "alive/%s" % member)
        if text is None:
            return False
        row = json.loads(text)
        if row.get("host") != socket.gethostname():
            return None
        return state_pg.pid_alive(row.get("pid"), row.get("start"))

    def board_leave(self, run_key, member, run_pid):  # pylint: disable=unused-argument
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._entry(run_key, "alive/%s" % member))

    def board_drop(self, run_key):
        shutil.rmtree(self.board_dir(run_key), ignore_errors=True)

    def board_keys(self):
        root = os.path.join(self.bucket_dir, DATA_DIR, BOARD_DIR)
        try:
            keys = os.listdir(root)
        except FileNotFoundError:
            return []
        return sorted(keys, key=lambda k: (os.stat(os.path.join(root, k)).st_mtime, k))


def check_run_id(run_id):
    """StateStoreError unless run_id can name a record (letters, digits, '.', '_', '-'; not starting with '.')."""
    if not isinstance(run_id, str) or not run_id or run_id.startswith(".") or len(run_id) > 128 or any(
            not (c.isascii() and (c.isalnum() or c in "._-")) for c in run_id):
        raise StateStoreError("%r cannot name a deploy record (letters, digits, '.', '_' and '-' only)" % (run_id,))
    return run_id


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


def own_private_dir(path):
    """path, a folder only this user may enter, for what a run reuses by a name others can guess (in the
    shared temp folder). Made 0700 when missing. An existing one is refused (UnsafeFolder, naming it and
    the fix) unless it is a real folder, not a link, owned by this user (geteuid) that no one else may
    write: anyone may create a name in /tmp first, and a folder made by someone else (or open to them)
    lets them watch or steer what goes in it (an ssh ControlPath socket, a plan summary). A folder of
    this user that others could only read or enter (the 0755 plans folder of earlier releases) is
    narrowed to 0700."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:  # a reused folder: checked below (owner, mode, not a link)
        pass
    info = os.lstat(path)
    problem = folder_problem(info)
    if problem:
        raise UnsafeFolder("%s %s: maand.core reuses this folder by name and must be the only one able to use it; "
                           "remove it if nothing of yours is in it (rm -rf %s; it is made again, 0700), or set "
                           "TMPDIR to a folder only you can write" % (path, problem, path))
    if stat.S_IMODE(info.st_mode) != 0o700:  # ours, no one else could write it: only read bits (or the umask's cut)
        os.chmod(path, 0o700)
    return path


def folder_problem(info):
    """"" when the lstat result info is a folder (not a link) of this user (geteuid) that no one else may
    write (no group or other write bit, no setgid or sticky bit), else what it is instead."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid != os.geteuid():
        return "belongs to uid %d, not to this user (uid %d)" % (info.st_uid, os.geteuid())
    if info.st_mode & 0o7022:
        return "has mode %04o: others may write in it (only 0700 is safe)" % stat.S_IMODE(info.st_mode)
    return ""


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

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading ``data/maand.db``, the SQLite database of a bucket that maand manages, for the takeover
(maand-sh/maand data/schema.go, LatestSchemaVersion 1). Read only (``mode=ro``), stdlib sqlite3.

What maand.core keeps from it, so the first deploy of a bucket maand deployed changes nothing:

* ``bucket``: ``bucket_id`` (the workers' ``/opt/worker/<bucket_id>/``) and ``update_seq``;
* ``worker``: each worker's ``worker_id`` (templates' ``.WorkerID``, KV ``maand/worker/<ip>``,
  maand's ``worker.json``);
* ``key_value``: the latest version of every key, tombstones dropped, values as stored (secrets stay
  ``enc:v1:`` ciphertext under the same ``secrets/kv.key``; certificates stay as issued);
* ``hash`` + ``allocations``: which allocations maand deployed, with which version.

A schema version other than 1, a missing table or column, or a file that is not SQLite is a
``MaandDBError`` naming the file and the fix; nothing is read or written then.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import sqlite3
from typing import Optional

from ..errors import MaandError

DB_REL = os.path.join("data", "maand.db")
SCHEMA_VERSION = 1
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
REQUIRED = {
    "bucket": ("bucket_id", "update_seq"),
    "worker": ("worker_id", "worker_ip"),
    "allocations": ("alloc_id", "worker_ip", "job", "disabled", "removed"),
    "key_value": ("namespace", "key", "value", "version", "deleted"),
    "hash": ("namespace", "key", "current_hash", "current_version"),
}


class MaandDBError(MaandError):
    """data/maand.db cannot be taken over; the message names the file, the cause and the fix."""


@dataclasses.dataclass(frozen=True)
class Deployed:
    """An allocation maand deployed (hash namespace <job>_allocation, key alloc_id)."""

    job: str
    worker: str
    alloc_id: str
    version: str
    hash: str
    disabled: bool


@dataclasses.dataclass(frozen=True)
class MaandDB:
    bucket_id: str
    update_seq: int
    worker_ids: dict  # worker ip -> maand's worker_id
    kv: dict  # {namespace: {key: (value, version)}}, latest versions, no tombstones
    deployed: dict  # (job, worker ip) -> Deployed

    def kv_values(self) -> dict:
        return {ns: {k: v for k, (v, _x) in keys.items()} for ns, keys in self.kv.items()}


def db_path(bucket_dir: str) -> str:
    return os.path.join(bucket_dir, DB_REL)


def exists(bucket_dir: str) -> bool:
    return os.path.lexists(db_path(bucket_dir))


def read(bucket_dir: str) -> Optional[MaandDB]:
    """maand's database of the bucket, or None when there is none. Raises MaandDBError."""
    path = db_path(bucket_dir)
    if not os.path.lexists(path):
        return None
    if not os.path.isfile(path):
        raise MaandDBError("%s is not a regular file; replace it with maand's database (or remove it to start"
                           " a new bucket_id)" % DB_REL)
    try:
        # as a URI (percent-encoded), so a `?`, `#` or `%` in the bucket path cannot change the file or the mode
        conn = sqlite3.connect(pathlib.Path(os.path.abspath(path)).as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise MaandDBError("%s cannot be opened: %s; check its permissions" % (DB_REL, exc)) from None
    try:
        _check_schema(conn)
        return _load(conn)
    except sqlite3.DatabaseError as exc:
        raise MaandDBError("%s is not a readable SQLite database (%s); restore it from a backup of the bucket,"
                           " or remove it to start with a new bucket_id (the jobs maand deployed must then be"
                           " stopped first)" % (DB_REL, exc)) from None
    finally:
        conn.close()


def _check_schema(conn: sqlite3.Connection) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    version = 0
    if "schema_version" in tables:
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        version = int(row[0]) if row else 0
    if version != SCHEMA_VERSION:
        older = version < SCHEMA_VERSION
        raise MaandDBError(
            "%s has maand schema version %d; maand.core takes over version %d only. %s" % (
                DB_REL, version, SCHEMA_VERSION,
                "Upgrade it first: run `maand init` with a current maand binary in the bucket, then build again"
                if older else "It was written by a newer maand: take over with a maand.core release that knows"
                " it, or keep the bucket on maand"))
    for table, columns in REQUIRED.items():
        if table not in tables:
            raise MaandDBError("%s has no table %s (maand schema %d has it): the file is damaged or not maand's;"
                               " run `maand init` in the bucket to repair it, then build again"
                               % (DB_REL, table, SCHEMA_VERSION))
        have = {r[1] for r in conn.execute("PRAGMA table_info(%s)" % table)}
        missing = [c for c in columns if c not in have]
        if missing:
            raise MaandDBError("%s table %s has no column %s: run `maand init` in the bucket to upgrade it, then"
                               " build again" % (DB_REL, table, ", ".join(missing)))


def _load(conn: sqlite3.Connection) -> MaandDB:
    row = conn.execute("SELECT bucket_id, update_seq FROM bucket").fetchone()
    if row is None or not row[0]:
        raise MaandDBError("%s has no bucket_id (table bucket is empty): maand never built this bucket; remove"
                           " the file and build" % DB_REL)
    bucket_id, update_seq = str(row[0]), int(row[1] or 0)
    if not UUID.match(bucket_id):
        raise MaandDBError("%s bucket_id %r is not a UUID as maand makes them; restore the file from a backup"
                           " of the bucket" % (DB_REL, bucket_id))
    worker_ids = {str(ip): str(wid) for wid, ip in conn.execute("SELECT worker_id, worker_ip FROM worker")}
    latest: dict = {}
    for ns, key, value, version, deleted in conn.execute(
            "SELECT namespace, key, value, version, deleted FROM key_value ORDER BY version"):
        latest.setdefault(str(ns), {})[str(key)] = (None if deleted else str(value or ""), int(version or 0))
    kv = {ns: {k: v for k, v in keys.items() if v[0] is not None} for ns, keys in latest.items()}
    return MaandDB(bucket_id, update_seq, worker_ids, {ns: keys for ns, keys in kv.items() if keys},
                   _deployed(conn))


def _deployed(conn: sqlite3.Connection) -> dict:
    out = {}
    for alloc_id, ip, job, disabled, removed in conn.execute(
            "SELECT alloc_id, worker_ip, job, disabled, removed FROM allocations"):
        if removed:
            continue
        row = conn.execute("SELECT current_hash, current_version FROM hash WHERE namespace = ? AND key = ?",
                           ("%s_allocation" % job, alloc_id)).fetchone()
        if row is None or not row[0]:
            continue  # built but never deployed by maand
        out[(str(job), str(ip))] = Deployed(str(job), str(ip), str(alloc_id), str(row[1] or ""), str(row[0]),
                                            bool(disabled))
    return out


def adopted_versions(bucket_dir: str, bucket_id: str) -> tuple:
    """For the deploy plan: ({(job, worker ip): version} of the active allocations maand deployed, warning).

    Empty when there is no maand.db or it belongs to another bucket_id; a database that cannot be read
    gives a warning (the plan then starts those allocations as new ones)."""
    if not exists(bucket_dir):
        return {}, ""
    try:
        db = read(bucket_dir)
    except MaandDBError as exc:
        return {}, "%s; allocations maand deployed are not adopted (they would start again)" % exc
    if db is None or db.bucket_id != bucket_id:
        return {}, ""
    return {key: dep.version for key, dep in db.deployed.items() if not dep.disabled}, ""

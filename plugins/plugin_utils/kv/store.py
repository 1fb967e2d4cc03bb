# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's KV store, kept in ``<bucket>/data/kv.json`` with history as maand keeps it.

maand keeps its KV in maand.db's ``key_value`` table, one row per (namespace, key, version)
(maand-sh/maand kv/store.go, kv/persist.go, kv/purge.go). This is the same model in one JSON file:

* every key has a version counter that bumps when its value changes, when it is deleted (a
  tombstone: the key stays, marked deleted) and when a deleted key is put again;
* its previous values (at most ``MAX_HISTORY``, maand's MaxVersionsToKeep) with the time each was
  written; ``prune_history`` is maand gc's PurgeStaleVersions: a key whose latest version is older
  than an age loses its history beyond ``MAX_HISTORY``, and goes whole when that version is a tombstone;
* non-secret values are trimmed on put, as maand's ``Store.Put``;
* ``secrets/job/<job>`` values are stored encrypted, current value and history alike
  (``secrets``: AES-256-GCM with ``secrets/kv.key``, maand's format), never as plaintext.

Who owns what (maand build/build_variables.go): build owns ``maand/*``, ``vars/bucket`` and
``vars/bucket/job/*`` and replaces them on every build (stale keys become tombstones);
``vars/job/<job>`` and ``secrets/job/<job>`` belong to the user: build merges vars.toml into
``vars/job/<job>`` and keeps every key hooks wrote there, until the job leaves the catalog
(removed from the workspace and cleaned up on its workers): then both are tombstoned, as maand's
deploy and gc purge them (``drop_jobs``).

The document is the ``kv`` document of the bucket's state store (``_storage.store``): by default
the file, replaced atomically (temp file + os.replace); with a PostgreSQL store a row, whose save
is refused when another controller wrote it since this store was loaded. The key (secrets/kv.key)
never enters the store. Writers hold the bucket lock (``_locks.bucket_lock``, which build already
takes) around load..save. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..bucket import locks, storage
from . import secrets
from ..errors import MaandError

KV_REL = os.path.join("data", "kv.json")
FORMAT = 2
MAX_HISTORY = 7  # maand kv/store.go MaxVersionsToKeep
MASK = "***"
MAX_KV_BYTES = 256 * 1024 * 1024  # a guard against a corrupt or hostile file, far above any real bucket

USER_PREFIXES = ("vars/job/", "secrets/job/")
ROLLOUT_ORDER_KEY = "rollout_order"


class KVStoreError(MaandError):
    """data/kv.json or a write to it is refused; the message names the file or namespace and a fix.

    (catalog/kv_build.read_kv turns it into kv/functions.KVError.)"""


def is_secret_ns(namespace: str) -> bool:
    return namespace.startswith("secrets/")


def is_user_ns(namespace: str) -> bool:
    """vars/job/<job> and secrets/job/<job>: written by users and hooks, merged by build."""
    return any(namespace.startswith(p) and "/" not in namespace[len(p):] and namespace[len(p):]
               for p in USER_PREFIXES)


def user_ns_job(namespace: str) -> str:
    """The job of a user-owned namespace (vars/job/<job> or secrets/job/<job>)."""
    return namespace.rsplit("/", 1)[1]


@dataclasses.dataclass
class Revision:
    """One past (or the current) value of a key; value None is a deletion."""

    version: int
    value: str | None
    modified: float

    def as_json(self) -> list:
        return [self.version, self.value, self.modified]


@dataclasses.dataclass
class Entry:
    """One key: its current value (encrypted in secrets/), version, tombstone flag and history."""

    value: str
    version: int = 1
    deleted: bool = False
    modified: float = 0.0
    history: list[Revision] = dataclasses.field(default_factory=list)

    def current(self) -> Revision:
        return Revision(self.version, None if self.deleted else self.value, self.modified)

    def as_json(self) -> dict:
        out = {"value": self.value, "version": self.version, "modified": self.modified}
        if self.deleted:
            out["deleted"] = True
        if self.history:
            out["history"] = [r.as_json() for r in self.history]
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Entry":
        history = [Revision(int(v), None if val is None else str(val), float(t))
                   for v, val, t in doc.get("history") or []]
        return cls(str(doc["value"]), int(doc["version"]), bool(doc.get("deleted")),
                   float(doc.get("modified") or 0), history)


@dataclasses.dataclass
class Change:
    """What apply_build did to one key: "added", "changed" or "deleted"."""

    namespace: str
    key: str
    kind: str


def stale_revisions(entry: Entry, cutoff: float) -> tuple:
    """(revisions maand's gc drops, whether the whole key goes) for one key and a cutoff time:
    nothing while its latest version is newer than the cutoff; else the key and its history when
    it is a tombstone, or its history beyond MAX_HISTORY, oldest first."""
    if entry.modified >= cutoff:
        return 0, False
    if entry.deleted:
        return 1 + len(entry.history), True
    return max(0, len(entry.history) - MAX_HISTORY), False


class KVStore:
    """The bucket's KV: load, read a snapshot, put/delete user keys, apply a build, save."""

    def __init__(self, bucket_dir: str, namespaces: dict[str, dict[str, Entry]] | None = None,
                 clock: Callable[[], float] = time.time):
        self.bucket_dir = bucket_dir
        self.namespaces: dict[str, dict[str, Entry]] = namespaces or {}
        self.clock = clock
        self.dirty = False
        self.generation: int | None = None  # of the stored document this store was loaded from
        self._key: bytes | None = None

    # --- loading and saving ---------------------------------------------------------------

    @classmethod
    def path_of(cls, bucket_dir: str) -> str:
        return os.path.join(bucket_dir, KV_REL)

    @classmethod
    def exists(cls, bucket_dir: str) -> bool:
        return storage.store(bucket_dir).exists("kv")

    @classmethod
    def load(cls, bucket_dir: str, clock: Callable[[], float] = time.time) -> "KVStore":
        """The store of data/kv.json; an empty store when the file is not there yet."""
        state = storage.store(bucket_dir)
        where = KV_REL if state.kind == "file" else state.where("kv")
        try:
            stored = state.read("kv")
            if stored is None:
                store = cls(bucket_dir, clock=clock)
                store.generation = 0
                return store
            if len(stored.text) > MAX_KV_BYTES:
                raise ValueError("%d bytes, more than the %d a KV store may hold" % (len(stored.text), MAX_KV_BYTES))
            doc = json.loads(stored.text)
        except (OSError, ValueError, RecursionError) as exc:
            raise KVStoreError("%s is unreadable: %s; restore it from a backup, or move it aside"
                               " and rebuild (build recomputes its own keys; keys hooks wrote in"
                               " vars/job and secrets/job are lost)" % (where, exc)) from None
        try:
            store = cls(bucket_dir, _parse(doc), clock=clock)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise KVStoreError("%s is not a maand.core KV file (format %d): %s; restore it from a"
                               " backup, or move it aside and rebuild" % (where, FORMAT, exc)) from None
        store.generation = stored.generation
        return store

    @classmethod
    @contextlib.contextmanager
    def edit(cls, bucket_dir: str, wait: bool = True) -> Iterator["KVStore"]:
        """Load, let the caller change, save: all under the bucket lock (for hooks and gc; build
        already holds the lock and calls load/save itself). Nothing is saved if the block raises."""
        with locks.bucket_lock(bucket_dir, wait=wait):
            store = cls.load(bucket_dir)
            yield store
            store.save()

    def as_json(self) -> dict:
        return {"format": FORMAT,
                "namespaces": {ns: {k: e.as_json() for k, e in sorted(keys.items())}
                               for ns, keys in sorted(self.namespaces.items()) if keys}}

    def save(self) -> bool:
        """Atomically write data/kv.json if anything changed (hold the bucket lock). True if written."""
        if not self.dirty and self.exists(self.bucket_dir):
            return False
        text = json.dumps(self.as_json(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        written = storage.store(self.bucket_dir).write("kv", text, expect=self.generation)
        if written is not None:
            self.generation = written
        self.dirty = False
        return True

    # --- reading --------------------------------------------------------------------------

    def snapshot(self, reveal_secrets: bool = False, mask: str | None = None) -> dict[str, dict[str, str]]:
        """{namespace: {key: value}} of live keys. Secrets: decrypted with reveal_secrets, else
        shown as mask when one is given, else left out."""
        out: dict[str, dict[str, str]] = {}
        for ns, keys in sorted(self.namespaces.items()):
            secret = is_secret_ns(ns)
            if secret and not reveal_secrets and mask is None:
                continue
            live = {k: self._reveal(ns, k, e.value) if secret and reveal_secrets else
                    (mask if secret else e.value)
                    for k, e in sorted(keys.items()) if not e.deleted}
            if live:
                out[ns] = live
        return out

    def get(self, namespace: str, key: str, reveal_secrets: bool = False) -> str | None:
        """One live value (None if absent or deleted); a secret needs reveal_secrets."""
        entry = (self.namespaces.get(namespace) or {}).get(key)
        if entry is None or entry.deleted:
            return None
        if is_secret_ns(namespace):
            return self._reveal(namespace, key, entry.value) if reveal_secrets else MASK
        return entry.value

    def history(self, namespace: str, key: str, reveal_secrets: bool = False) -> list[Revision]:
        """Every kept revision of a key, oldest first, the current one last ([] if unknown)."""
        entry = (self.namespaces.get(namespace) or {}).get(key)
        if entry is None:
            return []
        revisions = entry.history + [entry.current()]
        if not is_secret_ns(namespace):
            return [dataclasses.replace(r) for r in revisions]
        return [dataclasses.replace(r, value=None if r.value is None else
                                    (self._reveal(namespace, key, r.value) if reveal_secrets else MASK))
                for r in revisions]

    # --- writing --------------------------------------------------------------------------

    def put(self, namespace: str, key: str, value: str) -> bool:
        """Set a key of vars/job/<job> or secrets/job/<job> (hooks, users). True if it changed."""
        self._check_user(namespace, key)
        return self._put(namespace, key, str(value))

    def delete(self, namespace: str, key: str) -> bool:
        """Tombstone a key of vars/job/<job> or secrets/job/<job>. False if it was not there."""
        self._check_user(namespace, key)
        return self._delete(namespace, key)

    def delete_namespace(self, namespace: str) -> list[Change]:
        """Tombstone every live key of a vars/job/<job> or secrets/job/<job> namespace (maand build
        --purge-job-kv); the changes made."""
        self._check_user(namespace, "*")
        return [Change(namespace, key, "deleted") for key in sorted(self.namespaces.get(namespace) or {})
                if self._delete(namespace, key)]

    def put_rollout_order(self, job: str, order: str) -> bool:
        """maand/job/<job> rollout_order, the one build-owned key hooks may write (pre_deploy or cli:
        maand jobcommand/runtime_http.go validateStoreKeyWrite); the next build resets it to the catalog order."""
        if not job or "/" in job:
            raise KVStoreError("rollout_order needs a job name, not %r" % job)
        return self._put("maand/job/%s" % job, ROLLOUT_ORDER_KEY, str(order))

    def apply_build(self, computed: Mapping[str, Mapping[str, str]],
                    catalog_jobs: Iterable[str] | None = None) -> list[Change]:
        """Take build's computed KV (kv/functions.compute_kv without previous): build-owned namespaces are
        replaced (keys not computed any more become tombstones, whole namespaces included);
        user-owned ones get the computed keys (vars.toml) merged over what they hold.

        catalog_jobs: every job the catalog still holds (removed ones that still have allocation
        rows included); the user-owned namespaces of any other job are tombstoned (drop_jobs)."""
        changes: list[Change] = []
        for ns, keys in computed.items():
            for key, value in keys.items():
                kind = self._kind(ns, key)
                if self._put(ns, str(key), str(value)):
                    changes.append(Change(ns, str(key), kind))
        for ns, keys in self.namespaces.items():
            if is_user_ns(ns):
                continue
            wanted = computed.get(ns) or {}
            for key in sorted(keys):
                if key not in wanted and self._delete(ns, key):
                    changes.append(Change(ns, key, "deleted"))
        if catalog_jobs is not None:
            held = set(catalog_jobs)
            changes += self.drop_jobs(sorted({user_ns_job(ns) for ns in self.namespaces if is_user_ns(ns)} - held))
        return changes

    def drop_jobs(self, jobs: Iterable[str]) -> list[Change]:
        """Tombstone every key of vars/job/<job> and secrets/job/<job> of jobs that left the
        catalog (removed from the workspace and cleaned up on their workers), as maand's deploy
        and gc purge a job's namespaces once it holds no allocation that is not removed
        (deploy/purge_job_kv.go, data.JobKVNamespaces). A job added again starts empty."""
        changes: list[Change] = []
        for job in jobs:
            for prefix in USER_PREFIXES:
                ns = prefix + job
                for key in sorted(self.namespaces.get(ns) or {}):
                    if self._delete(ns, key):
                        changes.append(Change(ns, key, "deleted"))
        return changes

    def prune_history(self, older_than_seconds: float) -> int:
        """maand gc's PurgeStaleVersions (kv/purge.go): every key whose latest version was written
        before now - older_than_seconds keeps at most MAX_HISTORY previous versions, and goes with its
        history when that latest version is a tombstone. Returns how many revisions went."""
        return self.prune_before(self.clock() - max(0.0, float(older_than_seconds)))

    def prune_before(self, cutoff: float, only: set | None = None) -> int:
        """prune_history with an absolute cutoff (a time.time()), on every key or only the
        (namespace, key) pairs in `only` (gc does exactly what its plan listed)."""
        dropped = 0
        for ns in list(self.namespaces):
            keys = self.namespaces[ns]
            for key in list(keys):
                if only is not None and (ns, key) not in only:
                    continue
                stale, whole = stale_revisions(keys[key], cutoff)
                dropped += stale
                if whole:
                    del keys[key]
                elif stale:
                    keys[key].history = keys[key].history[stale:]
            if not keys:
                del self.namespaces[ns]
        self.dirty = self.dirty or dropped > 0
        return dropped

    def purge_namespace(self, namespace: str) -> int:
        """Delete a whole namespace, its keys, tombstones and history (gc of a job or worker that is
        gone, as maand's gc). Returns how many keys went."""
        keys = self.namespaces.pop(namespace, None) or {}
        self.dirty = self.dirty or bool(keys)
        return len(keys)

    # --- internals ------------------------------------------------------------------------

    def _check_user(self, namespace: str, key: str) -> None:
        if not is_user_ns(namespace):
            raise KVStoreError("%s is written by build; only vars/job/<job> and secrets/job/<job>"
                               " can be written (put %s there instead)" % (namespace, key))
        if not key or not isinstance(key, str):
            raise KVStoreError("a key in %s must be a non-empty string" % namespace)

    def _kind(self, ns: str, key: str) -> str:
        entry = (self.namespaces.get(ns) or {}).get(key)
        return "added" if entry is None or entry.deleted else "changed"

    def _put(self, ns: str, key: str, value: str) -> bool:
        entry = self.namespaces.setdefault(ns, {}).get(key)
        if is_secret_ns(ns):
            if entry is not None and not entry.deleted and self._same_secret(ns, key, entry.value, value):
                return False
            stored = secrets.encrypt(self._secret_key(create=True), value, secrets.place(ns, key))
        else:
            stored = value.strip()  # maand's Store.Put trims
            if entry is not None and not entry.deleted and entry.value == stored:
                return False
        now = self.clock()
        if entry is None:
            self.namespaces[ns][key] = Entry(stored, 1, False, now)
        else:
            self._push_history(entry)
            entry.value, entry.deleted, entry.version, entry.modified = stored, False, entry.version + 1, now
        self.dirty = True
        return True

    def _delete(self, ns: str, key: str) -> bool:
        entry = (self.namespaces.get(ns) or {}).get(key)
        if entry is None or entry.deleted:
            return False
        self._push_history(entry)
        entry.deleted, entry.version, entry.modified = True, entry.version + 1, self.clock()
        self.dirty = True
        return True

    @staticmethod
    def _push_history(entry: Entry) -> None:
        entry.history.append(entry.current())
        del entry.history[:-MAX_HISTORY]

    def _secret_key(self, create: bool = False) -> bytes:
        if self._key is None:
            try:
                self._key = secrets.load_key(self.bucket_dir, create=create)
            except secrets.SecretError as exc:
                raise KVStoreError(str(exc)) from None
        return self._key

    def _same_secret(self, ns: str, key: str, stored: str, value: str) -> bool:
        if stored.startswith(secrets.PREFIX):  # a v1 value is sealed again, bound to its place
            return False
        try:
            return self._reveal(ns, key, stored) == value
        except KVStoreError:  # a damaged value is replaced by the new one
            return False

    def _reveal(self, ns: str, key: str, stored: str) -> str:
        try:
            return secrets.decrypt(self._secret_key(), stored, secrets.place(ns, key))
        except secrets.SecretError as exc:
            raise KVStoreError("%s: %s key %s: %s" % (KV_REL, ns, key, exc)) from None


def _parse(doc: Any) -> dict[str, dict[str, Entry]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("namespaces"), dict):
        raise ValueError("no namespaces object")
    spaces = doc["namespaces"]
    if doc.get("format") == 1:  # plain {ns: {key: value}}, as build wrote it before history existed
        return {str(ns): {str(k): Entry(str(v)) for k, v in keys.items()} for ns, keys in spaces.items()}
    if doc.get("format") != FORMAT:
        raise ValueError("format %r" % doc.get("format"))
    return {str(ns): {str(k): Entry.from_json(e) for k, e in keys.items()} for ns, keys in spaces.items()}

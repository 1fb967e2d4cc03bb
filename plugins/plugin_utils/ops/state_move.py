# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Moving a bucket's state between stores (``maand.core.state``): the bucket folder's files into a
PostgreSQL store, or a store's documents back to files, all or nothing.

The source is the bucket's store as it is configured now (``_storage.store``: state_url /
MAAND_STATE_URL, else data/); the target is ``to``: a postgresql:// URL or ``files``. Every
document (catalog, bucket_id, KV) is checked (the catalog against its schema, the KV document as
the KV store parses it) before anything is written; a PostgreSQL target gets them, the run records
and the deploy records in one transaction; files are written to temp files first and renamed
together, then the deploy records (data/deploys/). A target
that already holds a catalog is refused unless ``force`` (the bucket could hold another bucket's
state). Never while a deploy holds the bucket's deploy lock. The secrets stay sealed with
secrets/kv.key, which is never copied. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os

from ..bucket import locks, state_pg, storage
from ..catalog import catalog
from ..deploy import run
from ..kv import store
from ..errors import MaandError

FILES = "files"
RUNS_KEPT = 20


class MoveError(MaandError):
    """The move is refused; the message names the cause and the fix. Nothing was written."""


@dataclasses.dataclass
class Moved:
    source: str
    target: str
    documents: list
    runs: int = 0
    records: int = 0
    written: bool = False
    lines: list = dataclasses.field(default_factory=list)


def target_store(bucket_dir, to):
    if to == FILES:
        return storage.FileStore(bucket_dir)
    try:
        storage.check_url(to, "maand_state_to")
    except storage.StateStoreError as exc:
        raise MoveError("%s; or maand_state_to=files to move the state back into %s/data" % (exc, bucket_dir)) from None
    if not to:
        raise MoveError("maand_state_to is required: a postgresql://[user@]host[:port]/database URL, or files")
    return state_pg.PgStore(to)


def _check(bucket_dir, docs):
    """MoveError unless every document reads as its reader reads it."""
    if "catalog" in docs:
        try:
            catalog.loads(docs["catalog"])
        except catalog.CatalogError as exc:
            raise MoveError("the source catalog is not valid: %s; fix or rebuild it before moving" % exc) from None
    if "kv" in docs:
        try:
            store._parse(json.loads(docs["kv"]))  # pylint: disable=protected-access
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MoveError("the source KV document is not valid: %s; restore it before moving" % exc) from None


def _file_runs(bucket_dir):
    root = run.runs_root(bucket_dir)
    out = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(root))[-RUNS_KEPT:]:
            try:
                with open(os.path.join(root, name, "plan.json"), encoding="utf-8") as plan, \
                        open(os.path.join(root, name, "state.json"), encoding="utf-8") as state:
                    out.append((name, plan.read(), state.read()))
            except OSError:
                continue
    return out


def move(bucket_dir, to, force=False, check_mode=False):
    """Copy the bucket's state from its current store to `to`. Returns Moved; raises MoveError."""
    source = storage.store(bucket_dir)
    target = target_store(bucket_dir, to)
    if source.kind == target.kind and source.label == target.label:
        raise MoveError("the bucket's state is already in %s: nothing to move" % target.label)
    holder = locks.holder(bucket_dir)
    if holder is not None:
        raise MoveError("a deploy holds the bucket's deploy lock (%s): move the state when it has finished"
                        % (state_pg.describe(holder) if "run_pid" in holder else locks.describe(holder)))
    with locks.bucket_lock(bucket_dir, wait=True):
        docs = {name: doc.text for name, doc in source.documents().items() if name in storage.DOCUMENTS}
        if "catalog" not in docs:
            raise MoveError("%s holds no catalog: build the bucket first (there is nothing to move)" % source.label)
        _check(bucket_dir, docs)
        runs = source.runs(RUNS_KEPT) if source.kind != "file" else _file_runs(bucket_dir)
        records = source.records()
        existing = target.documents()
        if "catalog" in existing and not force:
            raise MoveError("%s already holds a catalog (bucket_id %s): refusing to replace it; pass "
                            "-e maand_force=true to replace that state with this bucket's"
                            % (target.label, _bucket_id(existing["catalog"].text)))
        result = Moved(source.label, target.label, sorted(docs), len(runs) if target.kind != "file" else 0,
                       len(records))
        result.lines = ["%s: %d bytes" % (name, len(docs[name].encode("utf-8"))) for name in sorted(docs)]
        result.lines.append("deploy records: %d" % len(records))
        if check_mode:
            return result
        if target.kind == "file":
            _write_files(bucket_dir, docs)
            for run_id, text in records:
                target.write_record(run_id, text, max(storage.RECORDS_KEPT, len(records)))
        else:
            target.replace_all(docs, runs, records)
        after = {name: doc.text for name, doc in target.documents().items() if name in docs}
        if after != docs:
            raise MoveError("%s does not read back what was written; check the store" % target.label)
        result.written = True
        return result


def _bucket_id(text):
    try:
        return json.loads(text).get("bucket_id", "?")
    except (ValueError, AttributeError):
        return "?"


def _write_files(bucket_dir, docs):
    """All the files or none: temp files first, then the renames (and back on failure)."""
    data = storage.data_dir(bucket_dir)
    os.makedirs(data, exist_ok=True)
    staged = {}
    try:
        for name, text in docs.items():
            path = os.path.join(data, storage.DOCUMENTS[name][0])
            tmp = path + ".moving"
            storage.atomic_write(tmp, text, mode=storage.DOCUMENTS[name][1])
            staged[path] = tmp
        backups = {}
        for path in staged:
            if os.path.exists(path):
                os.replace(path, path + ".before-move")
                backups[path] = path + ".before-move"
        try:
            for path, tmp in staged.items():
                os.replace(tmp, path)
        except OSError:
            for path, backup in backups.items():
                os.replace(backup, path)
            raise
        for backup in backups.values():
            os.unlink(backup)
    finally:
        for tmp in staged.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)

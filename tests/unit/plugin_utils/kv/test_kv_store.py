"""The bucket's KV store in data/kv.json (_kv_store).

Semantics taken from maand-sh/maand kv/store.go (Put trims and bumps the version only on change,
Delete tombstones and bumps, a deleted key put again revives with a higher version),
kv/purge.go (gc drops old versions and tombstones) and build/build_variables.go (syncKeyValues
drops stale keys of build-owned namespaces; mergeWorkspaceJobVars merges vars.toml without
deleting other keys).
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build

from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions, store as _store, secrets as _secrets


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def store(tmp_path, clock=None):
    return _store.KVStore.load(str(tmp_path), clock=clock or Clock())


def test_empty_bucket_loads_empty_and_save_is_atomic(tmp_path, monkeypatch):
    s = store(tmp_path)
    assert s.snapshot() == {}
    s.put("vars/job/api", "a", "1")
    assert s.save() and not s.save()  # nothing changed the second time
    doc = json.loads((tmp_path / "data" / "kv.json").read_text())
    assert doc["format"] == 2 and doc["namespaces"]["vars/job/api"]["a"]["value"] == "1"
    # a writer killed while writing leaves the old file whole and no temp file behind
    s.put("vars/job/api", "a", "2")

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        s.save()
    monkeypatch.undo()
    assert store(tmp_path).snapshot() == {"vars/job/api": {"a": "1"}}
    assert os.listdir(tmp_path / "data") == ["kv.json"]
    assert s.save() and store(tmp_path).snapshot() == {"vars/job/api": {"a": "2"}}


def test_versions_history_and_tombstones(tmp_path):
    clock = Clock()
    s = store(tmp_path, clock)
    assert s.put("vars/job/api", "k", " v1 ")  # trimmed, as maand's Put
    assert not s.put("vars/job/api", "k", "v1")  # unchanged: no new version
    clock.now = 2000
    assert s.put("vars/job/api", "k", "v2")
    clock.now = 3000
    assert s.delete("vars/job/api", "k") and not s.delete("vars/job/api", "k")
    assert s.get("vars/job/api", "k") is None and "vars/job/api" not in s.snapshot()
    clock.now = 4000
    s.put("vars/job/api", "k", "v3")  # revived with a higher version
    assert [(r.version, r.value, r.modified) for r in s.history("vars/job/api", "k")] == [
        (1, "v1", 1000), (2, "v2", 2000), (3, None, 3000), (4, "v3", 4000)]
    s.save()
    again = store(tmp_path)
    assert [r.as_json() for r in again.history("vars/job/api", "k")] == [
        [1, "v1", 1000], [2, "v2", 2000], [3, None, 3000], [4, "v3", 4000]]
    assert again.history("vars/job/api", "nope") == []


def test_history_is_capped_at_maands_versions_to_keep(tmp_path):
    s = store(tmp_path)
    for i in range(20):
        s.put("vars/job/api", "k", str(i))
    history = s.history("vars/job/api", "k")
    assert len(history) == _store.MAX_HISTORY + 1
    assert history[-1].version == 20 and history[0].version == 20 - _store.MAX_HISTORY


def test_prune_history_is_maands_purge_stale_versions(tmp_path):
    clock = Clock(100)
    s = store(tmp_path, clock)
    for i in range(3):
        s.put("vars/job/api", "old", "v%d" % i)
    s.put("vars/job/api", "gone", "a")
    s.put("vars/job/api", "recent", "a")
    clock.now = 200
    s.delete("vars/job/api", "gone")
    clock.now = 900
    s.put("vars/job/api", "recent", "b")
    s.delete("vars/job/api", "recent")
    s.dirty = False
    # older than 500 s: the tombstone "gone" goes with its history; "old" keeps its 2 previous
    # versions (within MAX_HISTORY); "recent" was deleted 100 s ago: kept until it is old enough
    assert s.prune_history(older_than_seconds=500) == 2
    assert s.dirty
    assert [r.value for r in s.history("vars/job/api", "old")] == ["v0", "v1", "v2"]
    assert s.history("vars/job/api", "gone") == []
    assert [r.value for r in s.history("vars/job/api", "recent")] == ["a", "b", None]
    assert s.prune_history(500) == 0
    clock.now = 2000
    assert s.prune_history(500) == 3  # "recent": its tombstone and 2 revisions
    # more than MAX_HISTORY versions behind the latest (a store written by another tool) go
    entry = s.namespaces["vars/job/api"]["old"]
    entry.history = [_store.Revision(i, "x%d" % i, 50) for i in range(1, 11)]
    assert s.prune_history(500) == 10 - _store.MAX_HISTORY
    assert [r.version for r in entry.history] == list(range(11 - _store.MAX_HISTORY, 11))


def test_only_user_namespaces_are_writable(tmp_path):
    s = store(tmp_path)
    for ns in ("maand/bucket", "vars/bucket", "vars/bucket/job/api", "maand/job/api",
               "vars/job/", "vars/job/api/x", "secrets/job/"):
        with pytest.raises(_store.KVStoreError, match="written by build"):
            s.put(ns, "k", "v")
        with pytest.raises(_store.KVStoreError):
            s.delete(ns, "k")
    with pytest.raises(_store.KVStoreError, match="non-empty"):
        s.put("vars/job/api", "", "v")


COMPUTED = {
    "maand/bucket": {"bucket_id": "b", "api_http_port": "10000", "old_port": "10001"},
    "maand/job/api": {"name": "api", "workers": "10.0.0.1"},
    "maand/job/gone": {"name": "gone"},
    "vars/job/api": {"from_toml": "1", "shared": "toml"},
}


def test_apply_build_replaces_build_namespaces_and_merges_user_ones(tmp_path):
    s = store(tmp_path)
    changes = s.apply_build(COMPUTED)
    assert {(c.namespace, c.key, c.kind) for c in changes} >= {("maand/bucket", "old_port", "added")}
    s.put("vars/job/api", "hook_key", "from-hook")
    s.put("vars/job/api", "shared", "hook")  # vars.toml wins on the next build (maand merges it over)
    s.put("secrets/job/api", "token", "t0p")
    s.save()
    rebuilt = {"maand/bucket": {"bucket_id": "b", "api_http_port": "10000"},
               "maand/job/api": {"name": "api", "workers": "10.0.0.1,10.0.0.2"},
               "vars/job/api": {"from_toml": "2", "shared": "toml"}}
    s = store(tmp_path)
    changes = s.apply_build(rebuilt)
    assert sorted((c.namespace, c.key, c.kind) for c in changes) == [
        ("maand/bucket", "old_port", "deleted"),
        ("maand/job/api", "workers", "changed"),
        ("maand/job/gone", "name", "deleted"),
        ("vars/job/api", "from_toml", "changed"),
        ("vars/job/api", "shared", "changed")]
    snap = s.snapshot(reveal_secrets=True)
    assert snap["maand/bucket"] == {"bucket_id": "b", "api_http_port": "10000"}
    assert "maand/job/gone" not in snap
    assert snap["vars/job/api"] == {"from_toml": "2", "shared": "toml", "hook_key": "from-hook"}
    assert snap["secrets/job/api"] == {"token": "t0p"}
    # the same build again changes nothing and writes nothing
    s.save()
    s = store(tmp_path)
    assert s.apply_build(rebuilt) == [] and not s.save()


def test_secrets_never_plaintext_on_disk_and_masked_unless_revealed(tmp_path):
    s = store(tmp_path)
    s.put("secrets/job/api", "db_password", "p@ssw0rd-XYZ")
    s.put("secrets/job/api", "db_password", "second-Secret")
    s.save()
    text = (tmp_path / "data" / "kv.json").read_text()
    assert "p@ssw0rd-XYZ" not in text and "second-Secret" not in text and "enc:v2:" in text and "enc:v1:" not in text
    assert oct((tmp_path / "data" / "kv.json").stat().st_mode & 0o777) == "0o600"
    s = store(tmp_path)
    assert "secrets/job/api" not in s.snapshot()
    assert s.snapshot(mask="***")["secrets/job/api"] == {"db_password": "***"}
    assert s.snapshot(reveal_secrets=True)["secrets/job/api"] == {"db_password": "second-Secret"}
    assert s.get("secrets/job/api", "db_password") == "***"
    assert [r.value for r in s.history("secrets/job/api", "db_password")] == ["***", "***"]
    assert [r.value for r in s.history("secrets/job/api", "db_password", reveal_secrets=True)] == [
        "p@ssw0rd-XYZ", "second-Secret"]
    assert not s.put("secrets/job/api", "db_password", "second-Secret")  # same plaintext: no version
    # read_kv: secrets only when asked
    assert "secrets/job/api" not in _kv_build.read_kv(str(tmp_path))
    assert _kv_build.read_kv(str(tmp_path), reveal_secrets=True)["secrets/job/api"]["db_password"] == \
        "second-Secret"


def test_a_secret_written_by_maand_reads_here(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "kv.key").write_bytes(b"0123456789abcdef0123456789abcdef")
    (tmp_path / "data").mkdir()
    token = "enc:v1:bWFhbmQtbm9uY2UhgnPhDSnF0b0NuN+FBsxns6PeVNR+PQfP"  # test_secrets.GO_VECTORS
    (tmp_path / "data" / "kv.json").write_text(json.dumps({"format": 2, "namespaces": {
        "secrets/job/api": {"pw": {"value": token, "version": 1, "modified": 0}}}}))
    os.chmod(tmp_path / "secrets" / "kv.key", 0o644)  # issue 21: a key others may read is refused, naming the fix
    with pytest.raises(Exception, match=r"secrets/kv.key may be read by group or others \(mode 0644\).*chmod 600"):
        _kv_build.read_kv(str(tmp_path), reveal_secrets=True)
    os.chmod(tmp_path / "secrets" / "kv.key", 0o600)
    assert _kv_build.read_kv(str(tmp_path), reveal_secrets=True) == {"secrets/job/api": {"pw": "p@ssw0rd"}}


def test_a_secret_moved_to_another_key_or_job_does_not_decrypt(tmp_path):
    """Security review L9: the value's place (namespace and key) is AES-GCM associated data."""
    s = store(tmp_path)
    s.put("secrets/job/api", "pw", "hunter2")
    s.put("secrets/job/db", "pw", "other")
    s.save()
    path = tmp_path / "data" / "kv.json"
    doc = json.loads(path.read_text())
    spaces = doc["namespaces"]
    sealed = spaces["secrets/job/api"]["pw"]["value"]
    spaces["secrets/job/db"]["pw"]["value"] = sealed                          # another job
    spaces["secrets/job/api"]["token"] = dict(spaces["secrets/job/api"]["pw"])   # another key
    path.write_text(json.dumps(doc))
    moved = store(tmp_path)
    assert moved.get("secrets/job/api", "pw", reveal_secrets=True) == "hunter2"   # in place: decrypts
    for ns, key in (("secrets/job/db", "pw"), ("secrets/job/api", "token")):
        with pytest.raises(_store.KVStoreError, match=r"%s key %s: .*moved from another key" % (ns, key)):
            moved.get(ns, key, reveal_secrets=True)


def test_a_maand_v1_secret_is_sealed_to_its_place_when_written_again(tmp_path):
    s = store(tmp_path)
    key = s._secret_key(create=True)
    s.namespaces["secrets/job/api"] = {"pw": _store.Entry(_secrets.encrypt(key, "same"))}
    assert s.get("secrets/job/api", "pw", reveal_secrets=True) == "same"   # a v1 value still reads
    assert s.put("secrets/job/api", "pw", "same")                          # and is sealed again
    assert s.namespaces["secrets/job/api"]["pw"].value.startswith("enc:v2:")
    assert not s.put("secrets/job/api", "pw", "same")                      # then it is the same secret


def test_tampered_ciphertext_and_missing_key_fail_naming_file_and_fix(tmp_path):
    s = store(tmp_path)
    s.put("secrets/job/api", "pw", "hunter2")
    s.save()
    path = tmp_path / "data" / "kv.json"
    doc = json.loads(path.read_text())
    value = doc["namespaces"]["secrets/job/api"]["pw"]["value"]
    doc["namespaces"]["secrets/job/api"]["pw"]["value"] = value[:-6] + ("AAAA==" if value[-6:] != "AAAA==" else "BBBB==")
    path.write_text(json.dumps(doc))
    with pytest.raises(_store.KVStoreError,
                       match=r"data/kv.json: secrets/job/api key pw: .*(tampered|damaged)"):
        store(tmp_path).snapshot(reveal_secrets=True)
    s = store(tmp_path)
    assert s.put("secrets/job/api", "pw", "new")  # a damaged value can be replaced
    assert s.get("secrets/job/api", "pw", reveal_secrets=True) == "new"
    os.unlink(tmp_path / "secrets" / "kv.key")
    with pytest.raises(_store.KVStoreError, match="secrets/kv.key is missing"):
        store(tmp_path).snapshot(reveal_secrets=True)
    with pytest.raises(_functions.KVError, match="secrets/kv.key is missing"):
        _kv_build.read_kv(str(tmp_path), reveal_secrets=True)
    assert store(tmp_path).snapshot(mask="***")["secrets/job/api"] == {"pw": "***"}


def test_corrupt_store_names_file_and_fix(tmp_path):
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "kv.json"
    for text, match in (("{", "unreadable.*move it aside and rebuild"),
                        ('{"format": 2, "namespaces": {"a": {"k": {}}}}', "not a maand.core KV file"),
                        ('{"format": 3, "namespaces": {}}', "not a maand.core KV file"),
                        ("[" * 100000 + "]" * 100000, "unreadable.*move it aside")):   # deep nesting: no traceback
        path.write_text(text)
        with pytest.raises(_store.KVStoreError, match=match):
            store(tmp_path)


def test_format_1_files_are_read(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kv.json").write_text('{"format": 1, "namespaces": {"vars/job/a": {"k": 5}}}')
    s = store(tmp_path)
    assert s.snapshot() == {"vars/job/a": {"k": "5"}}
    s.put("vars/job/a", "k", "6")
    assert s.save() and json.loads((tmp_path / "data" / "kv.json").read_text())["format"] == 2


def test_is_user_ns():
    assert _store.is_user_ns("vars/job/api") and _store.is_user_ns("secrets/job/api")
    assert not _store.is_user_ns("vars/bucket/job/api") and not _store.is_user_ns("vars/job/")
    assert _secrets.KEY_REL == os.path.join("secrets", "kv.key")


def test_edit_saves_under_the_lock_and_not_on_error(tmp_path):
    with _store.KVStore.edit(str(tmp_path)) as s:
        s.put("vars/job/api", "a", "1")
        with pytest.raises(Exception, match="another maand.core run holds"):
            with _store.KVStore.edit(str(tmp_path), wait=False):
                pass
    assert store(tmp_path).snapshot() == {"vars/job/api": {"a": "1"}}
    with pytest.raises(RuntimeError):
        with _store.KVStore.edit(str(tmp_path)) as s:
            s.put("vars/job/api", "a", "2")
            raise RuntimeError("hook failed")
    assert store(tmp_path).snapshot() == {"vars/job/api": {"a": "1"}}


def test_user_namespaces_of_jobs_gone_from_the_catalog_are_tombstoned(tmp_path):
    """maand purges vars/job/<job> and secrets/job/<job> once the job holds no allocation that is
    not removed (deploy/purge_job_kv.go, gc's purgeRemovedJobNamespaces): here, once the job left
    the catalog. A job the catalog still holds (removed, not cleaned up yet) keeps them."""
    s = store(tmp_path)
    s.apply_build({"vars/job/api": {"a": "1"}, "vars/job/old": {"b": "2"}})
    s.put("secrets/job/old", "token", "t0p-old")
    s.put("secrets/job/api", "token", "t0p-api")
    assert s.apply_build({"vars/job/api": {"a": "1"}}, catalog_jobs=["api", "old"]) == []  # old: still held
    changes = s.apply_build({"vars/job/api": {"a": "1"}}, catalog_jobs=["api"])
    assert sorted((c.namespace, c.key, c.kind) for c in changes) == [
        ("secrets/job/old", "token", "deleted"), ("vars/job/old", "b", "deleted")]
    snap = s.snapshot(reveal_secrets=True)
    assert "vars/job/old" not in snap and "secrets/job/old" not in snap
    assert snap["secrets/job/api"] == {"token": "t0p-api"}
    assert s.namespaces["vars/job/old"]["b"].deleted  # a tombstone, with its history, as maand's Delete
    assert s.drop_jobs(["old", "never-there"]) == []
    s.put("vars/job/old", "b", "3")  # the job added again starts from what it writes
    assert s.snapshot()["vars/job/old"] == {"b": "3"}

"""The KV key from outside the bucket (an AWX credential, a CI secret): MAAND_KV_KEY (base64) and
MAAND_KV_KEY_FILE; the key itself never enters a state store."""

from __future__ import annotations

import base64
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.kv import secrets as _secrets, store as _store


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (_secrets.KEY_ENV, _secrets.KEY_FILE_ENV, "MAAND_STATE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_maand_kv_key_seals_and_opens_the_secrets_without_a_key_file(tmp_path, monkeypatch):
    key = os.urandom(32)
    monkeypatch.setenv(_secrets.KEY_ENV, base64.b64encode(key).decode())
    with _store.KVStore.edit(str(tmp_path)) as kv:
        kv.put("secrets/job/api", "token", "t0ken")
    assert not (tmp_path / "secrets" / "kv.key").exists()
    stored = (tmp_path / "data" / "kv.json").read_text()
    assert "t0ken" not in stored
    assert _store.KVStore.load(str(tmp_path)).get("secrets/job/api", "token", reveal_secrets=True) == "t0ken"
    value = __import__("json").loads(stored)["namespaces"]["secrets/job/api"]["token"]["value"]
    assert _secrets.decrypt(key, value, _secrets.place("secrets/job/api", "token")) == "t0ken"


@pytest.mark.parametrize("value,why", [("not base64!", "invalid base64"), (base64.b64encode(b"x" * 16).decode(), "16 bytes")])
def test_a_wrong_maand_kv_key_is_refused_by_name(tmp_path, monkeypatch, value, why):
    monkeypatch.setenv(_secrets.KEY_ENV, value)
    with pytest.raises(_secrets.SecretError) as info:
        _secrets.load_key(str(tmp_path))
    assert "MAAND_KV_KEY" in str(info.value) and why in str(info.value)


def test_maand_kv_key_file_replaces_secrets_kv_key(tmp_path, monkeypatch):
    key_file = tmp_path / "injected.key"
    key_file.write_bytes(os.urandom(32))
    key_file.chmod(0o600)  # a key others may read is refused wherever it comes from
    monkeypatch.setenv(_secrets.KEY_FILE_ENV, str(key_file))
    assert _secrets.load_key(str(tmp_path / "bucket")) == key_file.read_bytes()

"""Secrets at rest as maand keeps them (_secrets).

maand-sh/maand kv/encrypt.go: "enc:v1:" + base64.StdEncoding(nonce || gcm.Seal(...)), 12-byte
nonce, no associated data; kv/key.go: secrets/kv.key holds 32 raw bytes.
kv/secret_test.go TestEncryptDecryptRoundTrip / TestStorePutSecretGetSecret use a random key, so
the vectors below were produced with Go 1.19's crypto/aes + crypto/cipher (the calls of
kv/encrypt.go, with the key and nonce fixed instead of random):

    block, _ := aes.NewCipher([]byte("0123456789abcdef0123456789abcdef"))
    gcm, _ := cipher.NewGCM(block)
    nonce := []byte("maand-nonce!")
    "enc:v1:" + base64.StdEncoding.EncodeToString(gcm.Seal(nonce, nonce, []byte(pt), nil))
"""

from __future__ import annotations

import base64
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.kv import secrets as _secrets

GO_KEY = b"0123456789abcdef0123456789abcdef"
GO_NONCE = b"maand-nonce!"
GO_VECTORS = [
    ("super-secret-token", "enc:v1:bWFhbmQtbm9uY2UhgUbiGyzY0LzS0IjN1Jhd6M/8YIGdRbIL6x9v2klO2c87fQ=="),
    ("p@ssw0rd", "enc:v1:bWFhbmQtbm9uY2UhgnPhDSnF0b0NuN+FBsxns6PeVNR+PQfP"),
    ("", "enc:v1:bWFhbmQtbm9uY2Uhk5mIWFWf3Fet9vhDEr0Tlw=="),
    ("ünïcode ✓", "enc:v1:bWFhbmQtbm9uY2UhMY/8vfGWzL3Ugg8latm2dhJrcwnw90POQYzunR0="),
]


@pytest.mark.parametrize("plain,token", GO_VECTORS)
def test_go_vectors_decrypt(plain, token):
    assert _secrets.decrypt(GO_KEY, token) == plain


@pytest.mark.parametrize("plain,token", GO_VECTORS)
def test_go_vectors_encrypt_byte_for_byte(plain, token):
    assert _secrets.encrypt_with_nonce(GO_KEY, plain, GO_NONCE) == token


def test_round_trip_uses_a_fresh_nonce_each_time():
    key = os.urandom(32)
    a, b = _secrets.encrypt(key, "super-secret-token"), _secrets.encrypt(key, "super-secret-token")
    assert a != b and a.startswith("enc:v1:") and _secrets.is_encrypted(a)
    assert _secrets.decrypt(key, a) == _secrets.decrypt(key, b) == "super-secret-token"
    assert "super-secret-token" not in a


def test_v2_values_are_bound_to_their_place():
    key = os.urandom(32)
    token = _secrets.encrypt(key, "pw", _secrets.place("secrets/job/api", "db"))
    assert token.startswith("enc:v2:") and _secrets.is_encrypted(token)
    assert _secrets.decrypt(key, token, _secrets.place("secrets/job/api", "db")) == "pw"
    for other in (_secrets.place("secrets/job/web", "db"), _secrets.place("secrets/job/api", "db2")):
        with pytest.raises(_secrets.SecretError, match="moved from another key"):
            _secrets.decrypt(key, token, other)
    with pytest.raises(_secrets.SecretError, match="decrypts only at its place"):
        _secrets.decrypt(key, token)
    assert _secrets.decrypt(GO_KEY, GO_VECTORS[1][1], _secrets.place("any", "where")) == GO_VECTORS[1][0]  # v1: as maand


def test_tampered_or_foreign_values_fail_with_a_fix():
    token = GO_VECTORS[0][1]
    raw = bytearray(base64.b64decode(token[len("enc:v1:"):]))
    raw[-1] ^= 1
    tampered = "enc:v1:" + base64.b64encode(bytes(raw)).decode()
    with pytest.raises(_secrets.SecretError, match="does not decrypt with secrets/kv.key .it was tampered with"):
        _secrets.decrypt(GO_KEY, tampered)
    with pytest.raises(_secrets.SecretError, match="tampered with"):
        _secrets.decrypt(os.urandom(32), token)
    with pytest.raises(_secrets.SecretError, match="not encrypted"):
        _secrets.decrypt(GO_KEY, "plain")
    with pytest.raises(_secrets.SecretError, match="not valid base64"):
        _secrets.decrypt(GO_KEY, "enc:v1:@@@")
    with pytest.raises(_secrets.SecretError, match="too short"):
        _secrets.decrypt(GO_KEY, "enc:v1:" + base64.b64encode(b"x" * 20).decode())


def test_load_key_missing_create_and_corrupt(tmp_path):
    bucket = str(tmp_path)
    with pytest.raises(_secrets.SecretError, match=r"secrets/kv.key is missing.*restore"):
        _secrets.load_key(bucket)
    key = _secrets.load_key(bucket, create=True)
    path = tmp_path / "secrets" / "kv.key"
    assert len(key) == 32 and path.read_bytes() == key
    assert path.stat().st_mode & 0o777 == 0o600
    assert _secrets.load_key(bucket) == key == _secrets.load_key(bucket, create=True)
    path.write_bytes(b"short")
    with pytest.raises(_secrets.SecretError, match=r"secrets/kv.key is corrupt.*holds 5"):
        _secrets.load_key(bucket, create=True)
    path.write_bytes(b"x" * 33)
    with pytest.raises(_secrets.SecretError, match="corrupt"):
        _secrets.load_key(bucket)


def test_missing_cryptography_is_named_with_the_fix(monkeypatch):
    from plugins.plugin_utils import certs as _certs
    from plugins.plugin_utils.certs import ca as _ca
    monkeypatch.setattr(_secrets, "CRYPTOGRAPHY_ERROR", ImportError("No module named 'cryptography'"))
    monkeypatch.setattr(_ca, "CRYPTOGRAPHY_ERROR", ImportError("No module named 'cryptography'"))
    with pytest.raises(_secrets.SecretError, match="pip install cryptography"):
        _secrets.encrypt(b"k" * 32, "x")
    with pytest.raises(_certs.CertError, match="pip install cryptography"):
        _certs.cert_status(None, 10)

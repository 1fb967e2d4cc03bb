# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets at rest, encrypted exactly as maand encrypts them (maand-sh/maand kv/encrypt.go, kv/key.go).

* the key: ``<bucket>/secrets/kv.key``, 32 raw bytes (AES-256), mode 0600, created when missing;
* a stored value: ``"enc:v1:" + base64.StdEncoding(nonce || ciphertext || tag)`` where the nonce
  is 12 random bytes (Go's ``gcm.NonceSize()``) and the 16-byte GCM tag is appended by Seal;
  no associated data.

So a secret maand wrote decrypts here and the other way round. What maand.core itself writes into its
KV store is ``"enc:v2:"`` + the same layout, sealed with the value's place (namespace and key) as AES-GCM
associated data: a ciphertext moved to another key or job no longer decrypts (security review L9).
``enc:v1:`` values (taken over from maand, or written before) still decrypt, and are sealed as v2 when
they are next written. The crypto is the ``cryptography``
package's AESGCM; nothing here is hand-written crypto. No Ansible imports.
"""

from __future__ import annotations

import base64
import binascii
import os

from ..bucket import storage
from ..errors import MaandError

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    CRYPTOGRAPHY_ERROR = None
except ImportError as _exc:  # the controller lacks it (ansible-test's import check runs without it)
    AESGCM = None
    CRYPTOGRAPHY_ERROR = _exc

    class InvalidTag(MaandError):
        """Stands in for cryptography's exception when the package is missing."""

SECRETS_DIR = "secrets"
KEY_FILE = "kv.key"
KEY_SIZE = 32
NONCE_SIZE = 12
PREFIX = "enc:v1:"
PREFIX_V2 = "enc:v2:"  # maand.core's own writes: the value's place is associated data
KEY_REL = os.path.join(SECRETS_DIR, KEY_FILE)
# A key file outside the bucket (an AWX credential's file injector, a CI secret): it replaces
# secrets/kv.key for every bucket this controller process works on.
KEY_FILE_ENV = "MAAND_KV_KEY_FILE"
# The key itself, base64 (an AWX credential's secret environment variable); wins over both files.
KEY_ENV = "MAAND_KV_KEY"


class SecretError(MaandError):
    """A missing or corrupt key, or a value that does not decrypt; the message names file and fix."""


def key_path(bucket_dir: str) -> str:
    """secrets/kv.key of the bucket, or the file MAAND_KV_KEY_FILE names."""
    return os.environ.get(KEY_FILE_ENV, "").strip() or os.path.join(bucket_dir, SECRETS_DIR, KEY_FILE)


def load_key(bucket_dir: str, create: bool = False) -> bytes:
    """The bucket's AES-256 key from secrets/kv.key (or MAAND_KV_KEY, MAAND_KV_KEY_FILE); with create, a
    new random key when missing."""
    if os.environ.get(KEY_ENV, "").strip():
        return _env_key()
    path = key_path(bucket_dir)
    try:
        with open(path, "rb") as handle:
            key = handle.read(KEY_SIZE + 1)
    except FileNotFoundError:
        if not create:
            raise SecretError("%s is missing: the bucket's secrets cannot be decrypted; restore the"
                              " key file from a backup of the bucket (maand and maand.core create it"
                              " when the first secret is written)" % KEY_REL) from None
        return _create_key(path)
    except OSError as exc:
        raise SecretError("%s is unreadable: %s; fix its permissions (0600, owned by the user"
                          " running the playbook)" % (KEY_REL, exc.strerror)) from None
    problem = storage.key_mode_problem(path, KEY_REL)
    if problem:
        raise SecretError(problem)
    if len(key) != KEY_SIZE:
        raise SecretError("%s is corrupt: it must hold exactly %d raw bytes (AES-256), it holds %s;"
                          " restore it from a backup of the bucket (a new key cannot decrypt the"
                          " secrets already stored)" % (KEY_REL, KEY_SIZE,
                                                        "more" if len(key) > KEY_SIZE else len(key)))
    return key


def _env_key() -> bytes:
    try:
        key = base64.b64decode(os.environ[KEY_ENV].strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_SIZE:
        raise SecretError("%s must hold the base64 of the bucket's %d-byte key (base64 -w0 %s), not %s" % (
            KEY_ENV, KEY_SIZE, KEY_REL, "%d bytes" % len(key) if key else "invalid base64"))
    return key


def _create_key(path: str) -> bytes:
    key = AESGCM.generate_key(bit_length=KEY_SIZE * 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return load_key(os.path.dirname(os.path.dirname(path)))
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
        handle.flush()
        os.fsync(handle.fileno())
    return key


def is_encrypted(value: str) -> bool:
    """Whether a stored value has an encrypted prefix (maand's v1, or maand.core's v2)."""
    return isinstance(value, str) and value.startswith((PREFIX, PREFIX_V2))


def place(namespace: str, key: str) -> str:
    """The associated data of a v2 value: where it is stored."""
    return "%s\x00%s" % (namespace, key)


def encrypt(key: bytes, plaintext: str, context: str | None = None) -> str:
    """plaintext -> "enc:v1:<base64(nonce || ciphertext || tag)>" (maand's EncryptPlaintext), or with a
    context (place()), "enc:v2:..." sealed with it as associated data."""
    return encrypt_with_nonce(key, plaintext, os.urandom(NONCE_SIZE), context)


def encrypt_with_nonce(key: bytes, plaintext: str, nonce: bytes, context: str | None = None) -> str:
    """encrypt with a given nonce: for test vectors only; a nonce must never be reused."""
    if len(nonce) != NONCE_SIZE:
        raise SecretError("the nonce must be %d bytes" % NONCE_SIZE)
    aad = None if context is None else context.encode("utf-8")
    sealed = AESGCM(_check_key(key)).encrypt(nonce, plaintext.encode("utf-8"), aad)
    return (PREFIX if aad is None else PREFIX_V2) + base64.b64encode(nonce + sealed).decode("ascii")


def decrypt(key: bytes, token: str, context: str | None = None) -> str:
    """A stored "enc:v1:" value -> plaintext (maand's DecryptStoredValue), or an "enc:v2:" value sealed
    with context; SecretError if it is not encrypted, not base64, too short, or fails authentication
    (tampered, another key, or a v2 value moved from another place)."""
    if not is_encrypted(token):
        raise SecretError("the value is not encrypted (no %s prefix)" % PREFIX)
    prefix = PREFIX if token.startswith(PREFIX) else PREFIX_V2
    if prefix == PREFIX_V2 and context is None:
        raise SecretError("an %s value decrypts only at its place (namespace and key)" % PREFIX_V2)
    try:
        raw = base64.b64decode(token[len(prefix):].encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise SecretError("the value is not valid base64 after %s; it was damaged: put the"
                          " secret again" % prefix) from None
    if len(raw) < NONCE_SIZE + 16:
        raise SecretError("the value is too short to be an AES-GCM secret; it was damaged:"
                          " put the secret again")
    aad = context.encode("utf-8") if prefix == PREFIX_V2 else None
    try:
        plain = AESGCM(_check_key(key)).decrypt(raw[:NONCE_SIZE], raw[NONCE_SIZE:], aad)
    except InvalidTag:
        raise SecretError("the value does not decrypt with %s (it was tampered with, moved from another key, or"
                          " the key file was replaced); restore the key file the secret was written"
                          " with, or put the secret again" % KEY_REL) from None
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError("the decrypted value is not UTF-8 text") from None


def _require() -> None:
    """Refuse, naming the fix, when the ``cryptography`` package is not installed on the controller."""
    if CRYPTOGRAPHY_ERROR is not None:
        raise SecretError("secrets need the Python package 'cryptography' on the controller "
                          f"({CRYPTOGRAPHY_ERROR}) (fix: pip install cryptography)")


def _check_key(key: bytes) -> bytes:
    _require()
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_SIZE:
        raise SecretError("an AES-256 key is %d bytes (see %s)" % (KEY_SIZE, KEY_REL))
    return bytes(key)

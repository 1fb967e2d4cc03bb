# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket CA, as maand makes it (maand-sh/maand build/build_certs.go, docs/reference/certs.md).

* the CA: ``<bucket>/secrets/ca.crt`` + ``ca.key`` (PKCS#1 RSA, CN = bucket id, 10 years,
  4096 bits); both present or both absent, else the build refuses (``CertError``, naming file and fix).

The crypto is the ``cryptography`` package (x509 builder, RSA), imported here once for the package
(leaves.py takes its names from this module; ``require_cryptography`` refuses, naming the fix, when it is
missing); nothing here is hand-written crypto. ``KEY_SIZE`` and ``utcnow`` are read at call time by
leaves.py too (tests make keys smaller and move the clock here). No Ansible imports.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import secrets
from dataclasses import dataclass
from typing import Optional, Tuple

from ..bucket import storage
from ..errors import MaandError

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature  # certs/leaves.py takes it from here; pylint: disable=unused-import
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    CRYPTOGRAPHY_ERROR = None
except ImportError as _exc:  # the controller lacks it (ansible-test's import check runs without it)
    x509 = hashes = serialization = rsa = NameOID = None
    CRYPTOGRAPHY_ERROR = _exc

    class InvalidSignature(MaandError):
        """Stands in for cryptography's exception when the package is missing."""


SECRETS_DIR = "secrets"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
CA_TTL_DAYS = 10 * 365
KEY_SIZE = 4096
CA_CERT_REL = os.path.join(SECRETS_DIR, CA_CERT)
CA_KEY_REL = os.path.join(SECRETS_DIR, CA_KEY)


class CertError(MaandError):
    """A corrupt or half-present CA, or a leaf that cannot be made; the message names file and fix."""


def require_cryptography() -> None:
    """Refuse, naming the fix, when the ``cryptography`` package is not installed on the controller."""
    if CRYPTOGRAPHY_ERROR is not None:
        raise CertError("certificates need the Python package 'cryptography' on the controller "
                        f"({CRYPTOGRAPHY_ERROR}) (fix: pip install cryptography)")


@dataclass(frozen=True)
class CA:
    cert: x509.Certificate
    key: rsa.RSAPrivateKey
    cert_pem: str
    digest: str  # md5 of ca.crt as maand hashes it (utils.CalculateFileMD5): a change reissues leaves


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def ca_paths(bucket_dir: str) -> Tuple[str, str]:
    return (os.path.join(bucket_dir, SECRETS_DIR, CA_CERT), os.path.join(bucket_dir, SECRETS_DIR, CA_KEY))


def load_or_create_ca(bucket_dir: str, bucket_id: str, key_size: Optional[int] = None) -> CA:
    """The bucket CA from secrets/; made (both files) when both are absent, refused when one is."""
    require_cryptography()
    cert_path, key_path = ca_paths(bucket_dir)
    have_cert, have_key = os.path.exists(cert_path), os.path.exists(key_path)
    if have_cert != have_key:
        present, missing = (CA_CERT_REL, CA_KEY_REL) if have_cert else (CA_KEY_REL, CA_CERT_REL)
        raise CertError("%s exists but %s is missing: the bucket CA is half present (maand: CA is incomplete); restore %s from"
                        " a backup of the bucket, or move %s away so that the build makes a new CA"
                        " (every leaf certificate is then reissued)"
                        % (present, missing, missing, present))
    if not have_cert:
        _create_ca(cert_path, key_path, bucket_id, key_size or KEY_SIZE)
    return load_ca(bucket_dir)


def load_ca(bucket_dir: str) -> CA:
    require_cryptography()
    cert_path, key_path = ca_paths(bucket_dir)
    cert_bytes = _read(cert_path, CA_CERT_REL)
    key_bytes = _read(key_path, CA_KEY_REL)
    problem = storage.key_mode_problem(key_path, CA_KEY_REL)
    if problem:
        raise CertError(problem)
    cert = _parse_ca_cert(cert_bytes)
    key = _parse_ca_key(key_bytes)
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        raise CertError("%s and %s do not belong together (the certificate's public key is not the"
                        " key's): restore the matching pair from a backup of the bucket, or move both"
                        " away so that the build makes a new CA" % (CA_CERT_REL, CA_KEY_REL))
    return CA(cert=cert, key=key, cert_pem=cert_bytes.decode("ascii", "replace"),
              digest=hashlib.md5(cert_bytes).hexdigest())


def _read(path: str, rel: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CertError("%s is unreadable: %s; fix its permissions (owned by the user running the"
                        " playbook)" % (rel, exc.strerror)) from None


def _parse_ca_cert(data: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertError("%s is corrupt (not a PEM certificate: %s); restore it from a backup of the"
                        " bucket, or move %s and %s away so that the build makes a new CA"
                        % (CA_CERT_REL, exc, CA_CERT_REL, CA_KEY_REL)) from None


def _parse_ca_key(data: bytes) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise CertError("%s is corrupt (not an unencrypted PEM private key: %s); restore it from a"
                        " backup of the bucket, or move %s and %s away so that the build makes a"
                        " new CA" % (CA_KEY_REL, exc, CA_CERT_REL, CA_KEY_REL)) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CertError("%s is not an RSA key (maand's CA key is PKCS#1 RSA); install an RSA CA pair"
                        % CA_KEY_REL)
    return key


def _create_ca(cert_path: str, key_path: str, bucket_id: str, key_size: int) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, bucket_id)])
    now = utcnow()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=CA_TTL_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    os.makedirs(os.path.dirname(cert_path), exist_ok=True)
    _write_new(key_path, key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()), 0o600)
    _write_new(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def _write_new(path: str, data: bytes, mode: int) -> None:
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def serial_number() -> int:
    return secrets.randbits(127) | 1

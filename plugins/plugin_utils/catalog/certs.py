# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket CA and the jobs' leaf certificates, as maand makes them (maand-sh/maand
build/build_certs.go, build/cert_renewal.go, docs/reference/certs.md).

* the CA: ``<bucket>/secrets/ca.crt`` + ``ca.key`` (PKCS#1 RSA, CN = bucket id, 10 years,
  4096 bits); both present or both absent, else the build refuses;
* a leaf: RSA 4096, subject CN from the manifest, IP SANs ``127.0.0.1`` + the worker's IP (or all
  allocated workers' IPs for ``one: true``), ``certs_ttl`` days, KeyUsage digitalSignature +
  keyEncipherment, BasicConstraints CA:false; the key in PKCS#1 (``RSA PRIVATE KEY``) or PKCS#8
  (``PRIVATE KEY``) PEM;
* renewal: ``now >= NotAfter - certs_renewal_buffer days`` (buffer 0: only once expired).

The crypto is the ``cryptography`` package (x509 builder, RSA); nothing here is hand-written
crypto. No Ansible imports.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import secrets as _random
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from ..bucket import storage as _storage

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    CRYPTOGRAPHY_ERROR = None
except ImportError as _exc:  # the controller lacks it (ansible-test's import check runs without it)
    x509 = hashes = serialization = rsa = NameOID = None
    CRYPTOGRAPHY_ERROR = _exc

    class InvalidSignature(Exception):
        """Stands in for cryptography's exception when the package is missing."""


SECRETS_DIR = "secrets"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
CA_TTL_DAYS = 10 * 365
KEY_SIZE = 4096
DEFAULT_TTL_DAYS = 60
LOOPBACK = "127.0.0.1"
CA_CERT_REL = os.path.join(SECRETS_DIR, CA_CERT)
CA_KEY_REL = os.path.join(SECRETS_DIR, CA_KEY)


class CertError(Exception):
    """A corrupt or half-present CA, or a leaf that cannot be made; the message names file and fix."""


def _require() -> None:
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


@dataclass(frozen=True)
class Leaf:
    cert_pem: str
    key_pem: str


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def needs_renewal(not_after: datetime.datetime, buffer_days: int, now: datetime.datetime) -> bool:
    """maand's CertNeedsRenewal: expired, or inside the renewal buffer (buffer <= 0: expired only)."""
    if not_after.tzinfo is None:
        not_after = not_after.replace(tzinfo=datetime.timezone.utc)
    if now >= not_after:
        return True
    if buffer_days <= 0:
        return False
    return now >= not_after - datetime.timedelta(days=buffer_days)


def pem_needs_renewal(cert_pem: Optional[str], buffer_days: int,
                      now: Optional[datetime.datetime] = None) -> bool:
    """Whether a stored leaf must be made again: missing, unreadable, or due for renewal."""
    _require()
    if not cert_pem:
        return True
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return True
    return needs_renewal(cert.not_valid_after_utc, buffer_days, now or _utcnow())


def ttl_days(conf_value) -> int:
    """certs_ttl as maand reads it: unset or 0 means 60 days."""
    return conf_value if isinstance(conf_value, int) and conf_value > 0 else DEFAULT_TTL_DAYS


def ca_paths(bucket_dir: str) -> Tuple[str, str]:
    return (os.path.join(bucket_dir, SECRETS_DIR, CA_CERT), os.path.join(bucket_dir, SECRETS_DIR, CA_KEY))


def load_or_create_ca(bucket_dir: str, bucket_id: str, key_size: Optional[int] = None) -> CA:
    """The bucket CA from secrets/; made (both files) when both are absent, refused when one is."""
    _require()
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
    _require()
    cert_path, key_path = ca_paths(bucket_dir)
    cert_bytes = _read(cert_path, CA_CERT_REL)
    key_bytes = _read(key_path, CA_KEY_REL)
    problem = _storage.key_mode_problem(key_path, CA_KEY_REL)
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
    now = _utcnow()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(_serial())
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


def _serial() -> int:
    return _random.randbits(127) | 1


def issue_leaf(ca: CA, common_name: str, ips: Sequence[str], days: int, pkcs8: bool,
               key_size: Optional[int] = None, now: Optional[datetime.datetime] = None) -> Leaf:
    """A leaf signed by the CA: SANs 127.0.0.1 + ips (in that order, as maand), ``days`` long."""
    _require()
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size or KEY_SIZE)
    start = now or _utcnow()
    sans = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in _san_ips(ips)]
    cert = (x509.CertificateBuilder()
            .subject_name(_subject(common_name))
            .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(_serial())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=True, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(ca.key, hashes.SHA256()))
    fmt = serialization.PrivateFormat.PKCS8 if pkcs8 else serialization.PrivateFormat.TraditionalOpenSSL
    key_pem = key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())
    return Leaf(cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode("ascii"),
                key_pem=key_pem.decode("ascii"))


def _subject(common_name: str) -> x509.Name:
    """CN=common_name, or an empty subject for an empty name (as Go's pkix.Name{})."""
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])


def _san_ips(ips: Sequence[str]) -> list:
    out = [LOOPBACK]
    for ip in ips:
        if ip not in out:
            out.append(ip)
    return out


def leaf_problem(ca: CA, cert_pem: Optional[str], key_pem: Optional[str], common_name: str,
                 ips: Sequence[str], pkcs8: bool, buffer_days: int,
                 now: Optional[datetime.datetime] = None) -> Optional[str]:
    """Why a stored leaf must be issued again (None: keep it): missing, unreadable, not signed by
    the bucket CA (the CA changed), config changed (subject, SANs, key format), or due for renewal."""
    _require()
    if not cert_pem or not key_pem:
        return "missing"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError):
        return "unreadable"
    try:
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "CA changed"
    if not _same_config(cert, key, key_pem, common_name, ips, pkcs8):
        return "config changed"
    if needs_renewal(cert.not_valid_after_utc, buffer_days, now or _utcnow()):
        return "renewal (expires %s)" % cert.not_valid_after_utc.strftime("%Y-%m-%d")
    return None


def _same_config(cert: x509.Certificate, key, key_pem: str, common_name: str, ips: Sequence[str],
                 pkcs8: bool) -> bool:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if (names[0].value if names else "") != common_name:
        return False
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        have = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    except x509.ExtensionNotFound:
        have = set()
    if have != set(_san_ips(ips)):
        return False
    header = "-----BEGIN PRIVATE KEY-----" if pkcs8 else "-----BEGIN RSA PRIVATE KEY-----"
    if not key_pem.lstrip().startswith(header):
        return False
    return key.public_key().public_numbers() == cert.public_key().public_numbers()


@dataclass(frozen=True)
class CertStatus:
    """One row of `maand.core.cat -e maand_cat=certs` (maand certs/catalog.go Metric)."""

    common_name: str
    not_after: str  # UTC, "2026-01-02 03:04:05"
    days_left: str
    status: str  # ok, expiring, expired, invalid
    not_after_seconds: int = 0  # NotAfter as Unix seconds (maand_cert_not_after_seconds); 0 when invalid


def cert_status(cert_pem: Optional[str], buffer_days: int, now: Optional[datetime.datetime] = None) -> CertStatus:
    """maand's metricFromPEM: CN, NotAfter, whole days left (truncated), ok/expiring/expired/invalid."""
    _require()
    try:
        cert = x509.load_pem_x509_certificate((cert_pem or "").encode())
    except ValueError:
        return CertStatus("", "", "", "invalid")
    now = now or _utcnow()
    not_after = cert.not_valid_after_utc
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    days = int((not_after - now).total_seconds() / 86400)
    status = expiry_status(not_after, buffer_days, now)
    return CertStatus(str(names[0].value) if names else "", not_after.strftime("%Y-%m-%d %H:%M:%S"), str(days), status,
                      int(not_after.timestamp()))


def expiry_status(not_after: datetime.datetime, buffer_days: int, now: datetime.datetime) -> str:
    """maand's certExpiryStatus: expired (past NotAfter), expiring (inside the renewal buffer), ok."""
    if now > not_after:
        return "expired"
    return "expiring" if needs_renewal(not_after, buffer_days, now) else "ok"

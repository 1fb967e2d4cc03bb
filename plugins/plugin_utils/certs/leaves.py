# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jobs' leaf certificates, as maand makes and renews them (maand-sh/maand build/build_certs.go,
build/cert_renewal.go, certs/catalog.go, docs/reference/certs.md).

* a leaf: RSA 4096, subject CN from the manifest, IP SANs ``127.0.0.1`` + the worker's IP (or all
  allocated workers' IPs for ``one: true``), ``certs_ttl`` days, KeyUsage digitalSignature +
  keyEncipherment, BasicConstraints CA:false; the key in PKCS#1 (``RSA PRIVATE KEY``) or PKCS#8
  (``PRIVATE KEY``) PEM, signed by the bucket CA (ca.py);
* renewal: ``now >= NotAfter - certs_renewal_buffer days`` (buffer 0: only once expired);
* expiry: a stored certificate's status as ``maand cat certs`` shows it (``cert_status``: ok,
  expiring, expired, invalid).

The crypto is the ``cryptography`` package, through ca.py. No Ansible imports.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Optional, Sequence

from . import ca
from .ca import CA, InvalidSignature, NameOID, hashes, rsa, serialization, x509

DEFAULT_TTL_DAYS = 60
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Leaf:
    cert_pem: str
    key_pem: str


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
    ca.require_cryptography()
    if not cert_pem:
        return True
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return True
    return needs_renewal(cert.not_valid_after_utc, buffer_days, now or ca.utcnow())


def ttl_days(conf_value) -> int:
    """certs_ttl as maand reads it: unset or 0 means 60 days."""
    return conf_value if isinstance(conf_value, int) and conf_value > 0 else DEFAULT_TTL_DAYS


def issue_leaf(authority: CA, common_name: str, ips: Sequence[str], days: int, pkcs8: bool,
               key_size: Optional[int] = None, now: Optional[datetime.datetime] = None) -> Leaf:
    """A leaf signed by the CA: SANs 127.0.0.1 + ips (in that order, as maand), ``days`` long."""
    ca.require_cryptography()
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size or ca.KEY_SIZE)
    start = now or ca.utcnow()
    sans = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in _san_ips(ips)]
    cert = (x509.CertificateBuilder()
            .subject_name(_subject(common_name))
            .issuer_name(authority.cert.subject).public_key(key.public_key()).serial_number(ca.serial_number())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=True, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(authority.key, hashes.SHA256()))
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


def leaf_problem(authority: CA, cert_pem: Optional[str], key_pem: Optional[str], common_name: str,
                 ips: Sequence[str], pkcs8: bool, buffer_days: int,
                 now: Optional[datetime.datetime] = None) -> Optional[str]:
    """Why a stored leaf must be issued again (None: keep it): missing, unreadable, not signed by
    the bucket CA (the CA changed), config changed (subject, SANs, key format), or due for renewal."""
    ca.require_cryptography()
    if not cert_pem or not key_pem:
        return "missing"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError):
        return "unreadable"
    try:
        cert.verify_directly_issued_by(authority.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "CA changed"
    if not _same_config(cert, key, key_pem, common_name, ips, pkcs8):
        return "config changed"
    if needs_renewal(cert.not_valid_after_utc, buffer_days, now or ca.utcnow()):
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
    ca.require_cryptography()
    try:
        cert = x509.load_pem_x509_certificate((cert_pem or "").encode())
    except ValueError:
        return CertStatus("", "", "", "invalid")
    now = now or ca.utcnow()
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

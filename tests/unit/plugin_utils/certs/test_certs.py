"""The bucket CA and leaf certificates (certs/ca.py, certs/leaves.py), against maand's build/build_certs.go and
build/cert_renewal_test.go (TestCertNeedsRenewal's table is taken as it is)."""

from __future__ import annotations

import datetime
import ipaddress
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding

from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs

SMALL = 1024  # maand's own test mode key size; keeps the unit loop fast
NOW = datetime.datetime(2026, 6, 25, 12, 0, 0, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)

# maand build/cert_renewal_test.go TestCertNeedsRenewal: (not_after offset, buffer days, renew?)
RENEWAL_TABLE = [
    (-DAY, 30, True),                          # expired
    (10 * DAY, 30, True),                      # inside the 30-day window
    (90 * DAY, 30, False),                     # outside the window
    (10 * DAY, 0, False),                      # buffer 0: not expired yet
    (-datetime.timedelta(hours=1), 0, True),   # buffer 0: expired
    (59 * DAY, 61, True),                      # buffer > ttl always renews
]


@pytest.mark.parametrize("offset,buffer,renew", RENEWAL_TABLE)
def test_maand_renewal_table(offset, buffer, renew):
    assert _certs.needs_renewal(NOW + offset, buffer, NOW) is renew


@pytest.fixture(scope="module")
def ca_bucket(tmp_path_factory):
    bucket = tmp_path_factory.mktemp("bucket")
    ca = _certs.load_or_create_ca(str(bucket), "bucket-id-1", key_size=SMALL)
    return bucket, ca


def test_ca_made_once_with_maand_shape(ca_bucket):
    bucket, ca = ca_bucket
    key_pem = (bucket / "secrets" / "ca.key").read_text()
    assert key_pem.startswith("-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1, as maand
    assert oct((bucket / "secrets" / "ca.key").stat().st_mode & 0o777) == "0o600"
    assert ca.cert.subject.rfc4514_string() == "CN=bucket-id-1"
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    again = _certs.load_or_create_ca(str(bucket), "other-id", key_size=SMALL)
    assert again.digest == ca.digest  # an existing CA is kept, never remade


def _verify(ca, cert):
    ca.cert.public_key().verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                                cert.signature_hash_algorithm)


@pytest.mark.parametrize("pkcs8,header", [(False, "RSA PRIVATE KEY"), (True, "PRIVATE KEY")])
def test_leaf_verifies_with_sans_and_key_format(ca_bucket, pkcs8, header):
    _x, ca = ca_bucket
    leaf = _certs.issue_leaf(ca, "api.example.com", ["10.0.0.7"], 60, pkcs8, key_size=SMALL, now=NOW)
    cert = x509.load_pem_x509_certificate(leaf.cert_pem.encode())
    _verify(ca, cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"),
                                                        ipaddress.ip_address("10.0.0.7")]
    assert cert.subject.rfc4514_string() == "CN=api.example.com"
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == 60 * DAY
    assert leaf.key_pem.startswith("-----BEGIN %s-----" % header)


def test_pem_renewal_follows_the_buffer(ca_bucket):
    _x, ca = ca_bucket
    leaf = _certs.issue_leaf(ca, "x", ["10.0.0.1"], 60, False, key_size=SMALL, now=NOW)
    assert not _certs.pem_needs_renewal(leaf.cert_pem, 10, NOW + 49 * DAY)
    assert _certs.pem_needs_renewal(leaf.cert_pem, 10, NOW + 50 * DAY)
    assert _certs.pem_needs_renewal(None, 10, NOW)
    assert _certs.pem_needs_renewal("garbage", 10, NOW)


@pytest.mark.parametrize("value,days", [(None, 60), (0, 60), (90, 90), (-1, 60)])
def test_ttl_default(value, days):
    assert _certs.ttl_days(value) == days


@pytest.mark.parametrize("keep", ["ca.crt", "ca.key"])
def test_half_present_ca_refused_and_kept(tmp_path, ca_bucket, keep):
    src, _x = ca_bucket
    (tmp_path / "secrets").mkdir()
    data = (src / "secrets" / keep).read_bytes()
    (tmp_path / "secrets" / keep).write_bytes(data)
    with pytest.raises(_certs.CertError) as err:
        _certs.load_or_create_ca(str(tmp_path), "id", key_size=SMALL)
    assert "half present" in str(err.value) and "secrets/%s" % keep in str(err.value)
    assert sorted(os.listdir(tmp_path / "secrets")) == [keep]
    assert (tmp_path / "secrets" / keep).read_bytes() == data  # nothing lost


@pytest.mark.parametrize("broken,needle", [("ca.crt", "secrets/ca.crt is corrupt"),
                                           ("ca.key", "secrets/ca.key is corrupt")])
def test_corrupt_ca_refused_naming_file(tmp_path, ca_bucket, broken, needle):
    src, _x = ca_bucket
    (tmp_path / "secrets").mkdir()
    for name in ("ca.crt", "ca.key"):
        (tmp_path / "secrets" / name).write_bytes((src / "secrets" / name).read_bytes())
    (tmp_path / "secrets" / broken).write_text("-----BEGIN nonsense\n")
    os.chmod(tmp_path / "secrets" / "ca.key", 0o600)
    with pytest.raises(_certs.CertError, match=needle):
        _certs.load_or_create_ca(str(tmp_path), "id", key_size=SMALL)
    assert (tmp_path / "secrets" / broken).read_text() == "-----BEGIN nonsense\n"


def test_mismatched_ca_pair_refused(tmp_path, ca_bucket):
    src, _x = ca_bucket
    other = tmp_path / "other"
    _certs.load_or_create_ca(str(other), "other", key_size=SMALL)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "ca.crt").write_bytes((src / "secrets" / "ca.crt").read_bytes())
    (tmp_path / "secrets" / "ca.key").write_bytes((other / "secrets" / "ca.key").read_bytes())
    os.chmod(tmp_path / "secrets" / "ca.key", 0o600)
    with pytest.raises(_certs.CertError, match="do not belong together"):
        _certs.load_ca(str(tmp_path))


def test_a_ca_key_others_may_read_is_refused_naming_the_fix(tmp_path, ca_bucket):
    """Issue 21: secrets/ca.key signs every leaf; group or world readable, it is refused."""
    src, _x = ca_bucket
    (tmp_path / "secrets").mkdir()
    for name in ("ca.crt", "ca.key"):
        (tmp_path / "secrets" / name).write_bytes((src / "secrets" / name).read_bytes())
    os.chmod(tmp_path / "secrets" / "ca.key", 0o640)
    with pytest.raises(_certs.CertError, match=r"secrets/ca.key may be read by group or others \(mode 0640\).*chmod 600"):
        _certs.load_ca(str(tmp_path))
    os.chmod(tmp_path / "secrets" / "ca.key", 0o600)
    assert _certs.load_ca(str(tmp_path)).cert_pem.startswith("-----BEGIN CERTIFICATE-----")


# maand certs/catalog_test.go TestCertExpiryStatus
@pytest.mark.parametrize("offset,status", [(-DAY, "expired"), (10 * DAY, "expiring"), (90 * DAY, "ok")])
def test_maand_expiry_status_table(offset, status):
    now = datetime.datetime(2026, 6, 1, 12, tzinfo=datetime.timezone.utc)
    assert _certs.expiry_status(now + offset, 30, now) == status


# maand build/build_certs_test.go: TestWorkerCertNeedsRegeneration_missingKey, TestCertPEMExpiringSoon,
# TestCertPEMExpiringSoon_invalidCertificate, TestCertNeedsRegeneration_expiredWorkerCert (a cert made with ttl -60
# days, buffer 30; here issued 120 days ago for 60), TestWorkerCertNeedsRegeneration_expiringCert (that cert with the
# stored key "KEY"), TestCertNeedsRegeneration_jobRegenerate (the job's cert entry changed: another subject)
def test_maand_regeneration_cases(ca_bucket):
    _x, ca = ca_bucket
    good = _certs.issue_leaf(ca, "api", ["10.0.0.1"], 365, True, key_size=SMALL, now=NOW)
    assert _certs.leaf_problem(ca, good.cert_pem, good.key_pem, "api", ["10.0.0.1"], True, 30, NOW) is None
    assert _certs.leaf_problem(ca, good.cert_pem, None, "api", ["10.0.0.1"], True, 30, NOW) == "missing"
    bad = "-----BEGIN CERTIFICATE-----\nZm9v\n-----END CERTIFICATE-----"
    assert _certs.leaf_problem(ca, bad, good.key_pem, "api", ["10.0.0.1"], True, 30, NOW) == "unreadable"
    assert _certs.pem_needs_renewal(bad, 30, NOW) and _certs.pem_needs_renewal("not-a-pem", 30, NOW)
    expired = _certs.issue_leaf(ca, "api", ["10.0.0.1"], 60, True, key_size=SMALL, now=NOW - 120 * DAY)
    why = _certs.leaf_problem(ca, expired.cert_pem, expired.key_pem, "api", ["10.0.0.1"], True, 30, NOW)
    assert why.startswith("renewal")
    assert _certs.leaf_problem(ca, good.cert_pem, good.key_pem, "api", ["10.0.0.2"], True, 30, NOW) == "config changed"
    assert _certs.leaf_problem(ca, expired.cert_pem, "KEY", "api", ["10.0.0.1"], True, 30, NOW) is not None
    assert _certs.leaf_problem(ca, good.cert_pem, good.key_pem, "api2", ["10.0.0.1"], True, 30, NOW) == "config changed"


def test_is_cert_expiring_soon_as_maand(ca_bucket):
    """build/build_certs_test.go TestIsCertExpiringSoon: a 365-day cert is not expiring inside a 30-day buffer; one
    that expired 60 days ago is."""
    _x, ca = ca_bucket
    fresh = _certs.issue_leaf(ca, "test", ["10.0.0.1"], 365, True, key_size=SMALL, now=NOW)
    expired = _certs.issue_leaf(ca, "test", ["10.0.0.1"], 60, True, key_size=SMALL, now=NOW - 120 * DAY)
    assert not _certs.pem_needs_renewal(fresh.cert_pem, 30, NOW)
    assert _certs.pem_needs_renewal(expired.cert_pem, 30, NOW)


@pytest.mark.parametrize("source, pkcs8, block", [("TestGenerateCert_pkcs8", True, "PRIVATE KEY"),
                                                  ("TestGenerateCert_pkcs1", False, "RSA PRIVATE KEY")])
def test_generate_cert_key_format_as_maand(ca_bucket, source, pkcs8, block):
    """build/build_certs_test.go: GenerateCert(dir, "tls", CN test, [10.0.0.1], 30 days, pkcs8) writes a key whose
    PEM block is PRIVATE KEY (PKCS#8) or RSA PRIVATE KEY (PKCS#1). maand also writes it 0600 at build; here the
    key file is written by the deploy's staging, 0600 (test_certs_build.py test_overlays_stage_key_0600)."""
    _x, ca = ca_bucket
    leaf = _certs.issue_leaf(ca, "test", ["10.0.0.1"], 30, pkcs8, key_size=SMALL, now=NOW)
    assert leaf.key_pem.splitlines()[0] == "-----BEGIN %s-----" % block, source

"""Build issues, keeps, renews and drops the jobs' leaf certificates as maand's build/build_certs.go
and docs/reference/certs.md say; deploy stages them (certs/<name>.key 0600); bad CA files refuse
the build naming the file, with nothing written."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import stat

import pytest
from cryptography import x509

from ansible_collections.maand.core.plugins.plugin_utils.deploy import certs as _deploy_certs
from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.certs import ca as _ca
from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws

# docs/reference/certs.md "Job manifest (certs)" example, as it is
DOC_CERTS = {"tls": {"pkcs8": False, "one": False, "subject": {"common_name": "api.internal"}},
             "client": {"pkcs8": True, "one": True, "subject": {"common_name": "api-cluster"}}}
HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


@pytest.fixture(autouse=True)
def small_keys(monkeypatch):
    monkeypatch.setattr(_ca, "KEY_SIZE", 1024)  # maand's test-mode size: keeps the loop fast


def bucket(tmp_path, certs=None, disabled=None, conf=""):
    root = init_bucket(tmp_path)
    if conf:
        with open(os.path.join(root, "maand.conf"), "a", encoding="utf-8") as handle:
            handle.write(conf)
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in HOSTS])
    job(root, "api", {"selectors": ["worker"], "certs": DOC_CERTS if certs is None else certs})
    if disabled:
        ws(root, "disabled.json", {"jobs": {"api": {"allocations": disabled}}})
    return root


def build_ok(root, allow_remove_all=False):
    result = _service.build(root, allow_remove_all=allow_remove_all)
    assert result.report.ok, result.report.error_text()
    return result


def kv(root):
    return _store.KVStore.load(root).snapshot()


def cert_of(snap, host, name):
    ns = snap["maand/job/api/worker/%s" % host]
    return x509.load_pem_x509_certificate(ns["certs/%s.crt" % name].encode()), ns["certs/%s.key" % name]


def sans(cert):
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]


def test_doc_example_per_worker_and_shared(tmp_path):
    root = bucket(tmp_path)
    result = build_ok(root)
    ca = _certs.load_ca(root)
    snap = kv(root)
    assert snap["maand/worker"]["certs/ca.crt"] == ca.cert_pem.strip()  # maand's Store.Put trims
    tls = {}
    for host in HOSTS:
        cert, key = cert_of(snap, host, "tls")
        cert.verify_directly_issued_by(ca.cert)
        assert sans(cert) == ["127.0.0.1", host]
        assert cert.subject.rfc4514_string() == "CN=api.internal"
        assert key.startswith("-----BEGIN RSA PRIVATE KEY-----")
        tls[host] = key
        shared, shared_key = cert_of(snap, host, "client")
        shared.verify_directly_issued_by(ca.cert)
        assert sans(shared) == ["127.0.0.1"] + HOSTS
        assert shared_key.startswith("-----BEGIN PRIVATE KEY-----")
        ns = snap["maand/job/api/worker/%s" % host]
        bid = _catalog.read_catalog(root)["bucket_id"]
        assert ns["certs/tls.key_path"] == "/opt/worker/%s/jobs/api/certs/tls.key" % bid
        assert ns["certs/ca.crt_path"] == "/opt/worker/%s/jobs/api/certs/ca.crt" % bid
    assert len(set(tls.values())) == 3  # one key pair per allocation
    assert len({cert_of(snap, h, "client")[1] for h in HOSTS}) == 1  # one: true shares one pair
    assert any("6 leaf certificates issued" in line for line in result.changes)


def test_rebuild_keeps_everything(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    before = kv(root)
    again = build_ok(root)
    assert kv(root) == before and not again.changed


def test_subject_change_reissues_only_that_cert(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    before = kv(root)
    certs = json.loads(json.dumps(DOC_CERTS))
    certs["tls"]["subject"]["common_name"] = "api2.internal"
    job(root, "api", {"selectors": ["worker"], "certs": certs})
    result = build_ok(root)
    after = kv(root)
    for host in HOSTS:
        ns_b, ns_a = before["maand/job/api/worker/%s" % host], after["maand/job/api/worker/%s" % host]
        assert ns_a["certs/tls.key"] != ns_b["certs/tls.key"]
        assert ns_a["certs/client.key"] == ns_b["certs/client.key"]
    assert any("config changed" in line for line in result.changes)


def test_pkcs8_switch_reissues(tmp_path):
    root = bucket(tmp_path, certs={"tls": {"subject": {"common_name": "a"}}})
    build_ok(root)
    job(root, "api", {"selectors": ["worker"], "certs": {"tls": {"pkcs8": True, "subject": {"common_name": "a"}}}})
    build_ok(root)
    assert cert_of(kv(root), HOSTS[0], "tls")[1].startswith("-----BEGIN PRIVATE KEY-----")


def test_new_ca_reissues_every_leaf(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    for name in ("ca.crt", "ca.key"):
        os.rename(os.path.join(root, "secrets", name), os.path.join(root, "secrets", name + ".old"))
    result = build_ok(root)
    ca = _certs.load_ca(root)
    for host in HOSTS:
        cert_of(kv(root), host, "tls")[0].verify_directly_issued_by(ca.cert)
    assert any("CA changed" in line for line in result.changes)


def test_renewal_inside_the_buffer(tmp_path, monkeypatch):
    root = bucket(tmp_path, certs={"tls": {"subject": {"common_name": "a"}}},
                  conf="")  # maand init's maand.conf: certs_ttl = 60, certs_renewal_buffer = 0
    with open(os.path.join(root, "maand.conf"), "w", encoding="utf-8") as handle:
        handle.write('ssh_user = "agent"\nssh_key = "worker.key"\ncerts_ttl = 60\ncerts_renewal_buffer = 10\n')
    build_ok(root)
    first = cert_of(kv(root), HOSTS[0], "tls")[0]
    real = _ca.utcnow
    monkeypatch.setattr(_ca, "utcnow", lambda: real() + datetime.timedelta(days=49))
    build_ok(root)
    assert cert_of(kv(root), HOSTS[0], "tls")[0].serial_number == first.serial_number  # outside the buffer
    monkeypatch.setattr(_ca, "utcnow", lambda: real() + datetime.timedelta(days=50, minutes=1))
    result = build_ok(root)
    renewed = cert_of(kv(root), HOSTS[0], "tls")[0]
    assert renewed.serial_number != first.serial_number and any("renewal" in line for line in result.changes)


def test_disabled_allocations_still_get_certs(tmp_path):
    root = bucket(tmp_path, disabled=[HOSTS[1]])
    build_ok(root)
    cert, _x = cert_of(kv(root), HOSTS[1], "tls")
    assert sans(cert) == ["127.0.0.1", HOSTS[1]]


def test_removing_the_certs_block_drops_the_keys(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    job(root, "api", {"selectors": ["worker"]})
    build_ok(root)
    ns = kv(root)["maand/job/api/worker/%s" % HOSTS[0]]
    assert not [k for k in ns if k.startswith("certs/")]
    assert os.path.isfile(os.path.join(root, "secrets", "ca.key"))  # the CA is kept


def test_no_certs_no_ca(tmp_path):
    root = bucket(tmp_path, certs={})
    build_ok(root)
    assert not os.path.exists(os.path.join(root, "secrets", "ca.crt"))


@pytest.mark.parametrize("drop", ["ca.crt", "ca.key"])
def test_half_present_ca_refuses_and_writes_nothing(tmp_path, drop):
    root = bucket(tmp_path)
    build_ok(root)
    catalog_before = _catalog.read_catalog(root)
    kv_before = kv(root)
    job(root, "api", {"selectors": ["worker"], "version": "2", "certs": DOC_CERTS})
    os.remove(os.path.join(root, "secrets", drop))
    result = _service.build(root)
    assert not result.report.ok and not result.written
    text = result.report.error_text()
    assert "secrets/%s is missing" % drop in text and "half present" in text
    assert _catalog.read_catalog(root) == catalog_before and kv(root) == kv_before


def test_corrupt_ca_refuses_in_check_mode_too(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    with open(os.path.join(root, "secrets", "ca.crt"), "w", encoding="utf-8") as handle:
        handle.write("not a cert")
    result = _service.build(root, check_mode=True)
    assert "secrets/ca.crt is corrupt" in result.report.error_text()


@pytest.mark.parametrize("certs,field,words", [
    ({"ca": {"subject": {"common_name": "x"}}}, "certs.ca", "ca.crt is the bucket CA"),
    ({"a/b": {}}, "certs.a/b", "cannot be a file name"),
    ({"t": {"pkcs8": "yes"}}, "certs.t.pkcs8", "expected true or false"),
    ({"t": {"subject": {"common_name": 7}}}, "certs.t.subject.common_name", "expected a string"),
    ({"t": {"subject": {"common_name": "x" * 65}}}, "certs.t.subject.common_name", "at most 64"),
])
def test_bad_cert_entries(tmp_path, certs, field, words):
    root = bucket(tmp_path, certs=certs)
    result = _service.compute(root)
    errors = [e for e in result.report.errors if e.field == field]
    assert errors and words in str(errors[0]), result.report.error_text()


def test_missing_common_name_warns(tmp_path):
    root = bucket(tmp_path, certs={"t": {}})
    result = build_ok(root)
    assert any(w.field == "certs.t.subject.common_name" for w in result.report.warnings)
    cert, _x = cert_of(kv(root), HOSTS[0], "t")
    assert cert.subject.rfc4514_string() == ""


def test_overlays_stage_key_0600(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    catalog = _catalog.read_catalog(root)
    provide = _deploy_certs.overlay_provider(root, catalog)
    files = {o.rel: o for o in provide("api", HOSTS[0])}
    assert sorted(files) == ["certs/ca.crt", "certs/client.crt", "certs/client.key", "certs/tls.crt", "certs/tls.key"]
    assert files["certs/tls.key"].private and not files["certs/tls.crt"].private
    staging = _stage.compute(root, catalog, ["api"], [HOSTS[0]], overlays=[provide])
    assert not staging.errors, staging.errors
    content = staging.allocations[("api", HOSTS[0])]
    source = staging.sources["api"]
    dest = os.path.join(str(tmp_path), "stage")
    _stage.write_stage(dest, source, content)

    def mode(rel):
        return stat.S_IMODE(os.stat(os.path.join(dest, rel)).st_mode)

    assert mode("certs/tls.key") == 0o600 and mode("certs/client.key") == 0o600
    assert mode("certs/tls.crt") == 0o644 and mode("certs/ca.crt") == 0o644
    other = _stage.compute(root, catalog, ["api"], [HOSTS[1]], overlays=[provide])
    assert other.allocations[("api", HOSTS[1])].hash != content.hash  # its own leaf: its own tree hash


def test_overlay_missing_cert_is_a_plan_error(tmp_path):
    root = bucket(tmp_path)
    build_ok(root)
    catalog = _catalog.read_catalog(root)
    path = os.path.join(root, "data", "kv.json")
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    del doc["namespaces"]["maand/job/api/worker/%s" % HOSTS[0]]["certs/tls.crt"]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
    provide = _deploy_certs.overlay_provider(root, catalog)
    staging = _stage.compute(root, catalog, ["api"], [HOSTS[0]], overlays=[provide])
    assert staging.errors and "certificate tls is not in data/kv.json" in staging.errors[0]
    assert "maand.core.build" in staging.errors[0]


def test_ip_sans_are_ip_addresses(tmp_path):
    root = bucket(tmp_path, certs={"t": {"subject": {"common_name": "x"}}})
    build_ok(root)
    cert, _x = cert_of(kv(root), HOSTS[2], "t")
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ext.get_values_for_type(x509.IPAddress)[1] == ipaddress.ip_address(HOSTS[2])


def test_cat_certs_view_as_maand(tmp_path, monkeypatch):
    from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat

    root = bucket(tmp_path, certs={"tls": {"subject": {"common_name": "api.internal"}}},
                  conf="")
    with open(os.path.join(root, "maand.conf"), "w", encoding="utf-8") as handle:
        handle.write('ssh_user = "agent"\nssh_key = "worker.key"\ncerts_ttl = 60\ncerts_renewal_buffer = 10\n')
    build_ok(root)
    rows = _cat.cat(root, _cat.Request(view="certs")).as_dicts()
    assert [(r["scope"], r["job"], r["worker"], r["cert"]) for r in rows] == [("ca", "-", "-", "ca")] + [
        ("job", "api", h, "tls") for h in HOSTS]
    assert rows[1]["common_name"] == "api.internal" and rows[1]["status"] == "ok" and rows[1]["days_left"] == "59"
    real = _ca.utcnow
    monkeypatch.setattr(_ca, "utcnow", lambda: real() + datetime.timedelta(days=55))
    rows = _cat.cat(root, _cat.Request(view="certs", workers=(HOSTS[0],))).as_dicts()
    assert [(r["worker"], r["status"], r["days_left"]) for r in rows] == [(HOSTS[0], "expiring", "4")]
    monkeypatch.setattr(_ca, "utcnow", lambda: real() + datetime.timedelta(days=61))
    assert _cat.cat(root, _cat.Request(view="certs", jobs=("api",))).as_dicts()[0]["status"] == "expired"


def test_all_allocations_removed_purges_cert_keys(tmp_path):
    """maand build/build_certs_test.go TestBuildCerts_purgesCertKVWhenAllAllocationsRemoved."""
    root = bucket(tmp_path, certs={"tls": {"pkcs8": True, "subject": {"common_name": "api"}}})
    build_ok(root)
    job(root, "api", {"selectors": ["nowhere"], "certs": {"tls": {"pkcs8": True, "subject": {"common_name": "api"}}}})
    build_ok(root, allow_remove_all=True)  # maand builds it; here the ErrRemoveAll guard is told so
    snap = kv(root)
    for host in HOSTS:
        assert not [k for k in snap.get("maand/job/api/worker/%s" % host, {}) if k.startswith("certs/")]

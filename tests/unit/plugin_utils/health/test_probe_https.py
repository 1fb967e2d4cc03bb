"""https health probes verify the server's certificate against the bucket CA (issue 21 item 5): a real TLS
server on loopback with a leaf issued by the bucket's CA (certs/ca.py, certs/leaves.py, as build issues the jobs' certs)
passes; one issued by another CA fails with a hint, unless the check says "insecure": true, which build
accepts only on an https probe."""

from __future__ import annotations

import http.server
import ssl
import threading

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import gate as _gate
from ansible_collections.maand.core.plugins.plugin_utils.ops import health_check as _health_check
from tests.maand_init import init_bucket, job, ws

KEY_SIZE = 2048  # the bucket's own are 4096; smaller keys keep the test fast


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the handler's API
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A bucket with its CA, and a leaf of that CA and one of a stranger's CA (both for 127.0.0.1)."""
    bucket = tmp_path_factory.mktemp("bucket")
    ca = _certs.load_or_create_ca(str(bucket), "bucket-1", key_size=KEY_SIZE)
    stranger = _certs.load_or_create_ca(str(tmp_path_factory.mktemp("stranger")), "other", key_size=KEY_SIZE)
    files = {}
    for name, issuer in (("ours", ca), ("theirs", stranger)):
        leaf = _certs.issue_leaf(issuer, "api", ["127.0.0.1"], 30, False, key_size=KEY_SIZE)
        cert, key = bucket / (name + ".crt"), bucket / (name + ".key")
        cert.write_text(leaf.cert_pem)
        key.write_text(leaf.key_pem)
        files[name] = (str(cert), str(key))
    return bucket, files


@pytest.fixture(scope="module")
def servers(pki):
    """{"ours" | "theirs": port} of two TLS servers answering GET /health with 200."""
    dummy, files = pki
    ports, running = {}, []
    for name, (cert, key) in files.items():
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        ports[name] = server.server_address[1]
        running.append(server)
    yield ports
    for server in running:
        server.shutdown()
        server.server_close()


def check(port, **extra):
    return dict({"type": "http", "scheme": "https", "port": port, "path": "/health", "expect_status": 200}, **extra)


def test_a_leaf_of_the_bucket_ca_passes(pki, servers):
    bucket, dummy = pki
    assert health.probe("127.0.0.1", check(servers["ours"]), 5, trust=health.Trust.for_bucket(str(bucket))) is None


def test_a_leaf_of_another_ca_fails_with_the_reason_and_the_fix(pki, servers):
    bucket, dummy = pki
    err = health.probe("127.0.0.1", check(servers["theirs"]), 5, trust=health.Trust.for_bucket(str(bucket)))
    assert err.startswith("https 127.0.0.1:%d: " % servers["theirs"]) and "unable to get local issuer certificate" in err
    assert "the bucket CA (secrets/ca.crt)" in err and '"insecure": true' in err


def test_without_the_bucket_ca_even_its_own_leaf_is_not_trusted(pki, servers):
    err = health.probe("127.0.0.1", check(servers["ours"]), 5)  # no bucket: the system's CAs only
    assert err is not None and "this bucket has no CA" in err


def test_insecure_skips_the_certificate_check(pki, servers):
    bucket, dummy = pki
    assert health.probe("127.0.0.1", check(servers["theirs"], insecure=True), 5, trust=health.Trust.for_bucket(str(bucket))) is None


def test_the_health_check_verb_and_the_gate_trust_the_same(pki, servers):
    bucket, dummy = pki
    trust = health.Trust.for_bucket(str(bucket))
    plans = [_health_check.JobPlan("api", ["h1"], [check(servers["ours"]), check(servers["theirs"])], [])]
    out = _health_check.run(plans, {}, lambda h, a, c, t: health.probe("127.0.0.1", c, t, trust=trust))
    assert [(x.what, x.ok) for x in out.lines] == [("https :%d/health" % servers["ours"], True),
                                                   ("https :%d/health" % servers["theirs"], False)]
    gate = {"job": "api", "hosts": ["h1"], "checks": [check(servers["ours"])], "attempts": 1, "interval_seconds": 0,
            "timeout_seconds": 5}
    assert _gate.run_gate(gate, {"h1": "127.0.0.1"}, probe_fn=health.prober(trust=trust)) == []
    assert _gate.run_gate(dict(gate, checks=[check(servers["theirs"])]), {"h1": "127.0.0.1"},
                          probe_fn=health.prober(trust=trust))[0].startswith("h1: https 127.0.0.1:")


# --- "insecure" at build -------------------------------------------------------------------------------

def build(tmp_path, probe):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["app"]}]')
    job(root, "app", {"selectors": ["app"], "resources": {"ports": {"api_port": {}}},
                      "health_check": {"checks": [dict({"port": "api_port"}, **probe)]}})
    result = _service.compute(root)
    return result, [(p.field, str(p)) for p in result.report.errors]


def test_insecure_on_an_https_probe_builds_into_the_gate(tmp_path):
    result, errors = build(tmp_path, {"type": "http", "scheme": "https", "insecure": True})
    assert errors == [] and not [str(w) for w in result.report.warnings if "insecure" in str(w)]  # a known field
    gate = next(j for j in result.catalog["jobs"] if j["name"] == "app")["health_gate"]
    assert gate["checks"][0]["insecure"] is True
    result, errors = build(tmp_path / "verified", {"type": "http", "scheme": "https", "insecure": False})
    assert errors == [] and "insecure" not in next(j for j in result.catalog["jobs"] if j["name"] == "app")["health_gate"]["checks"][0]


@pytest.mark.parametrize("probe, words", [
    ({"type": "http", "insecure": True}, "only to an http probe with \"scheme\": \"https\" (this is a plain http probe)"),
    ({"type": "tcp", "insecure": True}, "(this is a tcp probe)"),
    ({"type": "http", "scheme": "https", "insecure": "yes"}, 'expected true or false, got "yes"'),
])
def test_insecure_anywhere_else_is_refused_naming_the_field(tmp_path, probe, words):
    dummy, errors = build(tmp_path, probe)
    assert [f for f, dummy_text in errors] == ["health_check.checks[0].insecure"], errors
    assert words in errors[0][1]


def test_insecure_on_an_ssh_probe_is_refused(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["app"]}]')
    job(root, "app", {"selectors": ["app"], "health_check": {"checks": [{"type": "ssh", "command": "true", "insecure": True}]}})
    errors = [(p.field, str(p)) for p in _service.compute(root).report.errors]
    assert [f for f, dummy in errors] == ["health_check.checks[0].insecure"] and "(this is an ssh probe)" in errors[0][1]

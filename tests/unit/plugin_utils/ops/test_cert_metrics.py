"""maand's certificate expiry metrics (ops/cert_metrics.py) against maand's certs/push.go and its
certs/push_test.go cases (TestRemoteWriteMetrics, ...BasicAuth, ...Retries503, ...DoesNotRetry400), on a real
local HTTP receiver; the wire format against the protobuf encoding rules, written out by hand."""

from __future__ import annotations

import base64
import datetime
import http.server
import struct
import sys
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.ops import cert_metrics as _cert_metrics
from tests.maand_init import init_bucket, ws

cramjam = pytest.importorskip("cramjam")
pytest.importorskip("google.protobuf")

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)  # maand's TestRemoteWriteMetrics
DAY = datetime.timedelta(days=1)


def pem(common_name, not_after, not_before=None):
    """A small EC certificate (the metrics read only CN and NotAfter)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(not_before or not_after - datetime.timedelta(days=400))
            .not_valid_after(not_after).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# --- the receiver ---------------------------------------------------------------------------------

class Receiver:
    """A real HTTP server on 127.0.0.1 answering statuses in turn (the last one repeats), keeping requests."""

    def __init__(self, statuses=(204,), body=b""):
        self.statuses, self.body, self.requests = list(statuses), body, []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                data = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.command, self.path, dict(self.headers), data))
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", str(len(receiver.body) if status >= 300 else 0))
                self.end_headers()
                if status >= 300:
                    self.wfile.write(receiver.body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/api/v1/write" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def receiver():
    made = []

    def make(statuses=(204,), body=b""):
        made.append(Receiver(statuses, body))
        return made[-1]
    yield make
    for r in made:
        r.close()


OK_METRIC = _cert_metrics.Metric("job", "api", "10.0.0.1", "tls", "api.internal", int(NOT_AFTER.timestamp()), "ok")


def test_remote_write_metrics_as_maands_test(receiver):
    """TestRemoteWriteMetrics: a POST of protobuf + snappy, 3 series, not_after and two zero flags."""
    rx = receiver()
    body = _cert_metrics.encode(_cert_metrics.series([OK_METRIC], 1_700_000_000_000))
    assert _cert_metrics.send_with_retry(_cert_metrics.Target(rx.url), body, log=pytest.fail) == 1
    (method, path, headers, data), = rx.requests
    assert (method, path) == ("POST", "/api/v1/write")
    assert headers["Content-Type"] == "application/x-protobuf" and headers["Content-Encoding"] == "snappy"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0" and "Authorization" not in headers
    got = _cert_metrics.decode(data)
    assert len(got) == 3 and all(s.timestamp_ms == 1_700_000_000_000 for s in got)
    assert {s.name: s.value for s in got} == {_cert_metrics.METRIC_NOT_AFTER: float(NOT_AFTER.timestamp()),
                                              _cert_metrics.METRIC_EXPIRING: 0.0, _cert_metrics.METRIC_EXPIRED: 0.0}


def test_basic_auth_as_maands_test(receiver):
    rx = receiver()
    _cert_metrics.send_with_retry(_cert_metrics.Target(rx.url, "promadmin", "s3cret"), _cert_metrics.encode(_cert_metrics.series([OK_METRIC], 1)), log=print)
    auth = rx.requests[0][2]["Authorization"]
    assert auth.startswith("Basic ") and base64.b64decode(auth[6:]) == b"promadmin:s3cret"


def test_a_503_is_tried_again_as_maand(receiver):
    """TestRemoteWriteMetricsRetries503: two 503s, then accepted on attempt 3; the waits double."""
    rx = receiver([503, 503, 204], b"Service Unavailable")
    waits, lines = [], []
    attempt = _cert_metrics.send_with_retry(_cert_metrics.Target(rx.url), _cert_metrics.encode(_cert_metrics.series([OK_METRIC], 1)), lines.append,
                                 sleep=waits.append, attempts=4)
    assert attempt == 3 and len(rx.requests) == 3 and waits == [2.0, 4.0]
    assert lines[0] == ("cert metrics: attempt 1/4 failed: remote write status 503 Service Unavailable:"
                        " Service Unavailable; retrying in 2s")
    assert lines[-1] == "cert metrics: push succeeded on attempt 3/4"


def test_a_400_is_not_tried_again_as_maand(receiver):
    """TestRemoteWriteMetricsDoesNotRetry400: one attempt, the status in the error."""
    rx = receiver([400], b"bad request")
    with pytest.raises(_cert_metrics.RemoteWriteError) as err:
        _cert_metrics.send_with_retry(_cert_metrics.Target(rx.url), b"x", pytest.fail, sleep=pytest.fail)
    assert len(rx.requests) == 1 and err.value.status == 400
    assert str(err.value) == "remote write status 400 Bad Request: bad request"


def test_network_errors_are_tried_every_attempt_with_the_wait_capped():
    closed = Receiver()
    url = closed.url
    closed.close()  # nothing listens there any more: connection refused
    waits, lines = [], []
    with pytest.raises(_cert_metrics.CertMetricsError, match="remote write request: .*refused"):
        _cert_metrics.send_with_retry(_cert_metrics.Target(url), b"x", lines.append, sleep=waits.append, attempts=6)
    assert waits == [2.0, 4.0, 8.0, 15.0, 15.0] and len(lines) == 5


# --- the wire format ------------------------------------------------------------------------------

def _field(number, wire, payload):
    return bytes([number << 3 | wire]) + payload


def _bytes(number, data):
    assert len(data) < 128  # one-byte lengths keep the hand encoding short
    return _field(number, 2, bytes([len(data)]) + data)


def test_the_body_is_a_snappy_block_of_prompbs_write_request_byte_for_byte():
    """WriteRequest{timeseries: [{labels: [{__name__, m}, {a, b}], samples: [{1.5, 5}]}]} by the proto3 rules
    (types.proto, remote.proto): field 1 (length-delimited) ... the double little-endian, the int64 a varint."""
    label1 = _bytes(1, b"__name__") + _bytes(2, b"m")
    label2 = _bytes(1, b"a") + _bytes(2, b"b")
    sample = _field(1, 1, struct.pack("<d", 1.5)) + _field(2, 0, b"\x05")
    series = _bytes(1, label1) + _bytes(1, label2) + _bytes(2, sample)
    want = _bytes(1, series)
    body = _cert_metrics.encode([_cert_metrics.Series((("__name__", "m"), ("a", "b")), 1.5, 5)])
    assert body[0] == len(want)  # a snappy block starts with the uncompressed length (a varint), no stream frame
    assert bytes(cramjam.snappy.decompress_raw(body)) == want


labels = st.dictionaries(st.sampled_from(["__name__", "job", "worker", "cert", "status", "a_b", "x"]),
                         st.text(min_size=1, max_size=20), max_size=5)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(labels, st.floats(allow_nan=False), st.integers(-2**62, 2**62)), max_size=8))
def test_decode_gives_back_what_encode_wrote(items):
    series = [_cert_metrics.Series(tuple(sorted(d.items())), value, ts) for d, value, ts in items]
    assert _cert_metrics.decode(_cert_metrics.encode(series)) == series


def test_missing_libraries_are_named_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "cramjam", None)  # import cramjam raises ImportError
    with pytest.raises(_cert_metrics.MissingLibrary) as err:
        _cert_metrics.encode([])
    assert "protobuf and cramjam" in str(err.value) and _cert_metrics.INSTALL in str(err.value)


# --- the series (certs/push.go remoteWriteMetrics, metricLabels) ----------------------------------

def test_series_per_status_as_maand():
    metrics = [OK_METRIC,
               _cert_metrics.Metric("job", "api", "10.0.0.2", "tls", "api.internal", 100, "expiring"),
               _cert_metrics.Metric("job", "api", "10.0.0.3", "tls", "api.internal", 100, "expired"),
               _cert_metrics.Metric("ca", "", "", "ca", "", 0, "invalid")]
    got = _cert_metrics.series(metrics, 42)
    by = {(dict(s.labels).get("worker", "-"), s.name): s.value for s in got}
    assert by == {("10.0.0.1", _cert_metrics.METRIC_NOT_AFTER): float(NOT_AFTER.timestamp()),
                  ("10.0.0.1", _cert_metrics.METRIC_EXPIRING): 0.0, ("10.0.0.1", _cert_metrics.METRIC_EXPIRED): 0.0,
                  ("10.0.0.2", _cert_metrics.METRIC_NOT_AFTER): 100.0, ("10.0.0.2", _cert_metrics.METRIC_EXPIRING): 1.0,
                  ("10.0.0.2", _cert_metrics.METRIC_EXPIRED): 0.0,
                  ("10.0.0.3", _cert_metrics.METRIC_NOT_AFTER): 100.0, ("10.0.0.3", _cert_metrics.METRIC_EXPIRING): 0.0,
                  ("10.0.0.3", _cert_metrics.METRIC_EXPIRED): 1.0,
                  ("-", _cert_metrics.METRIC_EXPIRING): 0.0, ("-", _cert_metrics.METRIC_EXPIRED): 0.0}  # invalid: no not_after
    assert got[0].labels == (("__name__", _cert_metrics.METRIC_NOT_AFTER), ("cert", "tls"), ("common_name", "api.internal"),
                             ("job", "api"), ("scope", "job"), ("status", "ok"), ("worker", "10.0.0.1"))
    assert got[-1].labels == (("__name__", _cert_metrics.METRIC_EXPIRED), ("cert", "ca"), ("scope", "ca"), ("status", "invalid"))


def test_list_metrics_reads_the_ca_and_the_job_leaves_as_maand(tmp_path):
    root = init_bucket(tmp_path)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "ca.crt").write_text(pem("bucket-1", NOW + datetime.timedelta(days=3650)))
    kv = {"maand/job/api/worker/10.0.0.2": {"certs/tls.crt": pem("api.internal", NOW + datetime.timedelta(days=5)),
                                            "certs/tls.key": "not a cert", "certs/tls.crt_path": "x"},
          "maand/job/api/worker/10.0.0.1": {"certs/tls.crt": "garbage", "certs/b.crt": pem("", NOW - 3 * DAY)},
          "maand/job/api": {"certs/tls.crt": pem("ignored", NOW)},  # not a worker namespace
          "maand/worker": {"certs/ca.crt": pem("ignored", NOW)}}
    got = _cert_metrics.list_metrics(root, kv, 10, NOW)
    assert [(m.scope, m.job, m.worker, m.cert, m.common_name, m.status) for m in got] == [
        ("ca", "", "", "ca", "bucket-1", "ok"),
        ("job", "api", "10.0.0.1", "b", "", "expired"),
        ("job", "api", "10.0.0.1", "tls", "", "invalid"),
        ("job", "api", "10.0.0.2", "tls", "api.internal", "expiring")]
    assert got[1].not_after == int((NOW - 3 * DAY).timestamp()) and got[2].not_after == 0
    assert [m.status for m in _cert_metrics.list_metrics(root, kv, 0, NOW)][-1] == "ok"  # buffer 0: expired only


# --- the target and the whole push ------------------------------------------------------------------

def server_bucket(tmp_path, allocations, ports=None, server_file="prometheus.yml.tpl"):
    root = init_bucket(tmp_path)
    ws(root, "jobs/prometheus/manifest.json", {})
    if server_file:
        ws(root, "jobs/prometheus/" + server_file, "global: {}\n")
    catalog = {"jobs": [{"name": "prometheus", "ports": {"prometheus_port_http": 9090} if ports is None else ports}],
               "allocations": [{"job": "prometheus", "worker": host, "state": state} for host, state in allocations]}
    return root, catalog


@pytest.mark.parametrize("allocations, server_file, url, why", [
    ([("10.0.0.9", "active"), ("10.0.0.10", "disabled")], "prometheus.yml.tpl",
     "http://10.0.0.10:9090/api/v1/write", ""),  # maand: ORDER BY worker_ip (text), disabled counts
    ([("10.0.0.1", "removed"), ("10.0.0.2", "active")], "prometheus.yml", "http://10.0.0.2:9090/api/v1/write", ""),
    ([("10.0.0.1", "removed")], "prometheus.yml", "", "the prometheus job has no allocation"),
    ([("10.0.0.1", "active")], None, "", "no job named prometheus ships prometheus.yml or prometheus.yml.tpl"),
    ([("fd00::1", "active")], "prometheus.yml", "http://[fd00::1]:9090/api/v1/write", ""),
])
def test_discover_as_maand(tmp_path, allocations, server_file, url, why):
    root, catalog = server_bucket(tmp_path, allocations, server_file=server_file)
    assert _cert_metrics.discover(root, catalog) == (url, why)


def test_a_server_job_without_its_port_is_an_error_naming_it(tmp_path):
    root, catalog = server_bucket(tmp_path, [("10.0.0.1", "active")], ports={})
    with pytest.raises(_cert_metrics.CertMetricsError, match="job prometheus has no port prometheus_port_http"):
        _cert_metrics.discover(root, catalog)


class Secrets:
    def __init__(self, values):
        self.values = values

    def get(self, namespace, key, reveal_secrets=False):
        assert namespace == "secrets/job/prometheus" and reveal_secrets
        return self.values.get(key)


def test_credentials_both_or_neither():
    assert _cert_metrics.credentials(Secrets({})) == ("", "")
    assert _cert_metrics.credentials(Secrets({"admin_username": "u", "admin_password": "p"})) == ("u", "p")
    with pytest.raises(_cert_metrics.CertMetricsError, match="requires both admin_username and admin_password"):
        _cert_metrics.credentials(Secrets({"admin_username": "u"}))


def test_push_sends_the_bucket_metrics_and_check_mode_sends_nothing(tmp_path, receiver):
    rx = receiver()
    port = int(rx.url.split(":")[2].split("/")[0])
    root, catalog = server_bucket(tmp_path, [("127.0.0.1", "active")], ports={"prometheus_port_http": port})
    kv = {"maand/job/api/worker/10.0.0.1": {"certs/tls.crt": pem("api.internal", NOT_AFTER)}}
    checked = _cert_metrics.push(root, catalog, check_mode=True, kv=kv, clock=lambda: 1000.0)
    assert checked.state == "check" and not rx.requests and len(checked.series) == 3
    assert checked.message == "cert metrics: would push 3 series (1 certificate) to %s" % rx.url
    done = _cert_metrics.push(root, catalog, kv=kv, clock=lambda: 1000.0)
    assert done.state == "pushed" and done.attempts == 1 and done.message.startswith("cert metrics: pushed 3 series")
    assert _cert_metrics.decode(rx.requests[0][3]) == checked.series and checked.series[0].timestamp_ms == 1_000_000
    assert _cert_metrics.push(root, catalog, kv={}).state == "skipped"  # no certificate, no CA: nothing to send
    assert len(rx.requests) == 1

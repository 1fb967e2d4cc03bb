"""maand's certificate expiry metrics (ops/cert_metrics.py) against maand's certs/push.go and its
certs/push_test.go cases (TestRemoteWriteMetrics, ...BasicAuth, ...Retries503, ...DoesNotRetry400), on a real
local HTTP receiver. The wire format, the target and the credentials (prometheus/remote_write.py):
tests/unit/plugin_utils/prometheus/test_prometheus_remote_write.py."""

from __future__ import annotations

import base64
import datetime
import http.server
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils.ops import cert_metrics as _cert_metrics
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import remote_write as _remote_write
from tests.maand_init import init_bucket
from tests.unit.plugin_utils.prometheus.test_prometheus_remote_write import server_bucket

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
    body = _prometheus.encode(_cert_metrics.series([OK_METRIC], 1_700_000_000_000))
    assert _prometheus.send_with_retry(_prometheus.Target(rx.url), body, log=pytest.fail) == 1
    (method, path, headers, data), = rx.requests
    assert (method, path) == ("POST", "/api/v1/write")
    assert headers["Content-Type"] == "application/x-protobuf" and headers["Content-Encoding"] == "snappy"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0" and "Authorization" not in headers
    got = _remote_write.decode(data)
    assert len(got) == 3 and all(s.timestamp_ms == 1_700_000_000_000 for s in got)
    assert {s.name: s.value for s in got} == {_cert_metrics.METRIC_NOT_AFTER: float(NOT_AFTER.timestamp()),
                                              _cert_metrics.METRIC_EXPIRING: 0.0, _cert_metrics.METRIC_EXPIRED: 0.0}


def test_basic_auth_as_maands_test(receiver):
    rx = receiver()
    _prometheus.send_with_retry(_prometheus.Target(rx.url, "promadmin", "s3cret"), _prometheus.encode(_cert_metrics.series([OK_METRIC], 1)), log=print)
    auth = rx.requests[0][2]["Authorization"]
    assert auth.startswith("Basic ") and base64.b64decode(auth[6:]) == b"promadmin:s3cret"


def test_a_503_is_tried_again_as_maand(receiver):
    """TestRemoteWriteMetricsRetries503: two 503s, then accepted on attempt 3; the waits double."""
    rx = receiver([503, 503, 204], b"Service Unavailable")
    waits, lines = [], []
    attempt = _prometheus.send_with_retry(_prometheus.Target(rx.url), _prometheus.encode(_cert_metrics.series([OK_METRIC], 1)), lines.append,
                                          sleep=waits.append, attempts=4)
    assert attempt == 3 and len(rx.requests) == 3 and waits == [2.0, 4.0]
    assert lines[0] == ("cert metrics: attempt 1/4 failed: remote write status 503 Service Unavailable:"
                        " Service Unavailable; retrying in 2s")
    assert lines[-1] == "cert metrics: push succeeded on attempt 3/4"


def test_a_400_is_not_tried_again_as_maand(receiver):
    """TestRemoteWriteMetricsDoesNotRetry400: one attempt, the status in the error."""
    rx = receiver([400], b"bad request")
    with pytest.raises(_prometheus.RemoteWriteError) as err:
        _prometheus.send_with_retry(_prometheus.Target(rx.url), b"x", pytest.fail, sleep=pytest.fail)
    assert len(rx.requests) == 1 and err.value.status == 400
    assert str(err.value) == "remote write status 400 Bad Request: bad request"


def test_network_errors_are_tried_every_attempt_with_the_wait_capped():
    closed = Receiver()
    url = closed.url
    closed.close()  # nothing listens there any more: connection refused
    waits, lines = [], []
    with pytest.raises(_prometheus.PushError, match="remote write request: .*refused"):
        _prometheus.send_with_retry(_prometheus.Target(url), b"x", lines.append, sleep=waits.append, attempts=6)
    assert waits == [2.0, 4.0, 8.0, 15.0, 15.0] and len(lines) == 5


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


# --- the whole push ----------------------------------------------------------------------------------

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
    assert _remote_write.decode(rx.requests[0][3]) == checked.series and checked.series[0].timestamp_ms == 1_000_000
    assert _cert_metrics.push(root, catalog, kv={}).state == "skipped"  # no certificate, no CA: nothing to send
    assert len(rx.requests) == 1

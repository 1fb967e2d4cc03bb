"""maand's certificate expiry metrics (ops/cert_metrics.py) against maand's certs/push.go and its
certs/push_test.go cases (TestRemoteWriteMetrics, ...BasicAuth, ...Retries503, ...DoesNotRetry400), on a real
local HTTP receiver. The wire format, the target and the credentials (prometheus/remote_write.py):
tests/unit/plugin_utils/prometheus/test_prometheus_remote_write.py."""

from __future__ import annotations

import base64
import datetime
import http.server
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs
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
    """A real HTTP server on 127.0.0.1 answering statuses in turn (the last one repeats), keeping requests;
    with tls=(cert_file, key_file) an HTTPS one; port 0: a free one."""

    def __init__(self, statuses=(204,), body=b"", tls=None, port=0):
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

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.handshake_errors = []
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            plain_get_request = self.server.get_request

            def get_request():
                sock, addr = plain_get_request()
                try:
                    return ctx.wrap_socket(sock, server_side=True), addr
                except (ssl.SSLError, OSError) as exc:  # the client refused our certificate
                    self.handshake_errors.append(exc)
                    sock.close()
                    raise
            self.server.get_request = get_request
        self.url = "%s://127.0.0.1:%d/api/v1/write" % ("https" if tls else "http", self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def receiver():
    made = []

    def make(statuses=(204,), body=b"", tls=None):
        made.append(Receiver(statuses, body, tls))
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


def tls_files(tmp_path, bucket_dir, ips=("127.0.0.1",)):
    """(cert file, key file) of a leaf for ips issued by the bucket's CA (secrets/ca.crt, made when absent)."""
    ca = _certs.load_or_create_ca(str(bucket_dir), "bucket-under-test", key_size=2048)
    leaf = _certs.issue_leaf(ca, "prometheus", list(ips), 30, pkcs8=True, key_size=2048)
    cert, key = tmp_path / ("%s.crt" % id(leaf)), tmp_path / ("%s.key" % id(leaf))
    cert.write_text(leaf.cert_pem)
    key.write_text(leaf.key_pem)
    return str(cert), str(key)


def test_basic_auth_as_maands_test_but_over_https_verified_against_the_bucket_ca(tmp_path, receiver):
    """maand's TestRemoteWriteMetricsBasicAuth, over https (issue 32 N8: maand sends the credentials in clear)."""
    rx = receiver(tls=tls_files(tmp_path, tmp_path))
    target = _prometheus.Target(rx.url, "promadmin", "s3cret", str(tmp_path / "secrets" / "ca.crt"))
    _prometheus.send_with_retry(target, _prometheus.encode(_cert_metrics.series([OK_METRIC], 1)), log=print)
    auth = rx.requests[0][2]["Authorization"]
    assert auth.startswith("Basic ") and base64.b64decode(auth[6:]) == b"promadmin:s3cret"


def test_basic_auth_is_never_sent_over_plain_http(receiver):
    """Issue 32 N8: credentials over http are refused before anything is sent, naming the fix."""
    rx = receiver()
    with pytest.raises(_prometheus.InsecureCredentials, match=r"Basic auth is never sent over plain http; serve"
                                                              r" Prometheus over TLS .*or remove both keys"):
        _prometheus.send_with_retry(_prometheus.Target(rx.url, "promadmin", "s3cret"), b"x", log=pytest.fail)
    assert rx.requests == []


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


# --- issue 32 N8: the push with credentials goes over https, verified against the bucket CA ------------------

def _with_credentials(root):
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    with _store.KVStore.edit(root) as store:
        store.put("secrets/job/prometheus", "admin_username", "promadmin")
        store.put("secrets/job/prometheus", "admin_password", "pr0m-s3cret")


def _port(url):
    return int(url.split(":")[2].split("/")[0])


def test_a_push_with_credentials_goes_over_https_verified_against_the_bucket_ca(tmp_path, receiver):
    rx = receiver(tls=tls_files(tmp_path, tmp_path))  # the bucket's CA: secrets/ca.crt of the bucket at tmp_path
    root, catalog = server_bucket(tmp_path, [("127.0.0.1", "active")], ports={"prometheus_port_http": _port(rx.url)})
    _with_credentials(root)
    kv = {"maand/job/api/worker/10.0.0.1": {"certs/tls.crt": pem("api.internal", NOT_AFTER)}}
    checked = _cert_metrics.push(root, catalog, check_mode=True, kv=kv)
    assert checked.message.endswith("to %s with Basic auth" % rx.url) and rx.url.startswith("https://")
    done = _cert_metrics.push(root, catalog, kv=kv)
    assert done.state == "pushed" and done.url == rx.url
    auth = rx.requests[0][2]["Authorization"]
    assert base64.b64decode(auth[6:]) == b"promadmin:pr0m-s3cret"


def test_a_push_with_credentials_to_a_plain_http_server_sends_them_nowhere(tmp_path, receiver):
    """Before issue 32 this POSTed Basic auth over http (maand's push): now the TLS handshake fails first and the
    error names the fix; the http server never gets a request."""
    rx = receiver()
    root, catalog = server_bucket(tmp_path, [("127.0.0.1", "active")], ports={"prometheus_port_http": _port(rx.url)})
    _certs.load_or_create_ca(root, "bucket-under-test", key_size=2048)
    _with_credentials(root)
    kv = {"maand/job/api/worker/10.0.0.1": {"certs/tls.crt": pem("api.internal", NOT_AFTER)}}
    with pytest.raises(_prometheus.PushError) as info:
        _cert_metrics.push(root, catalog, kv=kv, sleep=pytest.fail)
    message = str(info.value)
    assert message.startswith("remote write to https://127.0.0.1:%d/api/v1/write: TLS: " % _port(rx.url)), message
    assert "serve Prometheus over TLS with a leaf of the bucket CA" in message and "secrets/ca.crt" in message
    assert "pr0m-s3cret" not in message and rx.requests == []


def test_a_push_with_credentials_refuses_a_server_the_bucket_ca_did_not_sign(tmp_path, receiver):
    other = tmp_path / "other"
    rx = receiver(tls=tls_files(tmp_path, other))  # another bucket's CA
    root, catalog = server_bucket(tmp_path / "b", [("127.0.0.1", "active")], ports={"prometheus_port_http": _port(rx.url)})
    _certs.load_or_create_ca(root, "bucket-under-test", key_size=2048)
    _with_credentials(root)
    kv = {"maand/job/api/worker/10.0.0.1": {"certs/tls.crt": pem("api.internal", NOT_AFTER)}}
    with pytest.raises(_prometheus.PushError, match=r"TLS: .*certificate.*verified against secrets/ca.crt"):
        _cert_metrics.push(root, catalog, kv=kv, sleep=pytest.fail)
    assert rx.requests == []

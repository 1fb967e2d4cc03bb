"""Prometheus remote write (plugins/plugin_utils/prometheus/remote_write.py) as maand's certs/push.go pushes:
the wire format against the protobuf encoding rules, written out by hand; the target
(discoverPrometheusRemoteWriteURL) and the credentials (prometheusRemoteWriteAuth). The requests themselves, on a
real local HTTP receiver, are maand's certs/push_test.go cases in tests/unit/plugin_utils/ops/test_cert_metrics.py."""

from __future__ import annotations

import struct
import sys

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import remote_write as _remote_write
from tests.maand_init import init_bucket, ws

cramjam = pytest.importorskip("cramjam")
pytest.importorskip("google.protobuf")


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
    body = _prometheus.encode([_prometheus.Series((("__name__", "m"), ("a", "b")), 1.5, 5)])
    assert body[0] == len(want)  # a snappy block starts with the uncompressed length (a varint), no stream frame
    assert bytes(cramjam.snappy.decompress_raw(body)) == want


labels = st.dictionaries(st.sampled_from(["__name__", "job", "worker", "cert", "status", "a_b", "x"]),
                         st.text(min_size=1, max_size=20), max_size=5)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(labels, st.floats(allow_nan=False), st.integers(-2**62, 2**62)), max_size=8))
def test_decode_gives_back_what_encode_wrote(items):
    series = [_prometheus.Series(tuple(sorted(d.items())), value, ts) for d, value, ts in items]
    assert _remote_write.decode(_prometheus.encode(series)) == series


def test_missing_libraries_are_named_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "cramjam", None)  # import cramjam raises ImportError
    with pytest.raises(_prometheus.MissingLibrary) as err:
        _prometheus.encode([])
    assert "protobuf and cramjam" in str(err.value) and _remote_write.INSTALL in str(err.value)


# --- the target and the credentials ------------------------------------------------------------------

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
    assert _prometheus.discover(root, catalog) == (url, why)


def test_a_server_job_without_its_port_is_an_error_naming_it(tmp_path):
    root, catalog = server_bucket(tmp_path, [("10.0.0.1", "active")], ports={})
    with pytest.raises(_prometheus.PushError, match="job prometheus has no port prometheus_port_http"):
        _prometheus.discover(root, catalog)


class Secrets:
    def __init__(self, values):
        self.values = values

    def get(self, namespace, key, reveal_secrets=False):
        assert namespace == "secrets/job/prometheus" and reveal_secrets
        return self.values.get(key)


def test_credentials_both_or_neither():
    assert _remote_write.credentials(Secrets({})) == ("", "")
    assert _remote_write.credentials(Secrets({"admin_username": "u", "admin_password": "p"})) == ("u", "p")
    with pytest.raises(_prometheus.PushError, match="requires both admin_username and admin_password"):
        _remote_write.credentials(Secrets({"admin_username": "u"}))

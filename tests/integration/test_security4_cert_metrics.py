"""Security round 4, N8 (issue 32 item 5): the certificate-metrics push never sends Prometheus' Basic auth
over plain http. A bucket whose `prometheus` server job (on worker 127.0.0.1) has a leaf of the bucket CA
(manifest `certs`) is built by `ansible-playbook maand.core.build`; `secrets/job/prometheus` holds
`admin_username`/`admin_password`; `ansible-playbook maand.core.cert_metrics` then pushes:

- to a receiver serving that leaf over TLS: over https, verified against secrets/ca.crt, with the Basic auth;
- to a plain-http receiver (maand's URL): it fails naming the fix, and the receiver never gets a request
  (before the fix it got the credentials in clear);
- to a receiver with a certificate of another CA: refused by the verification."""

from __future__ import annotations

import base64
import json
import os
import socket

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.integration.test_security4_hooks_env import playbook
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.ops.test_cert_metrics import Receiver, tls_files

pytestmark = [pytest.mark.slow]
pytest.importorskip("cramjam")
pytest.importorskip("google.protobuf")

PASSWORD = "pr0m-s3cret-pw"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    root = init_bucket(tmp_path_factory.mktemp("n8") / "bucket")
    port = _free_port()
    ws(root, "bucket.conf", 'port_min = "%d"\nport_max = "%d"\n' % (port, port))
    ws(root, "workers.json", '[{"host":"127.0.0.1","labels":["prometheus"]}]')
    job(root, "prometheus", json.dumps({"version": "2.42.0", "resources": {"ports": {"prometheus_port_http": {}}},
                                        "certs": {"web": {"pkcs8": True, "subject": {"common_name": "prometheus"}}}}))
    ws(root, "jobs/prometheus/prometheus.yml.tpl", "global: {}\nscrape_configs:\n{{ scrapeConfigs }}\n")
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root)
    assert built.returncode == 0, built.stdout + built.stderr
    with _store.KVStore.edit(root) as store:
        store.put("secrets/job/prometheus", "admin_username", "promadmin")
        store.put("secrets/job/prometheus", "admin_password", PASSWORD)
    with open(os.path.join(root, "data", "catalog.json"), encoding="utf-8") as handle:
        catalog = json.load(handle)
    assert next(j for j in catalog["jobs"] if j["name"] == "prometheus")["ports"]["prometheus_port_http"] == port
    return root, port


def _job_leaf(root):
    """The job's own leaf from the KV (what its Prometheus serves with tls_server_config), as files."""
    kv = _store.KVStore.load(root)
    files = []
    for name in ("certs/web.crt", "certs/web.key"):
        path = os.path.join(root, "data", name.replace("/", "-"))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(kv.get("maand/job/prometheus/worker/127.0.0.1", name))
        files.append(path)
    return tuple(files)


def _push(root, *extra):
    """(rc, stdout with runs of white space as one space: the YAML callback folds long messages)."""
    done = playbook("maand.core.cert_metrics", "-e", "maand_bucket=%s" % root, *extra)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_the_push_goes_over_https_verified_against_the_bucket_ca_with_the_basic_auth(bucket):
    root, port = bucket
    rx = Receiver(tls=_job_leaf(root), port=port)
    try:
        rc, out = _push(root, "--check")
        assert rc == 0 and "would push 6 series (2 certificates) to https://127.0.0.1:%d/api/v1/write with Basic" \
            " auth" % port in out, out
        rc, out = _push(root)
        assert rc == 0, out
        assert "cert metrics: pushed 6 series (2 certificates) to https://127.0.0.1:%d/api/v1/write with Basic auth" \
            % port in out, out
    finally:
        rx.close()
    (method, path, headers, _body), = rx.requests
    assert (method, path) == ("POST", "/api/v1/write")
    assert base64.b64decode(headers["Authorization"][6:]).decode() == "promadmin:" + PASSWORD


def test_a_plain_http_server_never_gets_the_credentials(bucket):
    root, port = bucket
    rx = Receiver(port=port)
    try:
        rc, out = _push(root)
    finally:
        rx.close()
    assert rc != 0, out
    assert "remote write to https://127.0.0.1:%d/api/v1/write: TLS: " % port in out, out
    assert "serve Prometheus over TLS with a leaf of the bucket CA" in out and "remove both keys" in out, out
    assert PASSWORD not in out
    assert rx.requests == []


def test_a_server_the_bucket_ca_did_not_sign_is_refused(bucket, tmp_path):
    root, port = bucket
    rx = Receiver(tls=tls_files(tmp_path, tmp_path / "another-bucket"), port=port)
    try:
        rc, out = _push(root)
    finally:
        rx.close()
    assert rc != 0 and "TLS: unable to get local issuer certificate" in out, out
    assert "verified against secrets/ca.crt and must name 127.0.0.1" in out and rx.requests == []

"""TLS certificates end to end on a real SSH fleet (issue 13, item 1): maand's certs.md examples
(per-worker ``tls`` PKCS#1, shared ``client`` PKCS#8 with ``one: true``) built and deployed to
``/opt/worker/<bucket_id>/jobs/api/certs/``: each verifies against the bucket CA (``openssl verify``
and cryptography), has the right IP SANs, key files 0600; a second deploy changes nothing; a cert
inside ``certs_renewal_buffer`` is issued again by the next build and the deploy ships it and
restarts the job ("certs changed").

The steps share one bucket and one 2-host fleet and run in file order.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess

import pytest
from cryptography import x509

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import fleet_bucket, write

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

# docs/reference/certs.md, "Job manifest (certs)"
CERTS = {"tls": {"pkcs8": False, "one": False, "subject": {"common_name": "api.internal"}},
         "client": {"pkcs8": True, "one": True, "subject": {"common_name": "api-cluster"}}}
MAKEFILE = """\
.PHONY: start stop restart reload
start stop restart reload:
\tmkdir -p logs
\techo "$@ $$(openssl x509 -noout -serial -in certs/tls.crt 2>/dev/null || cat certs/tls.crt | wc -c)" >> logs/events.log
"""


class Env(deploy_env.Env):
    def certs(self, host):
        return self.job(host, "api") / "certs"

    def ca(self):
        return x509.load_pem_x509_certificate((self.bucket / "secrets" / "ca.crt").read_bytes())


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = tmp_path_factory.mktemp("certs") / "bucket"
    fleet_bucket(bucket, fleet.state_dir, conf="certs_ttl = 30\ncerts_renewal_buffer = 5\n", memory="4096 mb",
                 cpu="2000 mhz")
    api = bucket / "workspace" / "jobs" / "api"
    write(api / "manifest.json", json.dumps({"version": "1.0.0", "selectors": ["worker"], "certs": CERTS}))
    write(api / "Makefile", MAKEFILE)
    write(api / "tls.json.tpl", '{"cert": "{{ .JobPath }}/certs/tls.crt", '
                                '"path": "{{ get (printf "maand/job/api/worker/%s" .WorkerIP) "certs/tls.crt_path" }}"}\n')
    return Env(fleet, bucket)


def sans(cert):
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def openssl_verify(ca_file, cert_file):
    if not shutil.which("openssl"):
        return
    proc = subprocess.run(["openssl", "verify", "-CAfile", str(ca_file), str(cert_file)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and ": OK" in proc.stdout, proc.stdout + proc.stderr


def test_01_certs_md_examples_verify_against_the_bucket_ca(env):
    env.play("build")
    env.play("deploy")
    ca = env.ca()
    client_keys = set()
    for host in env.hosts:
        certs = env.certs(host)
        assert sorted(p.name for p in certs.iterdir()) == ["ca.crt", "client.crt", "client.key", "tls.crt", "tls.key"]
        assert mode(certs / "tls.key") == 0o600 and mode(certs / "client.key") == 0o600
        assert mode(certs / "tls.crt") == 0o644 and mode(certs / "ca.crt") == 0o644
        assert x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes()) == ca
        tls = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
        tls.verify_directly_issued_by(ca)
        openssl_verify(env.bucket / "secrets" / "ca.crt", certs / "tls.crt")
        openssl_verify(certs / "ca.crt", certs / "client.crt")
        assert sans(tls) == ["127.0.0.1", host]
        assert tls.subject.rfc4514_string() == "CN=api.internal"
        assert (certs / "tls.key").read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")
        client = x509.load_pem_x509_certificate((certs / "client.crt").read_bytes())
        assert sans(client) == ["127.0.0.1"] + list(env.hosts)
        assert (certs / "client.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
        client_keys.add((certs / "client.key").read_text())
        rendered = json.loads((certs.parent / "tls.json").read_text())
        assert rendered["cert"] == rendered["path"] == "/opt/worker/%s/jobs/api/certs/tls.crt" % env.bucket_id
    assert len(client_keys) == 1


def test_02_second_build_and_deploy_change_nothing(env):
    before = {h: (env.certs(h) / "tls.crt").read_bytes() for h in env.hosts}
    rc, out = env.play("build")
    assert "issued" not in out
    rc, out = env.play("deploy")
    assert "no changes required" in out
    assert set(int(m) for m in re.findall(r"changed=(\d+)", out)) == {0}, out
    assert {h: (env.certs(h) / "tls.crt").read_bytes() for h in env.hosts} == before


def test_03_inside_the_renewal_buffer_build_reissues_and_deploy_ships(env):
    before = {h: x509.load_pem_x509_certificate((env.certs(h) / "tls.crt").read_bytes()).serial_number
              for h in env.hosts}
    # the 30-day certs are now inside a 31-day buffer (new ones get 90 days, outside it)
    conf = env.bucket / "maand.conf"
    conf.write_text(conf.read_text().replace("certs_ttl = 30", "certs_ttl = 90")
                    .replace("certs_renewal_buffer = 5", "certs_renewal_buffer = 31"))
    rc, out = env.play("build")
    assert "renewal" in out, out
    rc, out = env.play("deploy", "--check", "--diff")
    for host in env.hosts:
        assert re.search(r"api\s+%s\s+restart\s+certs changed: certs/" % re.escape(host), out), out
    env.play("deploy")
    ca = env.ca()
    for host in env.hosts:
        tls = x509.load_pem_x509_certificate((env.certs(host) / "tls.crt").read_bytes())
        tls.verify_directly_issued_by(ca)
        assert tls.serial_number != before[host]
        assert (tls.not_valid_after_utc - tls.not_valid_before_utc).days == 90
        assert mode(env.certs(host) / "tls.key") == 0o600
        events = (env.certs(host).parent / "logs" / "events.log").read_text().splitlines()
        assert [e.split()[0] for e in events] == ["start", "restart"]
    rc, out = env.play("build")
    assert "issued" not in out  # the new 90-day certs are outside the buffer

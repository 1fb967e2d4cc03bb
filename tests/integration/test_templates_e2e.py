"""End to end on a real SSH fleet: maand's KV end-to-end example (docs/reference/kv/namespaces.md)
rendered per worker at deploy, a Makefile.tpl-only job, a .j2 file, the allocation environment of make
targets, a changed value restarting with "template output changed", a missing key refusing the deploy
before any worker is touched, and a secret that reaches the worker but no log, plan or record.

The steps share one bucket and one 2-host fleet and run in file order.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import fleet_bucket, write

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

CONFIG_TPL = (Path(__file__).resolve().parents[1] / "data" / "templates" / "namespaces_e2e.json.tpl").read_text()
# every target logs itself and the allocation environment it got
API_MAKEFILE = """\
.PHONY: start stop restart reload
define record
\tmkdir -p data logs
\techo "$(1) $(CURRENT_VERSION) $(NEW_VERSION)" >> logs/events.log
\tenv | grep -E '^(ALLOCATION_ID|ALLOCATION_IP|ALLOCATION_INDEX|JOB|CURRENT_VERSION|NEW_VERSION|API_HTTP_PORT)=' \
| sort > data/env.txt
endef
start:
\t$(call record,start)
stop:
\t$(call record,stop)
restart:
\t$(call record,restart)
reload:
\t$(call record,reload)
"""
TPL_ONLY_MAKEFILE = """\
.PHONY: start stop restart reload
PORT := {{ get "maand/bucket" "api_http_port" }}
start stop restart reload:
\tmkdir -p data
\techo "$@ port=$(PORT) worker={{ .WorkerIP }} index=$(ALLOCATION_INDEX)" >> data/events
"""


class Env(deploy_env.Env):
    def port(self):
        return next(j for j in self.catalog()["jobs"] if j["name"] == "api")["ports"]["api_http_port"]

    def ws(self, rel):
        return self.bucket / "workspace" / rel


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = tmp_path_factory.mktemp("tpl") / "bucket"
    fleet_bucket(bucket, fleet.state_dir, bucket_conf='environment = "staging"\n', labels="worker,api",
                 memory="4096 mb", cpu="2000 mhz")
    write(bucket / "workspace" / "bucket.jobs.conf", '[api]\nmemory = "512 mb"\n')
    api = bucket / "workspace" / "jobs" / "api"
    write(api / "manifest.json", json.dumps({
        "version": "1.2.0", "selectors": ["worker", "api"],
        "resources": {"memory": {"min": "256 mb", "max": "1 gb"}, "ports": {"api_http_port": {}}}}, indent=2))
    write(api / "vars.toml", 'service_name = "api-gateway"\n')
    write(api / "Makefile", API_MAKEFILE)
    write(api / "config.json.tpl", CONFIG_TPL)
    write(api / "hello.txt.j2", "{{ kv['vars/job/api']['service_name'] }} on {{ WorkerIP }} "
                                "({{ get('maand/job/api', 'workers') }})\n")
    tpl_only = bucket / "workspace" / "jobs" / "tplonly"
    write(tpl_only / "manifest.json", json.dumps({"version": "1.0.0", "selectors": ["worker"]}))
    write(tpl_only / "Makefile.tpl", TPL_ONLY_MAKEFILE)
    return Env(fleet, bucket)


def test_01_first_deploy_renders_maands_example_on_every_worker(env):
    env.play("build")
    env.play("deploy")
    port = env.port()
    for i, (host, peer) in enumerate(((env.hosts[0], env.hosts[1]), (env.hosts[1], env.hosts[0]))):
        api = env.job(host, "api")
        assert json.loads((api / "config.json").read_text()) == {
            "env": "staging", "service": "api-gateway", "listen": str(port), "peers": peer, "version": "1.2.0"}
        assert (api / "hello.txt").read_text() == "api-gateway on %s (%s)\n" % (host, ",".join(env.hosts))
        for never in ("config.json.tpl", "hello.txt.j2", "vars.toml"):
            assert not (api / never).exists(), never
        got = dict(line.split("=", 1) for line in (api / "data" / "env.txt").read_text().splitlines())
        alloc = next(a for a in env.catalog()["allocations"] if a["job"] == "api" and a["worker"] == host)
        assert got == {"ALLOCATION_ID": alloc["alloc_id"], "ALLOCATION_IP": host, "ALLOCATION_INDEX": str(i),
                       "JOB": "api", "CURRENT_VERSION": "0.0.0", "NEW_VERSION": "1.2.0", "API_HTTP_PORT": str(port)}
        tpl_only = env.job(host, "tplonly")
        assert sorted(p.name for p in tpl_only.iterdir()) == ["Makefile", "data", "manifest.json"]
        assert (tpl_only / "data" / "events").read_text() == "start port=%s worker=%s index=%d\n" % (port, host, i)
        record = env.record(host, "api")
        config = (api / "config.json").read_bytes()
        assert record["files"]["config.json"] == hashlib.sha256(b"-" + config).hexdigest()


def test_02_second_deploy_changes_nothing(env):
    rc, out = env.play("deploy")
    assert "no changes required" in out
    assert set(int(m) for m in re.findall(r"changed=(\d+)", out)) == {0}, out


def test_03_a_changed_value_restarts_with_template_output_changed(env):
    write(env.ws("bucket.conf"), 'environment = "production"\nport_min = "30000"\nport_max = "39999"\n')
    env.play("build")
    rc, out = env.play("deploy", "--check", "--diff")
    for host in env.hosts:
        assert re.search(r"api\s+%s\s+restart\s+template output changed: config\.json" % re.escape(host), out), out
        assert re.search(r"tplonly\s+%s\s+skip\s+unchanged" % re.escape(host), out), out
    env.play("deploy")
    for host in env.hosts:
        api = env.job(host, "api")
        assert json.loads((api / "config.json").read_text())["env"] == "production"
        assert (api / "logs" / "events.log").read_text().splitlines() == ["start 0.0.0 1.2.0", "restart 1.2.0 1.2.0"]
        assert len((env.job(host, "tplonly") / "data" / "events").read_text().splitlines()) == 1  # untouched


def test_04_a_missing_key_refuses_the_deploy_before_any_worker_is_touched(env):
    write(env.ws("jobs/api/extra.conf.tpl"), 'a = 1\nb = {{ get "vars/job/api" "nope" }}\n')
    env.play("build")  # it parses: the key is looked up when the deploy renders
    rc, out = env.play("deploy", check=False)
    assert rc != 0
    assert "job api, file extra.conf.tpl, line 2, column 7 (worker %s)" % ", ".join(sorted(env.hosts)) in out, out
    assert "key nope not found in namespace vars/job/api" in out
    for host in env.hosts:
        assert not (env.job(host, "api") / "extra.conf").exists()
        assert len((env.job(host, "api") / "logs" / "events.log").read_text().splitlines()) == 2
    env.ws("jobs/api/extra.conf.tpl").unlink()
    env.play("build")


def test_05_a_secret_reaches_the_worker_and_nothing_else(env):
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store

    with _store.KVStore.edit(str(env.bucket)) as store:
        store.put("secrets/job/api", "db_password", "Sup3r-s3cret-pw")
    write(env.ws("jobs/api/db.conf.tpl"), 'password = {{ getSecret "db_password" }}\n')
    env.play("build")
    rc, check_out = env.play("deploy", "--check", "--diff", "-v")
    rc, out = env.play("deploy", "-v")
    assert "template output changed: db.conf" in out
    for text in (check_out, out, (env.bucket / "data" / "catalog.json").read_text()):
        assert "Sup3r-s3cret-pw" not in text
    assert not (env.bucket / "data" / ".deploy-stage").exists()  # staged trees are not kept
    for host in env.hosts:
        db = env.job(host, "api") / "db.conf"
        assert db.read_text() == "password = Sup3r-s3cret-pw\n"
        digest = env.record(host, "api")["files"]["db.conf"]
        assert digest != hashlib.sha256(b"-" + db.read_bytes()).hexdigest()  # an HMAC, not a guessable hash


def test_06_the_job_playbook_gives_make_the_same_allocation_environment(env):
    for host in env.hosts:
        (env.job(host, "api") / "data" / "env.txt").unlink()
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=reload")
    port = env.port()
    for i, host in enumerate(env.hosts):
        got = dict(line.split("=", 1) for line in (env.job(host, "api") / "data" / "env.txt").read_text().splitlines())
        assert got["ALLOCATION_IP"] == host and got["ALLOCATION_INDEX"] == str(i) and got["JOB"] == "api"
        assert got["API_HTTP_PORT"] == str(port) and got["NEW_VERSION"] == "1.2.0"
        assert (env.job(host, "api") / "logs" / "events.log").read_text().splitlines()[-1] == "reload 1.2.0 1.2.0"

"""Security round 4, N2 (issue 32 item 2): a secret a `_prometheus/scrape.yaml.tpl` reads with getSecret stays
sealed. `ansible-playbook maand.core.build` keeps that job's scrape configs in `secrets/prometheus` (sealed with
secrets/kv.key, as every secret; maand keeps them in clear in `maand/prometheus`, which every job reads):
data/kv.json, `maand.core.cat -e maand_cat=kv`, `cat prometheus scrape` and another job's template never show
the value; a render of the server job's `{{ scrapeConfigs }}` is secret-bearing (0600, hidden from --diff);
with a PostgreSQL store the row holds no clear value either."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.integration.test_security4_hooks_env import playbook
from tests.maand_init import init_bucket, job, ws

pytestmark = [pytest.mark.slow]

SECRET = "Hunter2-app-scrape-secret"
SCRAPE_TPL = """\
- job_name: maand:job
  basic_auth:
    username: scraper
    password: {{ getSecret "metrics_password" }}
  static_configs:
    - targets:
        - maand:port/app_metrics_port
"""
WEB_SCRAPE = """\
- job_name: maand:job
  static_configs:
    - targets:
        - maand:port/web_metrics_port
"""
PROM_TPL = "global: {}\nscrape_configs:\n{{ scrapeConfigs }}\n"
# another job reading the scrape catalog every job may read
PEEK_TPL = '{{ getOptional "maand/prometheus" "scrape/app" }}|{{ get "maand/prometheus" "scrape_configs" }}\n'


def make_bucket(root):
    root = init_bucket(root)
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["worker","prometheus"]}]')
    job(root, "prometheus", {"version": "2.42.0", "resources": {"ports": {"prometheus_port_http": {}}}})
    ws(root, "jobs/prometheus/prometheus.yml.tpl", PROM_TPL)
    job(root, "app", {"version": "1.0.0", "selectors": ["worker"], "resources": {"ports": {"app_metrics_port": {}}}})
    ws(root, "jobs/app/_prometheus/scrape.yaml.tpl", SCRAPE_TPL)
    job(root, "web", {"version": "1.0.0", "selectors": ["worker"], "resources": {"ports": {"web_metrics_port": {}}}})
    ws(root, "jobs/web/_prometheus/scrape.yaml", WEB_SCRAPE)
    ws(root, "jobs/web/peek.txt.tpl", PEEK_TPL)
    with _store.KVStore.edit(root) as store:
        store.put("secrets/job/app", "metrics_password", SECRET)
    return root


def flat(done):
    return " ".join((done.stdout + done.stderr).split())


def test_a_scrape_templates_secret_is_sealed_in_the_kv_and_its_render_is_secret_bearing(tmp_path):
    root = make_bucket(tmp_path / "bucket")
    with open(os.path.join(root, "maand.yml"), "w", encoding="utf-8") as handle:
        handle.write("plugin: maand.core.workspace\n")
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root)
    assert built.returncode == 0, built.stdout + built.stderr

    with open(os.path.join(root, "data", "kv.json"), encoding="utf-8") as handle:
        raw = handle.read()
    assert SECRET not in raw  # before issue 32: twice in clear, scrape/app and scrape_configs of maand/prometheus
    doc = json.loads(raw)["namespaces"]
    assert "scrape/app" not in doc["maand/prometheus"] and "scrape/web" in doc["maand/prometheus"]
    assert doc["secrets/prometheus"]["scrape/app"]["value"].startswith("enc:v2:")
    assert doc["secrets/prometheus"]["scrape_configs"]["value"].startswith("enc:v2:")
    assert "web_metrics_port" in doc["maand/prometheus"]["scrape_configs"]["value"]
    assert doc["maand/prometheus"]["scrape_jobs"]["value"] == "app,web"
    again = playbook("maand.core.build", "-e", "maand_bucket=%s" % root)  # sealing again changes nothing
    assert again.returncode == 0 and "KV:" not in again.stdout, again.stdout

    inventory = os.path.join(root, "maand.yml")
    kv = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=kv")
    assert kv.returncode == 0, kv.stdout + kv.stderr
    assert SECRET not in kv.stdout and "secrets/prometheus" in kv.stdout, kv.stdout
    revealed = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=kv", "-e", "maand_reveal=true")
    assert revealed.returncode == 0 and SECRET in revealed.stdout  # sealed, not lost
    scrape = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=prometheus", "-e", "maand_scrape=true")
    assert scrape.returncode == 0, scrape.stdout + scrape.stderr
    assert SECRET not in scrape.stdout and "10.0.0.1:" in scrape.stdout
    assert "the scrape configs of app read a secret and are left out (-e maand_reveal=true shows them)" \
        in flat(scrape), scrape.stdout
    shown = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=prometheus", "-e", "maand_scrape=true",
                     "-e", "maand_reveal=true")
    assert shown.returncode == 0 and SECRET in shown.stdout, shown.stdout

    # a render, as the deploy stages it: the server job's prometheus.yml carries the secret, so it is 0600,
    # hidden from --diff and HMAC-digested; another job reading maand/prometheus sees no secret
    catalog = _catalog.read_catalog(root)
    staging = _stage.compute(root, catalog, ["prometheus", "web"], ["10.0.0.1"])
    assert not staging.errors, staging.errors
    config = staging.shipped_bytes("prometheus", "10.0.0.1", "prometheus.yml").decode()
    assert SECRET in config and "web_metrics_port" not in config and "10.0.0.1:" in config
    assert staging.is_secret("prometheus", "10.0.0.1", "prometheus.yml")
    peek = staging.shipped_bytes("web", "10.0.0.1", "peek.txt").decode()
    assert SECRET not in peek and peek.startswith("|") and "web_metrics_port" in peek
    assert not staging.is_secret("web", "10.0.0.1", "peek.txt")
    tree = staging.stage(root, "prometheus", "10.0.0.1")
    assert stat.S_IMODE(os.stat(os.path.join(tree, "prometheus.yml")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(staging.stage(root, "web", "10.0.0.1"), "peek.txt")).st_mode) == 0o644


def test_with_a_postgresql_store_the_row_holds_no_clear_scrape_secret(tmp_path, pg_server, monkeypatch):
    url = pg_server.database()
    env = dict(pg_server.env, MAAND_STATE_URL=url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    root = make_bucket(tmp_path / "bucket")
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    body = pg_server.psql("SELECT body FROM maand_documents WHERE name = 'kv'", db=url.rsplit("/", 1)[1])
    assert "secrets/prometheus" in body and "scrape/web" in body
    assert SECRET not in body
    assert not os.path.exists(os.path.join(root, "data", "kv.json"))

"""maand's Prometheus server staging (deploy/prepare.go prepareJobOnWorker, prometheus_*.go):
plugins/plugin_utils/prometheus/consoles.py and the deploy's overlays of it (deploy/stage.py).

Expected pages come from maand's own runbooks/html.go and dashboards/html.go run with goldmark v1.7.8
(tests/data/prometheus/maand_consoles.json; how: consoles_main.go.txt); the staging cases are maand's
deploy/templates_prometheus_test.go and dashboards/ignore_test.go."""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import consoles as _consoles, scrape_catalog as _scrape_catalog

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "prometheus", "maand_consoles.json")
with open(DATA, encoding="utf-8") as _handle:
    GOLDEN = json.load(_handle)


@pytest.mark.parametrize("case", GOLDEN["runbooks"], ids=lambda c: "%s/%s" % (c["job"], c["slug"]))
def test_runbook_page_is_maands_byte_for_byte(case):
    assert _consoles.runbook_page(case["job"], case["slug"], case["markdown"]) == case["html"]


@pytest.mark.parametrize("index", range(len(GOLDEN["runbook_index"])))
def test_runbook_index_is_maands(index):
    entries = [(e["Job"], e["Slug"]) for e in GOLDEN["runbook_index"][index]]
    assert _consoles.runbook_index(entries) == GOLDEN["runbook_index_html"][index]


@pytest.mark.parametrize("index", range(len(GOLDEN["dashboards"])))
def test_dashboard_index_is_maands(index):
    entries = [(e["Job"], e["Rel"], e["Label"]) for e in GOLDEN["dashboards"][index]]
    assert _consoles.dashboard_index(entries) == GOLDEN["dashboards_html"][index]


@pytest.mark.parametrize("case", GOLDEN["labels"], ids=lambda c: c["rel"])
def test_dashboard_label_is_maands(case):
    assert _consoles.dashboard_label(case["rel"], case["content"]) == case["label"]


def test_escape_console_literals_as_maand():
    # maand runbooks/html_test.go TestEscapePrometheusTemplateLiterals
    out = _consoles.escape_console_literals('docker ps --format "table {{.Names}}\\t{{.Status}}"')
    assert "{{.Names}}" not in out
    assert '{{ "{{" }}' in out and '{{ "}}" }}' in out


@pytest.mark.parametrize("rel, patterns, listed", [
    # maand dashboards/ignore_test.go
    ("overview.html", [], True),
    (".dashboardignore", [], False),
    (".hidden.html", [], False),
    ("_partial.html", ["_partial.html"], False),
    ("partials/a.html", ["partials/**"], False),
    ("slo/worker_detail.html", ["**/worker_detail.html"], False),
    ("slo/latency.html", ["partials/**", "_partial.html"], True),
])
def test_listed_in_index(rel, patterns, listed):
    assert _consoles.listed_in_index(rel, patterns) is listed


def test_ignore_patterns_skip_blanks_and_comments():
    assert _consoles.ignore_patterns("# partials\n_partial.html\n\n  partials/**  \n") == ["_partial.html", "partials/**"]


# --- a bucket: the server job's overlays and the template functions through stage.compute ------------

PROM_TPL = """global:
  scrape_interval: 15s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:9090']
{{ scrapeConfigs }}
{{ ruleFiles }}
"""


def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _bucket(tmp_path, server="prometheus", port=True):
    root = str(tmp_path)
    _write(root, "workspace/jobs/%s/prometheus.yml.tpl" % server, PROM_TPL)
    _write(root, "workspace/jobs/%s/Makefile" % server, "start:\n\ttrue\n")
    _write(root, "workspace/jobs/api/Makefile", "start:\n\ttrue\n")
    _write(root, "workspace/jobs/api/_prometheus/scrape.yaml",
           "- job_name: maand:job\n  static_configs:\n    - targets: [maand:port/api_metrics_port]\n")
    _write(root, "workspace/jobs/api/_prometheus/alerts/slo.yaml",
           "groups:\n  - name: api\n    rules:\n      - alert: ApiDown\n        expr: up == 0\n"
           "        annotations:\n          runbook: ApiDown\n")
    _write(root, "workspace/jobs/api/_prometheus/runbooks/ApiDown.md", "# Api Down\n")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/.dashboardignore", "_partial.html\nworker_detail.html\n")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/overview.html",
           "<html><head><title>API overview</title></head>overview</html>")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/_partial.html", "<html>partial</html>")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/worker_detail.html", "<html><title>Worker detail</title></html>")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/workers.html", "<html><title>Workers</title></html>")
    _write(root, "workspace/jobs/api/_prometheus/dashboards/slo/latency.html", "<html><title>SLO latency</title>latency</html>")
    ports = {"prometheus_port_http": 9090} if port else {}
    catalog = {
        "bucket_id": "b", "workers": [{"host": "10.0.0.1", "labels": ["worker"]}, {"host": "10.0.0.2", "labels": ["worker"]}],
        "jobs": [{"name": server, "version": "1.0.0", "ports": ports},
                 {"name": "api", "version": "1.0.0", "ports": {"api_metrics_port": 30421}}],
        "allocations": [{"job": server, "worker": "10.0.0.1", "state": "active"},
                        {"job": "api", "worker": "10.0.0.1", "state": "active"},
                        {"job": "api", "worker": "10.0.0.2", "state": "active"}],
    }
    scrape = [{"job_name": "api", "static_configs": [{"targets": ["maand:port/api_metrics_port"]}]}]
    kv = {_scrape_catalog.KV_NAMESPACE: {"scrape_jobs": "api", "scrape/api": json.dumps(scrape)}}
    return root, catalog, kv


def _compute(root, catalog, kv, hosts=("10.0.0.1", "10.0.0.2")):
    return _stage.compute(root, catalog, [j["name"] for j in catalog["jobs"]], hosts, kv=(kv, lambda: b"k" * 32))


def test_server_job_gets_rules_runbooks_dashboards_and_config(tmp_path):
    # maand TestTranspile_scrapeConfigsTemplate, TestTranspile_ruleFilesTemplate, TestAssemblePrometheus*
    root, catalog, kv = _bucket(tmp_path)
    staging = _compute(root, catalog, kv)
    assert not staging.errors
    content = staging.allocations[("prometheus", "10.0.0.1")]
    files = {o.rel: o.content.decode() for o in content.outputs}
    config = files["prometheus.yml"]
    assert "job_name: api" in config and "10.0.0.1:30421" in config and "10.0.0.2:30421" in config
    assert "  - rules/maand/certs.yaml" in config and "  - rules/api/slo.yaml" in config
    assert "runbook_url: http://10.0.0.1:9090/consoles/runbooks/api/ApiDown.html" in files["rules/api/slo.yaml"]
    assert "runbook:" not in files["rules/api/slo.yaml"]
    assert "maand_cert_expiring" in files["rules/maand/certs.yaml"]
    assert "<h1>Api Down</h1>" in files["consoles/runbooks/api/ApiDown.html"]
    assert 'href="api/ApiDown.html"' in files["consoles/runbooks/index.html"]
    assert files["consoles/runbooks/style.css"] == _consoles.STYLE_CSS
    index = files["consoles/dashboards/index.html"]
    assert 'href="api/overview.html"' in index and ">API overview</a>" in index
    assert 'href="api/slo/latency.html"' in index and ">SLO latency</a>" in index and ">Workers</a>" in index
    assert "_partial.html" not in index and "worker_detail.html" not in index and ".dashboardignore" not in index
    assert "partial" in files["consoles/dashboards/api/_partial.html"]
    assert "latency" in files["consoles/dashboards/api/slo/latency.html"]
    assert "consoles/dashboards/api/.dashboardignore" not in files
    assert not any(rel.startswith("maand/") for rel in files)
    origins = {o.rel: o.origin for o in content.outputs}
    assert origins["rules/api/slo.yaml"] == "prometheus" and origins["prometheus.yml"] == "template"
    assert set(content.files) >= set(files)
    # the other job gets none of it
    assert not any(o.rel.startswith(("rules/", "consoles/")) for o in staging.allocations.get(("api", "10.0.0.1"),
                                                                                              _stage.AllocationContent("", "", {}, "", ())).outputs)


def test_a_changed_alert_changes_the_server_hash_only(tmp_path):
    root, catalog, kv = _bucket(tmp_path)
    before = _compute(root, catalog, kv).content
    _write(root, "workspace/jobs/api/_prometheus/alerts/slo.yaml",
           "groups:\n  - name: api\n    rules:\n      - alert: ApiDown\n        expr: up == 0\n        for: 5m\n")
    after = _compute(root, catalog, kv).content
    assert after["prometheus"]["allocations"]["10.0.0.1"]["hash"] != before["prometheus"]["allocations"]["10.0.0.1"]["hash"]
    assert after["api"]["hash"] == before["api"]["hash"]


def test_server_job_of_another_name_still_ships_and_needs_the_prometheus_port(tmp_path):
    root, catalog, kv = _bucket(tmp_path, server="monitor")
    staging = _compute(root, catalog, kv)
    assert len(staging.errors) == 1
    assert "prometheus_port_http" in staging.errors[0] and "monitor" in staging.errors[0]


def test_missing_port_is_an_error_naming_the_fix(tmp_path):
    root, catalog, kv = _bucket(tmp_path, port=False)
    staging = _compute(root, catalog, kv)
    assert staging.errors and "prometheus_port_http" in staging.errors[0]
    assert "resources.ports" in staging.errors[0]
    assert "error" in staging.content["prometheus"]["allocations"]["10.0.0.1"]


def test_scrape_configs_in_a_jinja_template_too(tmp_path):
    root, catalog, kv = _bucket(tmp_path)
    os.remove(os.path.join(root, "workspace/jobs/prometheus/prometheus.yml.tpl"))
    _write(root, "workspace/jobs/prometheus/prometheus.yml.j2", "{{ scrapeConfigs() }}{{ ruleFiles() }}")
    staging = _compute(root, catalog, kv)
    assert not staging.errors
    text = {o.rel: o.content for o in staging.allocations[("prometheus", "10.0.0.1")].outputs}["prometheus.yml"].decode()
    assert "10.0.0.2:30421" in text and "rules/api/slo.yaml" in text


def test_a_bad_runbook_fails_the_server_allocation_naming_the_file(tmp_path):
    root, catalog, kv = _bucket(tmp_path)
    with open(os.path.join(root, "workspace/jobs/api/_prometheus/runbooks/ApiDown.md"), "wb") as handle:
        handle.write(b"\xff\xfe")
    staging = _compute(root, catalog, kv)
    assert staging.errors and "workspace/jobs/api/_prometheus/runbooks/ApiDown.md" in staging.errors[0]
    assert "UTF-8" in staging.errors[0]

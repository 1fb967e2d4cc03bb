"""The server job's rules/ and {{ ruleFiles }} (plugins/plugin_utils/prometheus/rules.py) against maand's
own code and tests: tests/data/prometheus/yamlv3_alerts.json (alert files through maand's InjectRunbookURLs
with go-yaml v3.0.1), promconfig/rule_files_deploy_test.go, promconfig/alerts_test.go (TestInjectRunbookURLs),
deploy/templates_prometheus_test.go (TestAssemblePrometheusAlertRules).
"""

import json
import os
import re

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import rules as _rules
from tests.unit.plugin_utils.prometheus.test_prometheus_scrape_catalog import ALERT, bucket, built

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "prometheus")


# --- promconfig/rule_files_deploy_test.go --------------------------------------------------------

def test_rule_files_yaml():
    text = _rules.rule_files_yaml([("web", "alerts/errors.yaml"), ("api", "alerts/slo.yaml")], server_config=False)
    assert text == "rule_files:\n  - rules/api/slo.yaml\n  - rules/web/errors.yaml\n"


def test_rule_files_yaml_empty_and_certs_first():
    assert _rules.rule_files_yaml([], server_config=False) == ""
    assert _rules.rule_files_yaml([], server_config=True) == "rule_files:\n  - rules/maand/certs.yaml\n"
    assert _rules.rule_files_yaml([("api", "alerts/sub/x.yml")], True).endswith("  - rules/api/x.yml\n")


# --- rules/ of the server job (deploy/prometheus_rules.go, promconfig/alerts.go InjectRunbookURLs) -------

with open(os.path.join(DATA, "yamlv3_alerts.json"), encoding="utf-8") as _handle:
    ALERTS = json.load(_handle)


def without_empty_for(text):
    """The one difference on purpose: maand re-marshals a rule without `for` as `for: ""`, which Prometheus
    refuses ("empty duration string"), so maand.core leaves the line out."""
    return re.sub(r'(?m)^ *for: ""\n', "", text)


@pytest.mark.parametrize("case", ALERTS, ids=[c["name"] for c in ALERTS])
def test_inject_runbook_urls_is_maands_byte_for_byte(case):
    if case["error"]:
        with pytest.raises(_prometheus.PrometheusError) as err:
            _rules.inject_runbook_urls(case["job"], case["text"], case["base"])
        assert case["error"].rsplit("alerts ", 1)[-1] in str(err.value)
        return
    assert _rules.inject_runbook_urls(case["job"], case["text"], case["base"]) == without_empty_for(case["out"])


def test_inject_runbook_urls_as_maand():
    """promconfig/alerts_test.go TestInjectRunbookURLs, its data and assertions."""
    data = ("\ngroups:\n  - name: api\n    rules:\n      - alert: ApiDown\n        expr: up == 0\n        annotations:\n"
            "          runbook: ApiDown\n      - alert: ApiSlow\n        expr: latency > 1\n        annotations:\n"
            "          runbook: ApiSlow\n          runbook_url: http://custom.example/runbook\n"
            "      - record: api:up:sum\n        expr: sum(up{job=\"api\"})\n")
    text = _rules.inject_runbook_urls("api", data, "http://10.0.0.1:9090")
    assert "runbook_url: http://10.0.0.1:9090/consoles/runbooks/api/ApiDown.html" in text
    assert "runbook:" not in text and "Runbook:" not in text and "runbook: ApiSlow" not in text
    assert "runbook_url: http://custom.example/runbook" in text


def test_a_rule_without_for_is_written_without_it():
    text = "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n        annotations:\n" \
           "          runbook: A\n      - record: r\n        expr: up\n"
    out = _rules.inject_runbook_urls("api", text, "http://h:1")
    assert "for:" not in out and "runbook_url: http://h:1/consoles/runbooks/api/A.html" in out
    assert 'for: ""' in [c for c in ALERTS if c["name"] == "runbook_url_kept"][0]["out"]  # what maand writes


def test_rule_files_of_the_server_job(tmp_path):
    """TestAssemblePrometheusAlertRules: runbook_url on the worker's Prometheus, certs rules added."""
    root = bucket(tmp_path, jobs={"api": ([], {"alerts/slo.yaml": ALERT + "        annotations:\n          runbook: ApiDown\n",
                                               "runbooks/ApiDown.md": "# Api Down\n"})})
    catalog, dummy = built(root)
    port = next(j for j in catalog["jobs"] if j["name"] == "prometheus")["ports"]["prometheus_http_port"]
    with pytest.raises(_prometheus.PrometheusError) as err:  # maand reads prometheus_port_http, this server names it otherwise
        _rules.rule_files(root, catalog, "prometheus", "10.0.0.1")
    assert "prometheus_port_http" in str(err.value)
    for j in catalog["jobs"]:
        if j["name"] == "prometheus":
            j["ports"]["prometheus_port_http"] = port
    files = _rules.rules_provider(root, catalog)("prometheus", "10.0.0.1")
    assert sorted(files) == ["rules/api/slo.yaml", "rules/maand/certs.yaml"]
    text = files["rules/api/slo.yaml"].decode()
    assert "runbook_url: http://10.0.0.1:%d/consoles/runbooks/api/ApiDown.html" % port in text
    assert "runbook:" not in text
    assert b"maand_cert_expiring" in files["rules/maand/certs.yaml"]
    assert _rules.rules_provider(root, catalog)("api", "10.0.0.1") == {}

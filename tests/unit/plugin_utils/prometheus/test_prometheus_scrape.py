"""Scrape configs (plugins/plugin_utils/prometheus/scrape.py) against maand's own code and tests.

* tests/data/prometheus/yamlv3_scrape.json: 25 scrape catalogs run through maand's promconfig/scrape.go
  (copied verbatim from maand-sh/maand) with gopkg.in/yaml.v3 v3.0.1 by reference_main.go.txt:
  ParseScrapeFile, the KV's JSON round trip, ExpandScrapeConfigs, ScrapeConfigsYAML. Our output must be
  the same bytes (one documented difference: integers of 1e6 and more, see BIG_INT).
* maand's tests: promconfig/scrape_test.go.
"""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import errors as _errors, scrape as _scrape

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "prometheus", "yamlv3_scrape.json")
with open(DATA, encoding="utf-8") as _handle:
    YAMLV3 = json.load(_handle)
# maand stores scrape/<job> as JSON and reads it back into interface{}: every number becomes a float64
# and yaml.v3 writes 1000000.0 as 1e+06, which Prometheus refuses for an integer field. We keep integers.
BIG_INT = {"big_int_diverges": ("sample_limit: 1e+06", "sample_limit: 1000000")}


def run_catalog(case):
    configs = []
    for item in case["jobs"]:
        parsed = _scrape.parse_scrape(item["scrape"])
        job_ = _scrape.ScrapeJob(item["name"], tuple(parsed), {k: item["port_numbers"].get(k) for k in item["ports"]},
                                 tuple(item["workers"]))
        try:
            configs.extend(_scrape.expand_scrape_configs(job_))
        except _errors.NoActiveTargets:
            continue
    return _scrape.scrape_configs_yaml(configs)


@pytest.mark.parametrize("case", YAMLV3, ids=[c["name"] for c in YAMLV3])
def test_scrape_configs_yaml_is_maands_byte_for_byte(case):
    expected = case["yaml"]
    if case["name"] in BIG_INT:
        theirs, ours = BIG_INT[case["name"]]
        assert theirs in expected
        expected = expected.replace(theirs, ours)
    if case["error"]:
        with pytest.raises(_prometheus.PrometheusError) as err:
            run_catalog(case)
        go_message = case["error"].replace("invalid job: ", "")
        assert go_message == str(err.value) or "json: unsupported value" in go_message, str(err.value)
        return
    assert run_catalog(case) == expected


# --- promconfig/scrape_test.go ---------------------------------------------------------------------

API_SCRAPE = "\n- job_name: api\n  static_configs:\n    - targets:\n        - maand:port/api_metrics_port\n"


def test_scrape_configs_require_active_allocations():
    """TestScrapeConfigsRequireActiveAllocations."""
    assert _scrape.requires_active_allocations(_scrape.parse_scrape(API_SCRAPE))
    literal = _scrape.parse_scrape("- job_name: external\n  static_configs:\n    - targets:\n        - blackbox.internal:9115\n")
    assert not _scrape.requires_active_allocations(literal)


def test_expand_without_active_allocations_is_no_active_targets():
    """TestExpandScrapeConfigs_noActiveAllocations."""
    job_ = _scrape.ScrapeJob("api", tuple(_scrape.parse_scrape(API_SCRAPE)), {"api_metrics_port": 30421}, ())
    with pytest.raises(_errors.NoActiveTargets):
        _scrape.expand_scrape_configs(job_)


@pytest.mark.parametrize("job_name, ports, expected", [
    ("api", {"api_metrics_port"}, "api_metrics_port"),
    ("worker", {"metrics_port"}, "metrics_port"),
    ("worker", {"a_metrics_port", "b_metrics_port"}, None),
    ("worker", {"http_port"}, None),
])
def test_resolve_metrics_port_key(job_name, ports, expected):
    if expected is None:
        with pytest.raises(_prometheus.PrometheusError):
            _scrape.resolve_metrics_port_key(job_name, ports)
    else:
        assert _scrape.resolve_metrics_port_key(job_name, ports) == expected


def test_expand_scrape_configs_targets_in_order():
    """TestExpandScrapeConfigs."""
    configs = _scrape.parse_scrape("- job_name: api\n  metrics_path: /metrics\n  static_configs:\n    - targets:\n"
                                   "        - maand:port/api_metrics_port\n      labels:\n        maand_job: api\n")
    [out] = _scrape.expand_scrape_configs(_scrape.ScrapeJob("api", tuple(configs), {"api_metrics_port": 30421},
                                                            ("10.0.0.1", "10.0.0.2")))
    assert out["static_configs"][0]["targets"] == ["10.0.0.1:30421", "10.0.0.2:30421"]
    assert configs[0]["static_configs"][0]["targets"] == ["maand:port/api_metrics_port"]  # a copy was expanded


def test_maand_job_placeholder_and_resolve_job_name():
    """TestExpandScrapeConfigs_maandJobPlaceholder, TestResolveScrapeJobName."""
    configs = _scrape.parse_scrape("- job_name: maand:job\n  static_configs:\n    - targets:\n        - 127.0.0.1:9090\n"
                                   "      labels:\n        maand_job: maand:job\n")
    [out] = _scrape.expand_scrape_configs(_scrape.ScrapeJob("clickhouse_keeper", tuple(configs), {}, ("10.0.0.1",)))
    assert out["job_name"] == "clickhouse_keeper"
    assert out["static_configs"][0]["labels"]["maand_job"] == "clickhouse_keeper"
    assert _scrape.resolve_job_name("api", "api") == "api" and _scrape.resolve_job_name("api", "maand:job") == "api"


def test_scrape_configs_yaml_starts_with_a_newline():
    """TestScrapeConfigsYAML."""
    text = _scrape.scrape_configs_yaml(_scrape.parse_scrape("- job_name: api\n  static_configs:\n    - targets:\n"
                                                            "        - 10.0.0.1:9090\n"))
    assert text.startswith("\n") and "job_name: api" in text
    assert _scrape.scrape_configs_yaml([]) == ""


@pytest.mark.parametrize("text, words", [
    ("  \n", "is empty"),
    ("[]\n", "at least one scrape item"),
    ("job_name: api\n", "expected a YAML list"),
    ("- [\n", "invalid YAML"),
    ("- <<: 1\n", "map merge requires map"),
    ("- job_name: !custom x\n", "tag !custom"),
])
def test_parse_scrape_refuses(text, words):
    with pytest.raises(_prometheus.PrometheusError) as err:
        _scrape.parse_scrape(text)
    assert words in str(err.value)


def test_validate_scrape_configs_as_maand():
    """TestValidateScrapeConfigs_rejectsSD (kubernetes_sd_configs) and TestValidateScrapePortReferences."""
    with pytest.raises(_prometheus.PrometheusError, match="kubernetes_sd_configs"):
        _scrape.validate_configs("api", "scrape.yaml", [{"job_name": "api", "kubernetes_sd_configs": [{}]}], set())
    configs = _scrape.parse_scrape(API_SCRAPE)
    _scrape.validate_configs("api", "scrape.yaml", configs, {"api_metrics_port"})
    with pytest.raises(_prometheus.PrometheusError, match="api_metrics_port"):
        _scrape.validate_configs("api", "scrape.yaml", configs, set())

"""maand.core.cat -e maand_cat=prometheus: maand's `maand cat prometheus` list, `get <job> <path>` and `scrape`
(maand-sh/maand cat/cat_prometheus.go and its cat_prometheus_test.go cases), on a built bucket."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat
from tests.maand_init import job, ws
from tests.unit.plugin_utils.prometheus.test_prometheus_scrape_catalog import ALERT, bucket, built

RULE = "groups:\n  - name: %s\n    rules:\n      - alert: %s\n        expr: up == 0\n"
SCRAPE = "- job_name: maand:job\n  static_configs:\n    - targets:\n        - maand:port/api_metrics_port\n"


@pytest.fixture()
def root(tmp_path):
    root = bucket(tmp_path, workers='[{"host":"10.0.0.1"},{"host":"10.0.0.2"}]', jobs={
        "api": (["api_metrics_port"], {"scrape.yaml": SCRAPE, "alerts/slo.yaml": RULE % ("slo", "ApiSlow"),
                                       "alerts/errors.yml": ALERT, "runbooks/ApiDown.md": "# down\n",
                                       "runbooks/notes.txt": "not a runbook", "dashboards/overview.html": "<html/>",
                                       "dashboards/slo/latency.html": "<html/>",
                                       "dashboards/.dashboardignore": "slo/**\n"}),
        "web": ([], {"alerts/errors.yaml": RULE % ("web", "WebDown")}),
        "keeper": ([], {})})
    job(root, "quiet", {"selectors": ["worker"]})
    ws(root, "jobs/quiet/_prometheus/README", "nothing maand reads")
    built(root)
    return root


def cat(root, **kw):
    return _cat.cat(root, _cat.Request("prometheus", **kw))


def test_the_list_counts_what_each_job_ships(root):
    """TestPrometheusListAndGet: scrape, alerts, runbooks (.md), dashboard files (the deploy's, not the ignore file)."""
    table = cat(root)
    assert table.header == ("JOB", "SCRAPE", "ALERTS", "RUNBOOKS", "DASHBOARDS")
    assert table.rows == [("api", "yes", "2", "1", "2"), ("web", "-", "1", "0", "0")]
    assert "Prometheus server job: prometheus" in table.notes
    assert cat(root, jobs=("web",)).rows == [("web", "-", "1", "0", "0")]
    with pytest.raises(_cat.CatError, match="no job of quiet ships a _prometheus/ folder"):
        cat(root, jobs=("quiet",))
    with pytest.raises(_cat.CatError, match="unknown job missing"):
        cat(root, jobs=("missing",))


def test_get_prints_one_file_of_one_job(root):
    assert cat(root, jobs=("api",), file="scrape").lines() == SCRAPE.rstrip("\n").split("\n")
    assert cat(root, jobs=("api",), file="/alerts/errors.yml").lines() == ALERT.rstrip("\n").split("\n")
    assert cat(root, jobs=("api",), file="scrape").as_dicts()[0] == {"line": "- job_name: maand:job"}
    with pytest.raises(_cat.CatError, match=r"workspace/jobs/api/_prometheus/missing.yaml not found \(the files: "
                                            r"alerts/errors.yml, alerts/slo.yaml, dashboards/"):
        cat(root, jobs=("api",), file="missing.yaml")
    with pytest.raises(_cat.CatError, match="it leaves workspace/jobs/api/_prometheus"):
        cat(root, jobs=("api",), file="../manifest.json")
    with pytest.raises(_cat.CatError, match="exactly one"):
        cat(root, jobs=("api", "web"), file="scrape")
    with pytest.raises(_cat.CatError, match="exactly one"):
        cat(root, file="scrape")


@pytest.mark.parametrize("given, rel", [("", "scrape.yaml"), ("scrape", "scrape.yaml"), ("scrape.yaml", "scrape.yaml"),
                                        ("scrape.tpl", "scrape.yaml.tpl"), ("scrape.yaml.tpl", "scrape.yaml.tpl"),
                                        (" /alerts/a.yaml", "alerts/a.yaml")])
def test_path_shorthands_as_maand(given, rel):
    assert _cat.prometheus_rel_path(given) == rel


def test_scrape_prints_the_expanded_configs_a_deploy_renders(root):
    """TestPrometheusScrape: the expanded configs; a job that has none is an error."""
    text = "\n".join(cat(root, scrape=True).lines())
    assert text.startswith("  - job_name: api\n") and "- 10.0.0.1:" in text and "- 10.0.0.2:" in text
    assert "\n".join(cat(root, scrape=True, jobs=("api",)).lines()) == text
    with pytest.raises(_cat.CatError, match="no expanded scrape configs for web"):
        cat(root, scrape=True, jobs=("web",))


def test_file_and_scrape_are_refused_where_they_mean_nothing(root):
    with pytest.raises(_cat.CatError, match="belong to the prometheus view, not jobs"):
        _cat.cat(root, _cat.Request("jobs", scrape=True))
    with pytest.raises(_cat.CatError, match="either file"):
        cat(root, jobs=("api",), file="scrape", scrape=True)
    with pytest.raises(_cat.CatError, match="workers filter does not apply"):
        cat(root, scrape=True, workers=("10.0.0.1",))

"""health_check, restart_globs, reload targets and _prometheus/ at build, from maand's own tests
(maand-sh/maand tests/healthcheck_manifest_test.go, workspace/health_check_test.go,
tests/build_prometheus_test.go, promconfig/alerts_test.go, promconfig/scrape_test.go,
build/build_jobs_test.go) and maand's docs (guides/prometheus.md, reference/manifest.md)."""

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket.job_checks import makefile_targets
from tests.maand_init import init_bucket, job, ws

APP_WORKER = '[{"host":"10.0.0.1","labels":["app"]}]'


def build(root):
    result = _service.compute(root)
    return result, "\n".join(str(p) for p in result.report.errors)


def health(checks, ports=None, **extra):
    manifest = {"selectors": ["app"], "resources": {"ports": ports if ports is not None else {"api_port": {}}},
                "health_check": dict({"checks": checks}, **extra)}
    return manifest


HEALTH_CASES = [
    # (id, source, manifest, field or None when it builds, words)
    ("tcp_ok", "tests/healthcheck_manifest_test.go TestManifestTCPHealthCheck",
     health([{"type": "tcp", "port": "api_port"}]), None, None),
    ("http_ok", "workspace/health_check_test.go TestValidateHealthCheck",
     health([{"type": "tcp", "port": "api_port"}, {"type": "http", "port": "api_port", "path": "/health"}]), None, None),
    ("wrong_port", "tests/healthcheck_manifest_test.go TestBuildRejectsInvalidHealthCheckPort",
     health([{"type": "tcp", "port": "wrong_port"}]), "health_check.checks[0].port", "not in resources.ports"),
    ("ssh_without_command", "tests/healthcheck_manifest_test.go TestBuildRejectsSSHHealthCheckWithoutCommand",
     {"selectors": ["app"], "health_check": {"checks": [{"type": "ssh"}]}}, "health_check.checks[0].command",
     "ssh probe requires command"),
    ("unknown_type", "workspace/health_check.go ValidateHealthCheck", health([{"type": "udp", "port": "api_port"}]),
     "health_check.checks[0].type", "(want tcp, http, or ssh)"),
    ("missing_port", "workspace/health_check.go ValidateHealthCheck", health([{"type": "tcp"}]),
     "health_check.checks[0].port", "missing port"),
    ("http_path", "workspace/health_check.go ValidateHealthCheck",
     health([{"type": "http", "port": "api_port", "path": "health"}]), "health_check.checks[0].path",
     "path must start with /"),
    ("interval_1s", "workspace/health_check.go HealthCheckWait.IntervalSeconds int (issue 9)",
     health([{"type": "tcp", "port": "api_port"}], wait={"attempts": 3, "interval_seconds": "1s"}),
     "health_check.wait.interval_seconds", "of type int"),
    # maand: int; maand.core's gate honours fractions of a second (docs/parity.md, Differences from maand)
    ("timeout_fraction", "workspace/health_check.go ManifestHealthCheck.TimeoutSeconds int",
     health([{"type": "tcp", "port": "api_port"}], timeout_seconds=1.5, wait={"interval_seconds": 0.5}), None, None),
    ("timeout_string", "workspace/health_check.go ManifestHealthCheck.TimeoutSeconds int",
     health([{"type": "tcp", "port": "api_port"}], timeout_seconds="5"), "health_check.timeout_seconds", "of type int"),
    ("attempts_fraction", "workspace/health_check.go HealthCheckWait.Attempts int",
     health([{"type": "tcp", "port": "api_port"}], wait={"attempts": 1.5}), "health_check.wait.attempts", "of type int"),
    ("port_number", "workspace/health_check.go HealthCheckProbe.Port string",
     health([{"type": "tcp", "port": 8080}]), "health_check.checks[0].port", "of type string"),
    ("status_string", "workspace/health_check.go HealthCheckProbe.ExpectStatus int",
     health([{"type": "http", "port": "api_port", "expect_status": "200"}]), "health_check.checks[0].expect_status",
     "of type int"),
]


@pytest.mark.parametrize("name, source, manifest, field, words", HEALTH_CASES, ids=[c[0] for c in HEALTH_CASES])
def test_health_check_at_build(tmp_path, name, source, manifest, field, words):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", APP_WORKER)
    job(root, "app", manifest)
    result, text = build(root)
    if field is None:
        assert result.report.ok, "%s: %s" % (source, text)
        return
    assert [(p.kind, p.file, p.field) for p in result.report.errors] == [
        ("ErrInvalidManifest", "workspace/jobs/app/manifest.json", field)], text
    assert words in text


@pytest.mark.parametrize("source, port", [("tests/healthcheck_manifest_test.go TestBuildAllowsManifestAndCommandHealthCheck", 30010),
                                          ("workspace/health_check_test.go TestValidateHealthCheck_allowsManifestAndCommand", {})])
def test_manifest_and_command_health_check_build(tmp_path, source, port):
    """A manifest probe and a health_check job command together build (fixed or pool api_port)."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", APP_WORKER)
    job(root, "app", {"selectors": ["app"], "resources": {"ports": {"api_port": port}},
                      "health_check": {"checks": [{"type": "tcp", "port": "api_port"}]},
                      "commands": {"command_health": {"executed_on": ["health_check"]}}}, modules=["command_health.py"])
    assert build(root)[0].report.ok


def test_ssh_probe_is_honoured_and_stored_in_the_gate(tmp_path):
    """maand runs ssh probes on the worker (docs/reference/cli/health-check.md); so does maand.core now."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", APP_WORKER)
    job(root, "app", {"selectors": ["app"], "health_check": {"checks": [{"type": "ssh", "command": " true "}]}})
    result = build(root)[0]
    assert result.report.ok
    assert not [w for w in result.report.warnings if "health_check" in w.field]
    result.report.apply_strict()
    assert result.report.ok
    gate = [j for j in result.catalog["jobs"] if j["name"] == "app"][0]["health_gate"]
    assert gate["checks"] == [{"type": "ssh", "command": "true"}]


@pytest.mark.parametrize("globs, ok", [(["*.conf", "**/x.yml", "conf/*"], True), (["[a-"], False), ([" "], False)])
def test_restart_globs_validated(tmp_path, globs, ok):
    """workspace/restart_policy.go ValidateRestartGlobs -> utils/pathmatch ValidatePattern."""
    root = init_bucket(tmp_path)
    job(root, "a", {"restart_policy": "reload", "restart_globs": globs}, makefile="reload:\n\ttrue\n")
    result, text = build(root)
    assert result.report.ok == ok, text
    if not ok:
        assert result.report.errors[0].field.startswith("restart_globs[")


@pytest.mark.parametrize("makefile, ok", [
    ("start:\n\ttrue\nreload:\n\ttrue\n", True),
    (".PHONY: start reload\nstart reload:\n\ttrue\n", True),
    ("start:\n\ttrue\nRELOAD = 1\n", False),
    ("start:\n\ttrue\n# reload:\n", False),
    ("start:\n\ttrue\n", False),
])
def test_reload_policy_needs_a_reload_target(tmp_path, makefile, ok):
    root = init_bucket(tmp_path)
    job(root, "a", {"restart_policy": "reload"}, makefile=makefile)
    result, text = build(root)
    assert result.report.ok == ok, text
    if not ok:
        assert [(p.kind, p.file, p.field) for p in result.report.errors] == [
            ("ErrInvalidJob", "workspace/jobs/a/Makefile", "reload")]


def test_reload_target_with_include_only_warns(tmp_path):
    root = init_bucket(tmp_path)
    job(root, "a", {"restart_policy": "reload"}, makefile="include common.mk\nstart:\n\ttrue\n")
    result = build(root)[0]
    assert result.report.ok and any(w.field == "reload" for w in result.report.warnings)


def test_makefile_targets():
    assert makefile_targets("a b: c\nX := 1\nY = 2\nd:: e\n\tcmd: x\n.PHONY: f\n") == {"a", "b", "d", ".PHONY"}


# --- _prometheus/ (tests/build_prometheus_test.go; helper writePrometheusServerJob) ------------------

SCRAPE_IMPLICIT = "\n- job_name: api\n  metrics_path: /metrics\n  static_configs:\n    - targets:\n        - maand:port/_implicit\n"
ALERT_OK = "\ngroups:\n  - name: api\n    rules:\n      - alert: ApiDown\n        expr: up == 0\n"


def server_job(root):
    job(root, "prometheus", {"selectors": ["worker"], "resources": {"ports": {"prometheus_http_port": {}}}})
    ws(root, "jobs/prometheus/prometheus.yml.tpl", "global:\n  scrape_interval: 15s\nscrape_configs:\n{{ scrapeConfigs }}")


def app_job(root, name="api", ports=None, files=None):
    job(root, name, {"selectors": ["worker"], "resources": {"ports": ports or {}}})
    for rel, text in (files or {}).items():
        ws(root, "jobs/%s/_prometheus/%s" % (name, rel), text)


PROM_CASES = [
    ("scrapeAndKV", "TestBuildPrometheusCatalog_scrapeAndKV", True,
     lambda r: app_job(r, ports={"api_metrics_port": {}},
                       files={"scrape.yaml": SCRAPE_IMPLICIT, "alerts/slo.yaml": ALERT_OK}), None),
    ("scrapeWithoutAllocations", "TestBuildPrometheusCatalog_scrapeWithoutAllocations", True,
     lambda r: app_job(r, ports={"api_metrics_port": {}}, files={
         "scrape.yaml": "- job_name: api\n  static_configs:\n    - targets:\n        - maand:port/api_metrics_port\n"}), None),
    ("scrapeTemplateMutualExclusion", "TestBuildPrometheusCatalog_scrapeTemplateMutualExclusion", True,
     lambda r: app_job(r, files={"scrape.yaml": "- job_name: api\n", "scrape.yaml.tpl": "- job_name: api\n"}),
     "cannot define both scrape.yaml and scrape.yaml.tpl"),
    ("optionalWithoutPrometheusJob", "TestBuildPrometheusCatalog_optionalWithoutPrometheusJob", False,
     lambda r: app_job(r, files={"scrape.yaml": "- job_name: api\n", "scrape.yaml.tpl": "- job_name: api\n"}), None),
    ("maandJobPlaceholder", "TestBuildPrometheusCatalog_maandJobPlaceholder", True,
     lambda r: [app_job(r, n, ports={"metrics_port": {}}, files={
         "scrape.yaml": "- job_name: maand:job\n  static_configs:\n    - targets:\n        - maand:port/metrics_port\n"})
         for n in ("keeper_a", "keeper_b")], None),
    ("duplicateJobNameFails", "TestBuildPrometheusCatalog_duplicateJobNameFails", True,
     lambda r: [app_job(r, n, ports={"metrics_port": {}}, files={
         "scrape.yaml": "- job_name: same\n  static_configs:\n    - targets:\n        - maand:port/metrics_port\n"})
         for n in ("a", "b")], "duplicate prometheus job_name 'same'"),
    ("prometheusConfigMutualExclusion", "TestBuildPrometheusCatalog_prometheusConfigMutualExclusion", False,
     lambda r: (job(r, "prometheus", {"selectors": ["worker"]}), ws(r, "jobs/prometheus/prometheus.yml", "global: {}\n"),
                ws(r, "jobs/prometheus/prometheus.yml.tpl", "global: {}\n")),
     "cannot define both prometheus.yml and prometheus.yml.tpl"),
    ("ValidatePrometheusServerFiles_mutualExclusion", "workspace/prometheus_test.go TestValidatePrometheusServerFiles_mutualExclusion",
     False, lambda r: (job(r, "prom", "{}"), ws(r, "jobs/prom/prometheus.yml", "global: {}\n"),
                       ws(r, "jobs/prom/prometheus.yml.tpl", "global: {}\n")),
     "cannot define both prometheus.yml and prometheus.yml.tpl"),
    ("ValidatePrometheusServerFiles_singleFileOK", "workspace/prometheus_test.go TestValidatePrometheusServerFiles_singleFileOK",
     False, lambda r: (job(r, "prom2", "{}"), ws(r, "jobs/prom2/prometheus.yml.tpl", "global: {}\n")), None),
    ("runbookValidation", "TestBuildPrometheusCatalog_runbookValidation", True,
     lambda r: app_job(r, files={"alerts/slo.yaml": ALERT_OK + "        annotations:\n          runbook: Missing\n"}),
     "references missing runbook 'Missing'"),
    ("runbookPresent", "promconfig/alerts_test.go TestValidateAlertFile_runbookReference", True,
     lambda r: app_job(r, files={"alerts/slo.yaml": ALERT_OK + "        annotations:\n          runbook: ApiDown\n",
                                 "runbooks/ApiDown.md": "# down\n"}), None),
    ("duplicateAlertNameFails", "TestBuildPrometheusCatalog_duplicateAlertNameFails", True,
     lambda r: [app_job(r, n, files={"alerts/slo.yaml": ALERT_OK.replace("ApiDown", "SameAlert")}) for n in ("a", "b")],
     "duplicate alert name 'SameAlert' (jobs a and b)"),
    ("recordingRuleAllowed", "TestBuildPrometheusCatalog_recordingRuleAllowed, promconfig/alerts_test.go TestValidateAlertFile_recordingRule", True,
     lambda r: app_job(r, files={"alerts/rec.yaml": "groups:\n  - name: api\n    rules:\n      - record: api:up:sum\n"
                                                    "        expr: sum(up{job=\"api\"})\n"}), None),
    ("missingExprFails", "TestBuildPrometheusCatalog_missingExprFails, promconfig/alerts_test.go TestValidateAlertFile_missingExprFails", True,
     lambda r: app_job(r, files={"alerts/slo.yaml": "groups:\n  - name: api\n    rules:\n      - alert: ApiDown\n"}),
     "'ApiDown' missing expr"),
    ("alertAndRecordFails", "promconfig/alerts_test.go TestValidateAlertFile_alertAndRecordFails", True,
     lambda r: app_job(r, files={"alerts/slo.yaml": ALERT_OK + "        record: api:down\n"}),
     "must define either alert or record, not both"),
    ("noGroups", "promconfig/alerts.go parseAlertRuleFile", True,
     lambda r: app_job(r, files={"alerts/x.yml": "groups: []\n"}), "must define at least one group"),
    ("emptyAlertFile", "promconfig/alerts.go parseAlertRuleFile", True,
     lambda r: app_job(r, files={"alerts/x.yaml": "  \n"}), "_prometheus/alerts/x.yaml is empty"),
    ("groupWithoutName", "promconfig/alerts.go validateAlertRuleFile", True,
     lambda r: app_job(r, files={"alerts/x.yaml": "groups:\n  - rules: []\n"}), "groups[0] missing name"),
    ("badYaml", "promconfig/alerts.go parseAlertRuleFile", True,
     lambda r: app_job(r, files={"alerts/x.yaml": "groups: [\n"}), "invalid YAML"),
    ("sdForbidden", "promconfig/scrape.go ValidateScrapeConfigs", True,
     lambda r: app_job(r, files={"scrape.yaml": "- job_name: api\n  dns_sd_configs: []\n"}),
     "dns_sd_configs is not supported"),
    ("scrapeMissingJobName", "promconfig/scrape.go ValidateScrapeConfigs", True,
     lambda r: app_job(r, files={"scrape.yaml": "- metrics_path: /m\n"}), "scrape.yaml[0] missing job_name"),
    ("scrapeEmptyList", "promconfig/scrape.go ParseScrapeFile", True,
     lambda r: app_job(r, files={"scrape.yaml": "[]\n"}), "must contain at least one scrape item"),
    ("undeclaredPort", "promconfig/scrape.go validatePortPlaceholder", True,
     lambda r: app_job(r, files={"scrape.yaml": "- job_name: api\n  static_configs:\n    - targets: [maand:port/nope]\n"}),
     "port 'nope' is not declared in manifest resources.ports"),
    ("implicitAmbiguous", "promconfig/scrape_test.go TestResolveMetricsPortKey", True,
     lambda r: app_job(r, ports={"a_metrics_port": {}, "b_metrics_port": {}}, files={"scrape.yaml": SCRAPE_IMPLICIT}),
     "ambiguous metrics ports"),
    ("implicitMissing", "promconfig/scrape.go ResolveMetricsPortKey", True,
     lambda r: app_job(r, files={"scrape.yaml": SCRAPE_IMPLICIT}), "no metrics port is declared"),
    ("literalTarget", "promconfig/scrape_test.go TestExpandScrapeConfigs_literalTarget", True,
     lambda r: app_job(r, files={"scrape.yaml": "- job_name: external\n  static_configs:\n"
                                                "    - targets: [blackbox.internal:9115]\n"}), None),
]


@pytest.mark.parametrize("name, source, with_server, setup, words", PROM_CASES, ids=[c[0] for c in PROM_CASES])
def test_prometheus_folder_at_build(tmp_path, name, source, with_server, setup, words):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    if with_server:
        server_job(root)
    setup(root)
    result, text = build(root)
    if words is None:
        assert result.report.ok, "%s: %s" % (source, text)
        return
    assert {p.kind for p in result.report.errors} == {"ErrInvalidJob"}, text
    assert words in text, text
    assert all("prometheus" in "%s/%s" % (p.file, p.field) for p in result.report.errors)  # the file or the job's file named

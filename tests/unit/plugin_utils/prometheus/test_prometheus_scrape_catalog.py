"""The scrape catalog and the template functions (plugins/plugin_utils/prometheus/scrape_catalog.py,
scrape_template.py, funcs.py) on a built bucket, against maand's tests: tests/build_prometheus_test.go (the KV),
promconfig/scrape_template_test.go, deploy/templates_prometheus_test.go (TestTranspile_scrapeConfigsTemplate,
_ruleFilesTemplate, TestRenderScrapeConfigsYAML_skipsJobWithoutAllocations).
"""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions
from ansible_collections.maand.core.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.maand.core.plugins.plugin_utils.prometheus import funcs as _funcs, scrape_catalog as _scrape_catalog
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.prometheus.test_prometheus_scrape import API_SCRAPE


# --- a bucket: build's KV (tests/build_prometheus_test.go) and the deploy's function map ----------

SERVER_TPL = "global:\n  scrape_interval: 15s\nscrape_configs:\n{{ scrapeConfigs }}"
ALERT = "\ngroups:\n  - name: api\n    rules:\n      - alert: ApiDown\n        expr: up == 0\n"


def bucket(tmp_path, workers='[{"host":"10.0.0.1"}]', server=SERVER_TPL, jobs=None):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", workers)
    if server is not None:
        job(root, "prometheus", {"selectors": ["worker"], "resources": {"ports": {"prometheus_http_port": {}}}})
        ws(root, "jobs/prometheus/prometheus.yml.tpl", server)
    for name, (ports, files) in (jobs or {}).items():
        job(root, name, {"selectors": ["worker"], "resources": {"ports": {p: {} for p in ports}}})
        for rel, text in files.items():
            ws(root, "jobs/%s/_prometheus/%s" % (name, rel), text)
    return root


def built(root):
    result = _service.build(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    with open(os.path.join(root, "data", "catalog.json"), encoding="utf-8") as handle:
        catalog = json.load(handle)
    return catalog, _kv_build.read_kv(root)


def test_build_writes_scrape_kv(tmp_path):
    """TestBuildPrometheusCatalog_scrapeAndKV."""
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {
        "scrape.yaml": "\n- job_name: api\n  metrics_path: /metrics\n  static_configs:\n    - targets:\n"
                       "        - maand:port/_implicit\n", "alerts/slo.yaml": ALERT})})
    catalog, kv = built(root)
    assert kv["maand/prometheus"]["scrape_jobs"] == "api"
    assert kv["maand/prometheus"]["scrape_jobs_length"] == "1"
    assert "maand:port/_implicit" in kv["maand/prometheus"]["scrape_configs"]
    assert "10.0.0.1:" not in kv["maand/prometheus"]["scrape_configs"]
    assert kv["maand/job/api"]["job_name"] == "api"
    assert set(kv["maand/prometheus"]) == {"scrape_configs", "scrape/api", "scrape_jobs", "scrape_jobs_length"}


def test_build_scrape_without_allocations(tmp_path):
    """TestBuildPrometheusCatalog_scrapeWithoutAllocations: no worker, scrape/<job> still written."""
    root = bucket(tmp_path, workers="[]", jobs={"api": (["api_metrics_port"], {
        "scrape.yaml": API_SCRAPE})})
    dummy, kv = built(root)
    assert kv["maand/prometheus"]["scrape_jobs"] == ""
    assert kv["maand/prometheus"]["scrape_configs"] == "[]"
    assert "maand:port/api_metrics_port" in kv["maand/prometheus"]["scrape/api"]
    assert kv["maand/job/api"]["job_name"] == "api"


def test_build_renders_scrape_template(tmp_path):
    """TestBuildPrometheusCatalog_scrapeTemplate and scrape_template_test.go TestRenderScrapeTemplate."""
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {
        "scrape.yaml.tpl": '\n- job_name: {{ .Job }}\n  metrics_path: {{ get "vars/job/api" "metrics_path" }}\n'
                           '  static_configs:\n    - targets:\n        - maand:port/api_metrics_port\n'
                           '      labels:\n        version: "{{ .NewVersion }}"\n'})})
    ws(root, "jobs/api/vars.toml", 'metrics_path = "/metrics"\n')
    dummy, kv = built(root)
    per_job = kv["maand/prometheus"]["scrape/api"]
    assert '"job_name":"api"' in per_job and "maand:port/api_metrics_port" in per_job
    assert '"metrics_path":"/metrics"' in per_job and '"version":"0.0.0"' in per_job


@pytest.mark.parametrize("tpl, words", [
    ('- job_name: {{ get "vars/job/api" "nope" }}\n', "key nope not found in namespace vars/job/api"),
    ('- job_name: {{ getOptional "vars/job/api" "x" }}\n', 'function "getOptional" not defined'),
    ('- job_name: {{ get "maand/worker" "x" }}\n', "maand/worker namespace is not available for job api scrape"),
    ('- job_name: {{ .WorkerIP }}\n', "WorkerIP"),
    ('- job_name: a{{ int " 1" }}\n', 'strconv.Atoi: parsing " 1": invalid syntax'),  # no trim here, unlike deploy
    ("- job_name: api\n  dns_sd_configs: []\n", "dns_sd_configs is not supported"),
    ("- job_name: api\n  static_configs:\n    - targets: [maand:port/nope]\n", "port 'nope' is not declared"),
])
def test_bad_scrape_template_fails_the_build(tmp_path, tpl, words):
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml.tpl": tpl})})
    result = _service.build(root)
    assert not result.report.ok
    [problem] = result.report.errors
    assert problem.kind == "ErrInvalidJob" and problem.file == "workspace/jobs/api/_prometheus/scrape.yaml.tpl"
    assert words in str(problem), str(problem)
    assert not os.path.exists(os.path.join(root, "data", "kv.json"))


def test_without_server_job_the_kv_is_cleared(tmp_path):
    root = bucket(tmp_path, server=None, jobs={"api": (["api_metrics_port"], {"scrape.yaml": API_SCRAPE})})
    dummy, kv = built(root)
    assert kv["maand/prometheus"] == {"scrape_configs": "[]", "scrape_jobs": "", "scrape_jobs_length": "0"}
    assert kv["maand/job/api"]["job_name"] == "api"  # build_variables.go's; no scrape override without a server


def test_every_job_reads_maand_prometheus():
    """data/bucket_meta.go AllowedKVNamespaces ends with maand/prometheus."""
    assert "maand/prometheus" in _functions.allowed_namespaces("api", "10.0.0.1")


def render(root, catalog, kv, text, job_name="prometheus", host="10.0.0.1"):
    funcs = _funcs.template_funcs(root, catalog, kv)
    data = _functions.allocation_data(catalog, job_name, host)
    return _functions.render_allocation(text, "prometheus.yml.tpl", data, kv, extra_funcs=funcs)


def test_prometheus_yml_tpl_renders_scrape_configs(tmp_path):
    """deploy/templates_prometheus_test.go TestTranspile_scrapeConfigsTemplate (maand's docs' template)."""
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml": API_SCRAPE})})
    catalog, kv = built(root)
    port = next(j for j in catalog["jobs"] if j["name"] == "api")["ports"]["api_metrics_port"]
    tpl = ("global:\n  scrape_interval: 15s\n\nscrape_configs:\n  - job_name: prometheus\n    static_configs:\n"
           "      - targets: ['127.0.0.1:9090']\n{{ scrapeConfigs }}\n")
    text = render(root, catalog, kv, tpl)
    assert text == ("global:\n  scrape_interval: 15s\n\nscrape_configs:\n  - job_name: prometheus\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:9090']\n\n  - job_name: api\n    static_configs:\n      - targets:\n"
                    "          - 10.0.0.1:%d\n" % port)


def test_scrape_configs_skip_jobs_without_allocations(tmp_path):
    """TestRenderScrapeConfigsYAML_skipsJobWithoutAllocations: the KV lists api, the catalog has no active allocation."""
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml": API_SCRAPE})})
    catalog, kv = built(root)
    for alloc in catalog["allocations"]:
        if alloc["job"] == "api":
            alloc["state"] = "disabled"
    assert _scrape_catalog.render_scrape_configs(root, catalog, kv).strip() == ""


def test_scrape_configs_fall_back_to_the_workspace_without_kv(tmp_path):
    """RenderScrapeConfigsYAML reads the workspace's scrape files when the KV has no scrape_jobs."""
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml": API_SCRAPE})})
    catalog, kv = built(root)
    without = {ns: keys for ns, keys in kv.items() if ns != "maand/prometheus"}
    assert _scrape_catalog.render_scrape_configs(root, catalog, without) == _scrape_catalog.render_scrape_configs(root, catalog, kv)
    assert "10.0.0.1:" in _scrape_catalog.render_scrape_configs(root, catalog, kv)


def test_prometheus_yml_tpl_renders_rule_files(tmp_path):
    """TestTranspile_ruleFilesTemplate: maand's certs rules first, then every job's alert files."""
    root = bucket(tmp_path, server="global:\n  scrape_interval: 15s\n{{ ruleFiles }}\n",
                  jobs={"api": ([], {"alerts/slo.yaml": ALERT}),
                        "web": ([], {"alerts/errors.yml": ALERT.replace("ApiDown", "WebDown"), "alerts/notes.txt": "x"})})
    catalog, kv = built(root)
    text = render(root, catalog, kv, "global:\n  scrape_interval: 15s\n{{ ruleFiles }}\n")
    assert text == ("global:\n  scrape_interval: 15s\nrule_files:\n  - rules/maand/certs.yaml\n  - rules/api/slo.yaml\n"
                    "  - rules/web/errors.yml\n\n")


def test_bad_scrape_at_deploy_is_a_template_error_naming_the_job(tmp_path):
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml": API_SCRAPE.replace(
        "api_metrics_port\n", "api_metrics_port/10.9.9.9\n")})})
    catalog, kv = built(root)
    with pytest.raises(_gotemplate.TemplateError) as err:
        render(root, catalog, kv, "{{ scrapeConfigs }}")
    assert 'worker "10.9.9.9" is not an active allocation for job api' in str(err.value)


def test_function_map_parses_for_build():
    assert set(_funcs.PARSE_FUNCS) == set(_funcs.FUNC_NAMES) == {"scrapeConfigs", "ruleFiles"}
    with pytest.raises(_prometheus.PrometheusError):
        _funcs.PARSE_FUNCS["scrapeConfigs"]()


def test_build_reads_alert_and_scrape_files_as_maand(tmp_path):
    """One reader (go-yaml v3 rules): merge keys in alerts, `job_name: yes` is the string yes."""
    alerts = ("groups:\n  - name: api\n    rules:\n      - &base\n        alert: A\n        expr: up == 0\n"
              "      - <<: *base\n        alert: B\n")
    root = bucket(tmp_path, jobs={"api": (["metrics_port"], {
        "alerts/a.yaml": alerts,
        "scrape.yaml": "- job_name: yes\n  static_configs:\n    - targets: [maand:port/_implicit]\n"})})
    catalog, kv = built(root)
    assert kv["maand/job/api"]["job_name"] == "yes"
    assert '"job_name":"yes"' in kv["maand/prometheus"]["scrape/api"]
    assert '\n  - job_name: "yes"\n' in _scrape_catalog.render_scrape_configs(root, catalog, kv)
    ws(root, "jobs/api/_prometheus/alerts/a.yaml", alerts.replace("alert: B", "alert: A"))
    result = _service.build(root)
    assert "duplicate alert name 'A'" in " ".join(str(p) for p in result.report.errors)


# --- issue 32 N2: a scrape template's secrets stay sealed ---------------------------------------------

SECRET_SCRAPE = ("- job_name: maand:job\n  basic_auth:\n    username: u\n    password: {{ getSecret \"pw\" }}\n"
                 "  static_configs:\n    - targets: [maand:port/_implicit]\n")


def _with_secret(root, value="s3cret-scrape-pw"):
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    with _store.KVStore.edit(root) as store:
        store.put("secrets/job/api", "pw", value)


def test_a_scrape_template_that_reads_a_secret_is_kept_in_the_sealed_namespace(tmp_path):
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml.tpl": SECRET_SCRAPE}),
                                  "web": (["web_metrics_port"], {"scrape.yaml": API_SCRAPE.replace("api", "web")})})
    _with_secret(root)
    catalog, kv = built(root)
    assert "scrape/api" not in kv["maand/prometheus"] and "s3cret-scrape-pw" not in json.dumps(kv)
    assert _prometheus.SEALED_NAMESPACE not in kv  # read_kv leaves secrets out unless masked or revealed
    assert _kv_build.read_kv(root, mask="***")[_prometheus.SEALED_NAMESPACE] == {"scrape/api": "***",
                                                                                 "scrape_configs": "***"}
    sealed = _kv_build.read_kv(root, reveal_secrets=True)
    assert "s3cret-scrape-pw" in sealed[_prometheus.SEALED_NAMESPACE]["scrape/api"]
    assert "web_metrics_port" in sealed[_prometheus.SEALED_NAMESPACE]["scrape_configs"]
    assert "s3cret-scrape-pw" not in sealed["maand/prometheus"]["scrape_configs"]
    assert sealed["maand/prometheus"]["scrape_jobs"] == "api,web"
    rendered = _prometheus.render_scrape(root, catalog, sealed)
    assert rendered.secret and "s3cret-scrape-pw" in rendered.text and "web_metrics_port" not in rendered.text
    masked = _kv_build.read_kv(root, mask="***")
    hidden = _prometheus.render_scrape(root, catalog, masked, reveal=False)
    assert hidden.hidden == ("api",) and "s3cret-scrape-pw" not in hidden.text and "10.0.0.1:" in hidden.text
    plain = _prometheus.render_scrape(root, catalog, sealed, only=["web"])
    assert not plain.secret


def test_scrape_configs_mark_the_deploys_render_secret_bearing(tmp_path):
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {"scrape.yaml.tpl": SECRET_SCRAPE})})
    _with_secret(root)
    catalog, _kv = built(root)
    kv = _kv_build.read_kv(root, reveal_secrets=True)
    funcs = _funcs.template_funcs(root, catalog, kv)
    assert funcs["scrapeConfigs"].reads_secret() is False  # not computed yet
    tracker = _functions.SecretTracker()
    watched = tracker.watch(funcs)
    assert "s3cret-scrape-pw" in watched["scrapeConfigs"]() and tracker.secret
    other = _functions.SecretTracker()
    other.watch(funcs)["ruleFiles"]()
    assert not other.secret


def test_a_scrape_template_error_never_shows_the_secret_it_read(tmp_path):
    root = bucket(tmp_path, jobs={"api": (["api_metrics_port"], {
        "scrape.yaml.tpl": "- job_name: x{{ int (getSecret \"pw\") }}\n"})})
    _with_secret(root, "not-a-number-s3cret")
    result = _service.build(root)
    text = " ".join(str(p) for p in result.report.errors)
    assert "strconv.Atoi" in text and "not-a-number-s3cret" not in text and "***" in text, text

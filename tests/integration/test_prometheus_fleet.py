"""A real Prometheus server (Debian's `prometheus` package, 2.42) deployed by the collection as the bucket's
server job on a 2-host fleet, as maand's guides/prometheus.md sets it up: its `prometheus.yml.tpl` calls
`{{ scrapeConfigs }}` and `{{ ruleFiles }}`, the deploy lays `rules/<job>/` (runbook URLs),
`rules/maand/certs.yaml`, `consoles/runbooks` and `consoles/dashboards` over its tree, and Prometheus' own
HTTP API shows the rules loaded (with runbook_url) and the opted-in job's targets scraped. A changed alert
reloads the server. The `api` job also renders every template function docs/templates.md names. After each
deploy (and from the maand.core.cert_metrics playbook) the collection pushes maand's certificate expiry
gauges by remote write (the server runs with --web.enable-remote-write-receiver, as maand's guide says), and
Prometheus' query API gives them back with the certificates' NotAfter.

The steps share one bucket and one 2-host fleet and run in file order.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.parse
import urllib.request

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import SERVER_PY, fleet_bucket, write

PROMETHEUS = shutil.which("prometheus")
pytestmark = [pytest.mark.fleet, pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus (apt-get install prometheus)")]

PROM_TPL = """global:
  scrape_interval: 1s
  evaluation_interval: 1s

scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:{{ get "maand/bucket" "prometheus_port_http" }}']
{{ scrapeConfigs }}

{{ ruleFiles }}
"""
# the server: started in the background, reloaded with SIGHUP (maand's guide: --web.enable-lifecycle)
PROM_MAKEFILE = """\
.PHONY: start stop restart reload status
PID = data/prometheus.pid
running = { [ -f $(PID) ] && kill -0 $$(cat $(PID)); } 2>/dev/null
start:
\tmkdir -p data logs
\techo start >> logs/events.log
\tif ! $(running); then setsid nohup %s --config.file=prometheus.yml --storage.tsdb.path=data/tsdb \\
--web.listen-address=0.0.0.0:$(PROMETHEUS_PORT_HTTP) --web.enable-lifecycle --web.enable-remote-write-receiver \\
--web.console.templates=consoles --web.console.libraries=consoles </dev/null >>logs/prometheus.log 2>&1 & echo $$! > $(PID); fi
stop:
\techo stop >> logs/events.log
\tif $(running); then kill $$(cat $(PID)); fi
\trm -f $(PID)
restart: stop start
reload:
\techo reload >> logs/events.log
\tkill -HUP $$(cat $(PID))
status:
\t$(running)
""" % PROMETHEUS
# the scraped job: serves its folder (metrics is a static exposition file) on its pool port
API_MAKEFILE = """\
.PHONY: start stop restart reload status
PID = data/http.pid
running = { [ -f $(PID) ] && kill -0 $$(cat $(PID)); } 2>/dev/null
start restart reload:
\tmkdir -p data logs
\tif $(running); then kill $$(cat $(PID)); sleep 0.2; fi
\tsetsid nohup /usr/bin/python3 server.py $(API_METRICS_PORT) </dev/null >>logs/http.log 2>&1 & echo $$! > $(PID)
stop:
\tif $(running); then kill $$(cat $(PID)); fi
status:
\t$(running)
"""
SCRAPE = """\
- job_name: maand:job
  metrics_path: /metrics
  static_configs:
    - targets:
        - maand:port/api_metrics_port
      labels:
        maand_job: maand:job
"""
ALERTS = """\
groups:
  - name: api
    rules:
      - alert: ApiDown
        expr: up{job="api"} == 0
        for: 1m
        labels:
          severity: critical
        annotations:
          summary: "API {{ $labels.instance }} down"
          runbook: ApiDown
      - record: api:up:sum
        expr: sum(up{job="api"})
"""
RUNBOOK = "# Api Down\n\nCheck the process:\n\n```bash\ndocker ps --format \"{{.Names}}\"\n```\n"
# every function of docs/templates.md's list, through a real deploy
FUNCS_TPL = """\
get={{ get "vars/job/api" "service" }}
getOptional={{ getOptional "vars/job/api" "missing" }}|{{ getOptional "vars/job/api" "service" }}
getSecret={{ getSecret "token" }}
keys={{ join (keys "vars/job/api") "," }}
split={{ index (split "a:b:c" ":") 1 }}
trim=[{{ trim "  padded  " }}]
join={{ join (split "x y z" " ") "+" }}
upper={{ upper "shout" }} lower={{ lower "QUIET" }}
add={{ add 2 3 }} sub={{ sub 10 4 }} mul={{ mul 6 7 }} div={{ div 9 2 }}
min={{ min 5 3 8 }} max={{ max 5 3 8 }}
int={{ add (int (get "vars/job/api" "threads")) 1 }}
scrapeConfigs={{ if scrapeConfigs }}yes{{ end }} ruleFiles={{ if ruleFiles }}yes{{ end }}
"""
FUNCS_OUT = """\
get=api-gateway
getOptional=|api-gateway
getSecret=t0ken-value
keys=service,threads
split=b
trim=[padded]
join=x+y+z
upper=SHOUT lower=quiet
add=5 sub=6 mul=42 div=4
min=3 max=8
int=5
scrapeConfigs=yes ruleFiles=yes
"""


class Env(deploy_env.Env):
    def ws(self, rel):
        return self.bucket / "workspace" / rel

    def ports(self, job):
        return next(j for j in self.catalog()["jobs"] if j["name"] == job)["ports"]

    def server(self):
        return self.hosts[0]

    def api(self, path):
        url = "http://%s:%d%s" % (self.server(), self.ports("prometheus")["prometheus_port_http"], path)
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - the fleet's own server
            return response.read().decode("utf-8")

    def api_json(self, path):
        doc = json.loads(self.api(path))
        assert doc["status"] == "success", doc
        return doc["data"]

    def wait_for(self, what, probe, seconds=60):
        """probe() until it returns a true value; the last value (or error) in the failure."""
        deadline, last = time.monotonic() + seconds, None
        while time.monotonic() < deadline:
            try:
                last = probe()
                if last:
                    return last
            except (OSError, ValueError, KeyError, AssertionError) as exc:
                last = exc
            time.sleep(0.5)
        raise AssertionError("%s: not within %d s; last: %r" % (what, seconds, last))

    def rules(self):
        return {rule["name"]: rule for group in self.api_json("/api/v1/rules")["groups"] for rule in group["rules"]}

    def rules_with(self, name):
        """The loaded rules by name once name is among them, else None."""
        rules = self.rules()
        return rules if name in rules else None


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = tmp_path_factory.mktemp("prom") / "bucket"
    fleet_bucket(bucket, fleet.state_dir)
    workers = json.loads((bucket / "workspace" / "workers.json").read_text())
    workers[0]["labels"].append("prometheus")  # the server job (selectors default to its name) on the first worker
    write(bucket / "workspace" / "workers.json", json.dumps(workers, indent=2))
    prom = bucket / "workspace" / "jobs" / "prometheus"
    write(prom / "manifest.json", json.dumps({
        "version": "2.42.0", "restart_policy": "reload",
        "resources": {"ports": {"prometheus_port_http": {}}},
        "health_check": {"checks": [{"type": "http", "port": "prometheus_port_http", "path": "/-/ready",
                                     "expect_status": 200}],
                         "wait": {"attempts": 40, "interval_seconds": 0.5}}}, indent=2))
    write(prom / "Makefile", PROM_MAKEFILE)
    write(prom / "prometheus.yml.tpl", PROM_TPL)
    api = bucket / "workspace" / "jobs" / "api"
    write(api / "manifest.json", json.dumps({  # one key pair for both workers: one RSA key to make, not two
        "version": "1.0.0", "selectors": ["worker"], "resources": {"ports": {"api_metrics_port": {}}},
        "certs": {"tls": {"one": True, "subject": {"common_name": "api.internal"}}}}, indent=2))
    write(api / "Makefile", API_MAKEFILE)
    write(api / "server.py", SERVER_PY)
    write(api / "metrics", "# TYPE maand_test_requests counter\nmaand_test_requests 7\n")
    write(api / "vars.toml", 'service = "api-gateway"\nthreads = "4"\n')
    write(api / "funcs.txt.tpl", FUNCS_TPL)
    write(api / "_prometheus" / "scrape.yaml", SCRAPE)
    write(api / "_prometheus" / "alerts" / "slo.yaml", ALERTS)
    write(api / "_prometheus" / "runbooks" / "ApiDown.md", RUNBOOK)
    write(api / "_prometheus" / "dashboards" / "overview.html", "<html><title>API overview</title>ok</html>")
    quiet = bucket / "workspace" / "jobs" / "quiet"  # no _prometheus/: never scraped
    write(quiet / "manifest.json", json.dumps({"version": "1.0.0", "selectors": ["worker"],
                                               "resources": {"ports": {"quiet_metrics_port": {}}}}))
    write(quiet / "Makefile", ".PHONY: start stop restart\nstart stop restart:\n\ttrue\n")
    environment = Env(fleet, bucket)
    yield environment
    environment.playbook("job", "-e", "maand_job=prometheus", "-e", "maand_target=stop")  # the fleet's teardown kills it too


def test_01_build_and_deploy_ship_the_server_job_as_maand(env):
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store

    env.play("build")
    with _store.KVStore.edit(str(env.bucket)) as store:
        store.put("secrets/job/api", "token", "t0ken-value")
    rc, out = env.play("deploy")
    env.first_deploy = out
    server, port = env.server(), env.ports("prometheus")["prometheus_port_http"]
    job = env.job(server, "prometheus")
    config = (job / "prometheus.yml").read_text()
    metrics_port = env.ports("api")["api_metrics_port"]
    for host in env.hosts:
        assert "%s:%d" % (host, metrics_port) in config, config
    assert "quiet" not in config
    assert "  - rules/maand/certs.yaml\n  - rules/api/slo.yaml" in config, config
    rules = (job / "rules" / "api" / "slo.yaml").read_text()
    assert "runbook_url: http://%s:%d/consoles/runbooks/api/ApiDown.html" % (server, port) in rules, rules
    assert "runbook:" not in rules
    assert "maand_cert_expiring" in (job / "rules" / "maand" / "certs.yaml").read_text()
    assert "<h1>Api Down</h1>" in (job / "consoles" / "runbooks" / "api" / "ApiDown.html").read_text()
    assert 'href="api/ApiDown.html"' in (job / "consoles" / "runbooks" / "index.html").read_text()
    assert ">API overview</a>" in (job / "consoles" / "dashboards" / "index.html").read_text()
    assert (job / "consoles" / "dashboards" / "api" / "overview.html").exists()
    assert not (env.job(server, "api") / "rules").exists() and not (env.job(server, "api") / "_prometheus").exists()
    for host in env.hosts:  # every function docs/templates.md names, rendered on each worker
        text = (env.job(host, "api") / "funcs.txt").read_text()
        assert text == FUNCS_OUT, text


def test_02_prometheus_loads_the_rules_with_runbook_urls(env):
    server, port = env.server(), env.ports("prometheus")["prometheus_port_http"]
    rules = env.wait_for("rules loaded", lambda: env.rules_with("ApiDown"))
    assert rules["ApiDown"]["annotations"]["runbook_url"] == \
        "http://%s:%d/consoles/runbooks/api/ApiDown.html" % (server, port)
    assert "runbook" not in rules["ApiDown"]["annotations"]
    assert rules["ApiDown"]["health"] == "ok" and rules["api:up:sum"]["type"] == "recording"
    assert {"maand cert expiring soon", "maand cert expired", "maand ca cert expiring soon",
            "maand ca cert expired"} <= set(rules)
    files = {group["file"] for group in env.api_json("/api/v1/rules")["groups"]}
    assert files == {"rules/maand/certs.yaml", "rules/api/slo.yaml"}


def test_03_prometheus_scrapes_the_jobs_that_opt_in(env):
    metrics_port = env.ports("api")["api_metrics_port"]
    want = {"%s:%d" % (host, metrics_port) for host in env.hosts}

    def up():
        targets = env.api_json("/api/v1/targets?state=active")["activeTargets"]
        api = {t["labels"]["instance"]: t for t in targets if t["labels"]["job"] == "api"}
        jobs = {t["labels"]["job"] for t in targets}
        return (api, jobs) if set(api) == want and all(t["health"] == "up" for t in api.values()) else None
    api, jobs = env.wait_for("api targets up", up)
    assert jobs == {"prometheus", "api"}  # quiet did not opt in
    assert all(t["labels"]["maand_job"] == "api" for t in api.values())
    result = env.wait_for("a scraped sample", lambda: env.api_json(
        "/api/v1/query?query=maand_test_requests")["result"])
    assert {r["metric"]["instance"] for r in result} <= want and {r["value"][1] for r in result} == {"7"}


def not_after(pem):
    from cryptography import x509
    return int(x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc.timestamp())


def last_pushed(env, name):
    """{(scope, worker): result} of the gauge's last sample within the hour (a pushed sample is stale for
    instant queries 5 minutes after its push: last_over_time keeps the test free of that race)."""
    query = urllib.parse.urlencode({"query": "last_over_time(%s[1h])" % name})
    return {(r["metric"]["scope"], r["metric"].get("worker", "-")): r
            for r in env.api_json("/api/v1/query?" + query)["result"]}


def pushes(env):
    query = urllib.parse.urlencode({"query": 'count_over_time(maand_cert_expired{scope="ca"}[1h])'})
    result = env.api_json("/api/v1/query?" + query)["result"]
    return int(result[0]["value"][1]) if result else 0


def test_03b_the_deploy_pushed_the_cert_expiry_gauges_and_prometheus_gives_them_back(env):
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build

    url = "http://%s:%d/api/v1/write" % (env.server(), env.ports("prometheus")["prometheus_port_http"])
    assert "cert metrics: pushed 9 series (3 certificates) to %s" % url in env.first_deploy, env.first_deploy
    kv = _kv_build.read_kv(str(env.bucket))
    leaf = not_after(kv["maand/job/api/worker/%s" % env.hosts[0]]["certs/tls.crt"])
    ca = not_after((env.bucket / "secrets" / "ca.crt").read_text())
    want = {("ca", "-"), ("job", env.hosts[0]), ("job", env.hosts[1])}

    def all_pushed():
        found = last_pushed(env, "maand_cert_not_after_seconds")
        return found if set(found) == want else None
    got = env.wait_for("the pushed gauges", all_pushed)
    assert got[("ca", "-")]["metric"] == {"__name__": "maand_cert_not_after_seconds", "scope": "ca", "cert": "ca",
                                          "common_name": env.bucket_id, "status": "ok"}
    assert got[("ca", "-")]["value"][1] == str(ca)
    for host in env.hosts:
        assert got[("job", host)]["metric"] == {"__name__": "maand_cert_not_after_seconds", "scope": "job",
                                                "job": "api", "worker": host, "cert": "tls",
                                                "common_name": "api.internal", "status": "ok"}
        assert got[("job", host)]["value"][1] == str(leaf)
    for name in ("maand_cert_expiring", "maand_cert_expired"):
        flags = last_pushed(env, name)
        assert set(flags) == want and {r["value"][1] for r in flags.values()} == {"0"}, flags
    assert pushes(env) == 1
    rc, out = env.play("cert_metrics")  # the verb (cron) pushes once more
    assert "cert metrics: pushed 9 series (3 certificates) to %s" % url in out, out
    assert env.wait_for("a second sample", lambda: pushes(env) == 2)
    rc, out = env.play("cert_metrics", "--check")
    assert "cert metrics: would push 9 series (3 certificates) to %s" % url in out, out


def test_03c_cat_prometheus_shows_the_jobs_files_and_the_scrape_configs_as_maand(env):
    rc, out = env.play("cat", "-e", "maand_cat=prometheus")
    assert re.search(r"^api\s+yes\s+1\s+1\s+1$", out, re.M), out
    assert "Prometheus server job: prometheus" in out
    rc, out = env.play("cat", "-e", "maand_cat=prometheus", "-e", "maand_jobs=api", "-e", "maand_file=scrape")
    assert SCRAPE.rstrip("\n") in out, out
    rc, out = env.play("cat", "-e", "maand_cat=prometheus", "-e", "maand_scrape=true")
    metrics_port = env.ports("api")["api_metrics_port"]
    assert all("- %s:%d" % (host, metrics_port) in out for host in env.hosts), out
    rc, out = env.play("cat", "-e", "maand_cat=jobs", "-e", "maand_scrape=true", check=False)
    assert rc != 0 and "belong to the prometheus view, not jobs" in out, out


def test_04_the_runbook_console_is_served_with_its_template_literals_intact(env):
    page = env.api("/consoles/runbooks/api/ApiDown.html")
    assert "<h1>Api Down</h1>" in page
    assert 'docker ps --format &#34;{{.Names}}&#34;' in page or 'docker ps --format &quot;{{.Names}}&quot;' in page, page
    assert ">API overview</a>" in env.api("/consoles/dashboards/index.html")


def test_05_a_changed_alert_reloads_the_server_only(env):
    write(env.ws("jobs/api/_prometheus/alerts/slo.yaml"), ALERTS + """\
      - alert: ApiSlow
        expr: sum(rate(maand_test_requests[1m])) > 100
        annotations:
          runbook: ApiDown
""")
    env.play("build")
    rc, plan = env.play("deploy", "--check", "--diff")
    assert re.search(r"prometheus\s+%s\s+reload\s+prometheus changed: rules/api/slo\.yaml" % re.escape(env.server()),
                     plan), plan
    assert re.search(r"api\s+\(2 workers\)\s+skip\s+unchanged", plan), plan
    assert "cert metrics: would push 9 series (3 certificates)" in plan, plan  # --check sends nothing
    env.play("deploy")
    events = (env.job(env.server(), "prometheus") / "logs" / "events.log").read_text().split()
    assert events == ["start", "reload"], events
    rules = env.wait_for("the new rule", lambda: env.rules_with("ApiSlow"))
    assert rules["ApiSlow"]["annotations"]["runbook_url"].endswith("/consoles/runbooks/api/ApiDown.html")


def test_06_a_second_deploy_changes_nothing(env):
    before = pushes(env)
    rc, out = env.play("deploy")
    assert "no changes required" in out, out
    assert "cert metrics: pushed 9 series" in out, out  # as maand: after every deploy, a no-op one too
    assert env.wait_for("the push of a no-op deploy", lambda: pushes(env) == before + 1)

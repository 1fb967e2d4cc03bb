"""maand's KV read rules and template function map (_kv), from maand's own tests and docs.

Sources (maand-sh/maand): deploy/templates_funcs_test.go, deploy/templates_test.go,
deploy/templates_secret_test.go, data/ AllowedKVNamespaces(WithUpstream),
docs/reference/templates.md and docs/reference/kv/namespaces.md (end-to-end example).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions

IP = "10.0.0.1"


def render(text, kv, job="app", ip=IP, upstream=(), deleted=None, **fields):
    data = _functions.AllocationData(Job=job, WorkerIP=ip, **fields)
    return _functions.render_allocation(text, "config.tpl", data, kv, upstream, deleted)


def funcs(kv, job="app", ip=IP, upstream=()):
    return _functions.template_funcs(_functions.KVReader(kv, job, ip, tuple(upstream)))


# --- templates_funcs_test.go -------------------------------------------------------------------

def test_func_map_secret_and_helpers():
    f = funcs({"secrets/job/app": {"token": "abc123"}})
    assert f["getSecret"]("token") == "abc123"
    assert f["add"](1, 2) == 3
    assert f["upper"]("hello") == "HELLO"
    assert f["int"]("42") == 42
    assert f["int"](" 42\n") == 42  # deploy/templates.go templateInt trims first


def test_func_map_math_and_string_helpers():
    f = funcs({})
    assert f["add"](3, 4) == 7
    assert f["sub"](3, 2) == 1
    assert f["mul"](3, 4) == 12
    assert f["div"](8, 4) == 2
    assert f["split"]("a,b", ",") == ["a", "b"]
    assert f["lower"]("HELLO") == "hello"
    assert f["join"](["a", "b"], "-") == "a-b"
    assert f["int"](99) == 99


def test_get_refuses_a_disallowed_namespace():
    with pytest.raises(_functions.KVError, match="vars/job/other namespace is not available for job app"):
        funcs({"vars/job/other": {"name": "x"}})["get"]("vars/job/other", "name")


def test_get_and_keys():
    f = funcs({"vars/job/app": {"name": "maand"}})
    assert f["get"]("vars/job/app", "name") == "maand"
    assert f["keys"]("vars/job/app") == ["name"]


# --- templates_test.go / templates_secret_test.go ----------------------------------------------

def test_renders_template():
    assert render('hello {{ get "vars/job/app" "name" }}',
                  {"vars/job/app": {"name": "world"}}) == "hello world"


POSTGRES = """{{ define "pgMemUnit" -}}
{{- $mb := int . -}}
{{- if ge $mb 1024 -}}
{{- div $mb 1024 -}}GB
{{- else -}}
{{- $mb -}}MB
{{- end -}}
{{- end }}
{{- $clonefrom := eq (get (printf "maand/worker/%s" .WorkerIP) "postgres_allocation_index") "1" -}}
{{- $memMB := int (get "vars/job/postgres" "memory") -}}
{{- $sharedMB := div $memMB 4 -}}
{{- $cacheMB := div (mul $memMB 3) 4 -}}
{{- $maintMB := min 2048 (div $memMB 16) -}}
{{- $workMB := min 128 (max 4 (div $memMB 64)) -}}
clone_from = {{ $clonefrom }}
shared_buffers = {{ template "pgMemUnit" $sharedMB }}
effective_cache_size = {{ template "pgMemUnit" $cacheMB }}
maintenance_work_mem = {{ $maintMB }}MB
work_mem = {{ $workMB }}MB
"""


def test_postgres_style_memory_template():
    kv = {"vars/job/postgres": {"memory": "8192"},
          "maand/worker/10.0.0.1": {"postgres_allocation_index": "1"}}
    out = render(POSTGRES, kv, job="postgres")
    assert "clone_from = true" in out
    assert "shared_buffers = 2GB" in out
    assert "effective_cache_size = 6GB" in out
    assert "maintenance_work_mem = 512MB" in out
    assert "work_mem = 128MB" in out


def test_small_memory_stays_in_mb():
    out = render(POSTGRES, {"vars/job/postgres": {"memory": "2000"},
                            "maand/worker/10.0.0.1": {"postgres_allocation_index": "0"}},
                 job="postgres")
    assert "clone_from = false" in out and "shared_buffers = 500MB" in out
    assert "effective_cache_size = 1GB" in out and "work_mem = 31MB" in out


def test_template_get_secret():
    assert render('token={{ getSecret "token" }}',
                  {"secrets/job/app": {"token": "abc123"}}) == "token=abc123"


def test_get_reads_the_secrets_namespace():
    assert render('{{ get "secrets/job/app" "token" }}',
                  {"secrets/job/app": {"token": "secret-value"}}) == "secret-value"


# --- read rules (data AllowedKVNamespaces / WithUpstream, namespaces.md) -----------------------

def test_allowed_namespaces_for_a_job_on_a_worker():
    assert _functions.allowed_namespaces("api", IP) == [
        "maand/bucket", "vars/bucket", "maand/worker", "maand/worker/10.0.0.1",
        "maand/worker/10.0.0.1/tags", "maand/job/api", "vars/bucket/job/api", "vars/job/api",
        "secrets/job/api", "maand/job/api/worker/10.0.0.1", "maand/prometheus"]  # maand data/bucket_meta.go


def test_upstream_jobs_add_their_job_vars_and_secrets():
    allowed = _functions.allowed_namespaces("web", IP, ["db"])
    assert allowed[-3:] == ["maand/job/db", "vars/job/db", "secrets/job/db"]
    assert "vars/bucket/job/db" not in allowed
    assert "maand/job/db/worker/10.0.0.1" not in allowed


@pytest.mark.parametrize("namespace", [
    "vars/job/db", "secrets/job/db", "maand/job/db", "maand/worker/10.0.0.2",
    "maand/job/app/worker/10.0.0.2", "vars/bucket/job/db"])
def test_other_jobs_and_workers_are_not_readable(namespace):
    with pytest.raises(_gotemplate.TemplateError) as err:
        render('{{ get "%s" "k" }}' % namespace, {namespace: {"k": "v"}})
    assert "%s namespace is not available for job app" % namespace in str(err.value)


def test_a_demanded_job_is_readable():
    kv = {"vars/job/db": {"user": "admin"}, "secrets/job/db": {"pw": "p"}}
    assert render('{{ get "vars/job/db" "user" }}/{{ get "secrets/job/db" "pw" }}', kv,
                  upstream=["db"]) == "admin/p"


def test_ports_are_readable_by_every_job():
    assert render('{{ get "maand/bucket" "db_port" }}', {"maand/bucket": {"db_port": "30001"}},
                  job="anything") == "30001"


def test_missing_key_fails_with_file_line_column_and_key():
    with pytest.raises(_gotemplate.TemplateError) as err:
        render('a\nb {{ get "vars/job/app" "nope" }}', {"vars/job/app": {}})
    exc = err.value
    assert (exc.name, exc.line, exc.column) == ("config.tpl", 2, 5)
    # Go cuts the context at 20 characters (parse.Tree.ErrorContext)
    assert str(exc) == ('template: config.tpl:2:5: executing "config.tpl" at <get "vars/job/app"'
                        ' "...>: error calling get: key nope not found in namespace vars/job/app')


def test_get_optional_returns_empty_for_missing_key_or_namespace():
    assert render('[{{ getOptional "vars/job/app" "nope" }}]', {}) == "[]"
    assert render('[{{ getOptional "maand/job/app" "workers" }}]',
                  {"maand/job/app": {"workers": "a,b"}}) == "[a,b]"


def test_get_optional_still_refuses_a_disallowed_namespace():
    with pytest.raises(_gotemplate.TemplateError, match="not available for job app"):
        render('{{ getOptional "vars/job/other" "x" }}', {})


def test_deleted_keys_are_missing():
    kv = {"vars/job/app": {"a": "1", "b": "2"}}
    deleted = {"vars/job/app": ["a"]}
    with pytest.raises(_gotemplate.TemplateError, match="key a not found"):
        render('{{ get "vars/job/app" "a" }}', kv, deleted=deleted)
    assert render('{{ getOptional "vars/job/app" "a" }}|{{ keys "vars/job/app" }}', kv,
                  deleted=[["vars/job/app", "a"]]) == "|[b]"


def test_deleted_must_name_namespace_and_key():
    with pytest.raises(_functions.KVError, match="namespace, key"):
        _functions.normalize_deleted(["vars/job/app/a"])


def test_keys_are_sorted_and_rangeable():
    kv = {"vars/job/app": {"b": "2", "a": "1"}}
    out = render('{{ range keys "vars/job/app" }}{{ . }}={{ get "vars/job/app" . }};{{ end }}', kv)
    assert out == "a=1;b=2;"


def test_string_helpers():
    assert render('{{ trim "  host \\n" }}|{{ join (split "a,b,c" ",") "-" }}|{{ upper "x" }}'
                  '|{{ join .Labels "," }}', {}, Labels=["web", "db"]) == "host|a-b-c|X|web,db"
    assert render('{{ split "abc" "" }}', {}) == "[a b c]"


def test_integer_helpers_follow_go():
    assert render("{{ div -7 2 }} {{ div 7 -2 }} {{ min 3 1 2 }} {{ max 4 9 }}", {}) == \
        "-3 -3 1 9"
    with pytest.raises(_gotemplate.TemplateError, match="integer divide by zero"):
        render("{{ div 1 0 }}", {})
    with pytest.raises(_gotemplate.TemplateError, match='parsing "x1": invalid syntax'):
        render('{{ int "x1" }}', {})
    with pytest.raises(_gotemplate.TemplateError, match="expected a string or an int"):
        render("{{ int 1.5 }}", {})
    with pytest.raises(_gotemplate.TemplateError, match="wrong type for value; expected int; got string"):
        render('{{ add "1" 2 }}', {})


# --- the dot: AllocationData ------------------------------------------------------------------

def test_dot_fields():
    data = _functions.AllocationData.from_mapping({
        "AllocationID": "a-1", "Job": "api", "CurrentVersion": "1.0", "NewVersion": "1.1",
        "BucketID": "b1", "WorkerID": "w-1", "WorkerIP": IP, "Labels": ["web"], "UpdateSeq": 3})
    text = ("{{.AllocationID}} {{.Job}} {{.CurrentVersion}} {{.NewVersion}} {{.BucketID}}"
            " {{.WorkerID}} {{.WorkerIP}} {{.Labels}} {{.UpdateSeq}} {{.BucketPath}} {{.JobPath}}")
    assert _functions.render_allocation(text, "t.tpl", data, {}) == (
        "a-1 api 1.0 1.1 b1 w-1 10.0.0.1 [web] 3 /opt/worker/b1 /opt/worker/b1/jobs/api")


def test_unknown_dot_field_is_an_error_as_in_go():
    with pytest.raises(_gotemplate.TemplateError, match="can't evaluate field Port in type AllocationData"):
        render("{{ .Port }}", {})


def test_unknown_allocation_field_is_refused():
    with pytest.raises(_functions.KVError, match="unknown allocation field.*Port"):
        _functions.AllocationData.from_mapping({"Port": 1})


# --- docs examples ----------------------------------------------------------------------------

def test_templates_md_config_example():
    text = ('{\n  "cluster": "{{ get "vars/job/api" "cluster_name" }}",\n  "version": '
            '"{{ .NewVersion }}",\n  "worker": "{{ .WorkerIP }}",\n  "listen_port": '
            '"{{ get "maand/bucket" "http_port" }}"\n}')
    kv = {"vars/job/api": {"cluster_name": "prod"}, "maand/bucket": {"http_port": "30042"}}
    out = render(text, kv, job="api", NewVersion="1.2.0")
    assert out == ('{\n  "cluster": "prod",\n  "version": "1.2.0",\n  "worker": "10.0.0.1",\n'
                   '  "listen_port": "30042"\n}')


NAMESPACES_E2E = (Path(__file__).resolve().parents[3] / "data" / "templates" / "namespaces_e2e.json.tpl").read_text()


@pytest.mark.parametrize("ip,peer", [("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "10.0.0.1")])
def test_namespaces_md_end_to_end_example(ip, peer):
    kv = {"vars/bucket": {"environment": "staging"},
          "vars/job/api": {"service_name": "api-gateway"},
          "maand/bucket": {"api_http_port": "30000"},
          "maand/job/api/worker/10.0.0.1": {"peer_workers": "10.0.0.2"},
          "maand/job/api/worker/10.0.0.2": {"peer_workers": "10.0.0.1"}}
    out = render(NAMESPACES_E2E, kv, job="api", ip=ip, NewVersion="1.2.0")
    assert '"env": "staging"' in out and '"service": "api-gateway"' in out
    assert '"listen": "30000"' in out and '"peers": "%s"' % peer in out
    assert '"version": "1.2.0"' in out


def test_parse_template_checks_syntax_and_unknown_functions_at_build():
    assert _functions.parse_template('{{ get "a" "b" | upper }}', "x.tpl") is not None
    with pytest.raises(_gotemplate.TemplateError) as err:
        _functions.parse_template("ok\n{{ scrapeConfigs }}", "prometheus.yml.tpl")
    assert str(err.value) == ('template: prometheus.yml.tpl:2: function "scrapeConfigs"'
                              ' not defined')
    assert err.value.line == 2


# --- compute_kv: the KV build writes (docs/reference/kv/namespaces.md, build/variables.go) -----

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service  # noqa: E402
from tests.bucket_factory import make_bucket, set_workers, write  # noqa: E402

E2E_WORKERS = [
    {"host": "10.0.0.1", "labels": ["worker", "api"], "memory": "4096 mb", "cpu": "2000 mhz",
     "tags": {"zone": "us-east-1a", "rack": "r1"}, "hostname": "node-a"},
    {"host": "10.0.0.2", "labels": ["worker", "api"], "memory": "4096 mb", "cpu": "2000 mhz"},
]
E2E_JOBS = {"api": {"version": "1.2.0", "selectors": ["worker", "api"],
                    "resources": {"memory": {"min": "256 mb", "max": "1 gb"},
                                  "ports": {"api_http_port": {}}}}}


def e2e_bucket(tmp_path, jobs=None, workers=None, disabled=None):
    make_bucket(tmp_path, workers or E2E_WORKERS, jobs or E2E_JOBS, disabled=disabled,
                bucket_conf='environment = "staging"\nport_min = "30000"\nport_max = "39999"\n',
                jobs_conf='[api]\nmemory = "512 mb"\nreplicas_hint = "3"\n')
    write(str(tmp_path / "workspace" / "jobs" / "api" / "vars.toml"),
          'service_name = "api-gateway"\n')
    return str(tmp_path)


def build_kv(root, previous=None, **kw):
    result = _service.compute(root, bucket_id="b-1")
    assert result.report.ok, [p.message for p in result.report.errors]
    kv = _functions.compute_kv(result.catalog, _functions.load_job_vars(root, result.catalog), previous, **kw)
    return result.catalog, kv


def test_namespaces_md_end_to_end_build_and_inspect(tmp_path):
    """The `maand cat kv get` lines of the end-to-end example."""
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    assert kv["vars/bucket"]["environment"] == "staging"
    assert kv["maand/job/api"]["workers"] == "10.0.0.1,10.0.0.2"
    assert kv["vars/job/api"]["service_name"] == "api-gateway"
    assert kv["maand/worker/10.0.0.1"]["worker_memory_mb"] == "4096"
    assert kv["maand/job/api/worker/10.0.0.1"]["peer_workers"] == "10.0.0.2"
    assert kv["maand/bucket"]["api_http_port"] == str(catalog["jobs"][0]["ports"]["api_http_port"])


def test_namespaces_md_end_to_end_render_per_worker(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    port = kv["maand/bucket"]["api_http_port"]
    for ip, peer in (("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "10.0.0.1")):
        data = _functions.allocation_data(catalog, "api", ip)
        out = _functions.render_allocation(NAMESPACES_E2E, "config.json.tpl", data, kv,
                                           _functions.upstream_jobs(catalog, "api"))
        assert out == ('{\n  "env": "staging",\n  "service": "api-gateway",\n  "listen": "%s",\n'
                       '  "peers": "%s",\n  "version": "1.2.0"\n}' % (port, peer))


def test_bucket_namespace_keys(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    assert kv["maand/bucket"] == {"bucket_id": "b-1", "jobs": "api", "activejobs": "api",
                                  "api_http_port": kv["maand/bucket"]["api_http_port"]}
    assert kv["vars/bucket"] == {"environment": "staging", "port_min": "30000",
                                 "port_max": "39999"}


def test_worker_namespaces(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    w1 = kv["maand/worker/10.0.0.1"]
    assert w1["worker_ip"] == "10.0.0.1" and w1["hostname"] == "node-a"
    assert w1["position"] == "0" and w1["labels"] == "api,worker" and w1["jobs"] == "api"
    assert w1["worker_cpu_mhz"] == "2000"
    assert w1["api_peers"] == "10.0.0.2" and w1["api_allocation_index"] == "0"
    assert kv["maand/worker/10.0.0.2"]["api_allocation_index"] == "1"
    assert w1["worker_id"] == _functions.stable_uuid("10.0.0.1")
    assert kv["maand/worker/10.0.0.1/tags"] == {"zone": "us-east-1a", "rack": "r1"}
    shared = kv["maand/worker"]
    assert shared["api_workers"] == "10.0.0.1,10.0.0.2" and shared["api_workers_length"] == "2"
    assert shared["api_0"] == "10.0.0.1" and shared["api_1"] == "10.0.0.2"
    assert shared["api_label_id"] == _functions.stable_uuid("api")


def test_stable_uuid_is_maands_md5_v3():
    # workspace.StableJobID: md5 with version 3 and RFC 4122 variant bits
    value = _functions.stable_uuid("api")
    assert value[14] == "3" and value[19] in "89ab" and len(value) == 36
    assert value == _functions.stable_uuid("api") != _functions.stable_uuid("web")


def test_job_and_allocation_namespaces(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    job = kv["maand/job/api"]
    assert job["name"] == "api" and job["version"] == "1.2.0" and job["selectors"] == "worker,api"  # manifest order, as maand
    assert job["workers_length"] == "2" and job["worker_0"] == "10.0.0.1"
    assert job["rollout_order"] == job["deploy_order"] == "10.0.0.1,10.0.0.2"  # maand's name, and its name before 2026-06-29
    assert (job["memory"], job["min_memory_mb"], job["max_memory_mb"]) == ("512", "256", "1024")
    assert (job["cpu"], job["min_cpu_mhz"], job["max_cpu_mhz"]) == ("0", "0", "0")
    assert kv["vars/bucket/job/api"] == {"memory": "512 mb", "replicas_hint": "3"}  # the whole section, as maand
    assert kv["maand/job/api/worker/10.0.0.2"] == {
        "peer_workers": "10.0.0.1", "api_allocation_index": "1", "version": "1.2.0"}


def test_disabled_allocation_left_out_of_workers_but_kept_as_peer(tmp_path):
    root = e2e_bucket(tmp_path, disabled={"jobs": {"api": {"allocations": ["10.0.0.2"]}}})
    catalog, kv = build_kv(root)
    assert kv["maand/job/api"]["workers"] == "10.0.0.1"
    assert kv["maand/job/api/worker/10.0.0.1"]["peer_workers"] == "10.0.0.2"
    assert kv["maand/worker/10.0.0.2"]["jobs"] == ""


def test_ports_only_for_jobs_with_active_allocations(tmp_path):
    root = e2e_bucket(tmp_path, disabled={"jobs": {"api": {}}})
    catalog, kv = build_kv(root)
    assert "api_http_port" not in kv["maand/bucket"]
    assert kv["maand/bucket"]["activejobs"] == "" and kv["maand/bucket"]["jobs"] == "api"


def test_build_owned_drop_stale_keys_user_owned_merge(tmp_path):
    previous = {"maand/bucket": {"old_port": "1"},
                "vars/job/api": {"schema_version": "12", "service_name": "old"},
                "secrets/job/api": {"pw": "s"}, "vars/job/gone": {"x": "1"}}
    catalog, kv = build_kv(e2e_bucket(tmp_path), previous)
    assert "old_port" not in kv["maand/bucket"]
    assert kv["vars/job/api"] == {"schema_version": "12", "service_name": "api-gateway"}
    assert kv["secrets/job/api"] == {"pw": "s"}
    assert "vars/job/gone" not in kv


def test_removed_worker_namespaces_are_gone(tmp_path):
    root = e2e_bucket(tmp_path)
    build = _service.build(root)
    assert build.written
    set_workers(root, E2E_WORKERS[:1])
    catalog, kv = build_kv(root)
    assert "maand/worker/10.0.0.2" not in kv and "maand/job/api/worker/10.0.0.2" not in kv
    assert kv["maand/job/api"]["workers"] == "10.0.0.1"


def test_ca_cert_lands_in_the_shared_worker_namespace(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path), ca_cert="-----BEGIN CERTIFICATE-----\n")
    assert kv["maand/worker"]["certs/ca.crt"].startswith("-----BEGIN CERTIFICATE-----")


def test_upstream_jobs_from_command_demands(tmp_path):
    cmd = {"executed_on": ["cli"], "demands": {"job": "db", "command": "command_schema"}}
    jobs = dict(E2E_JOBS, db={"version": "1.0.0", "selectors": ["worker"], "commands": {
        "command_schema": {"executed_on": ["cli"]}}})
    jobs["api"] = dict(E2E_JOBS["api"], commands={"command_migrate": cmd})
    catalog, kv = build_kv(e2e_bucket(tmp_path, jobs=jobs))
    assert _functions.upstream_jobs(catalog, "api") == ["db"]
    assert _functions.upstream_jobs(catalog, "db") == []


def test_vars_toml_values_are_strings_and_tables_refused(tmp_path):
    path = tmp_path / "vars.toml"
    path.write_text('a = 1\nb = true\nc = "x"\n')
    assert _functions.load_vars_toml(str(path)) == {"a": "1", "b": "true", "c": "x"}
    path.write_text('[t]\nx = 1\n')
    with pytest.raises(_functions.KVError, match="t is a table"):
        _functions.load_vars_toml(str(path))


def test_allocation_data_from_catalog(tmp_path):
    catalog, kv = build_kv(e2e_bucket(tmp_path))
    data = _functions.allocation_data(catalog, "api", "10.0.0.2", current_version="1.1.0")
    assert data.Job == "api" and data.NewVersion == "1.2.0" and data.CurrentVersion == "1.1.0"
    assert data.BucketPath == "/opt/worker/b-1" and data.JobPath == "/opt/worker/b-1/jobs/api"
    assert data.Labels == ["api", "worker"] and data.AllocationID
    with pytest.raises(_functions.KVError, match="no allocation of job api on worker 10.9.9.9"):
        _functions.allocation_data(catalog, "api", "10.9.9.9")


# --- read_kv: what the lookup plugin reads ------------------------------------------------------

def test_read_kv_computes_from_the_catalog(tmp_path):
    root = e2e_bucket(tmp_path)
    with pytest.raises(_functions.KVError, match="no data/catalog.json; build the bucket first"):
        _kv_build.read_kv(root)
    assert _service.build(root).written
    kv = _kv_build.read_kv(root)
    assert kv["vars/job/api"] == {"service_name": "api-gateway"}
    assert kv["maand/job/api"]["workers"] == "10.0.0.1,10.0.0.2"


def test_read_kv_prefers_data_kv_json_and_checks_it(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kv.json").write_text('{"format": 1, "namespaces": {"vars/bucket":'
                                               ' {"a": 1}}}')
    assert _kv_build.read_kv(str(tmp_path)) == {"vars/bucket": {"a": "1"}}
    (tmp_path / "data" / "kv.json").write_text('{"format": 9}')
    with pytest.raises(_functions.KVError, match="not a maand.core KV file"):
        _kv_build.read_kv(str(tmp_path))
    (tmp_path / "data" / "kv.json").write_text('{')
    with pytest.raises(_functions.KVError, match="unreadable"):
        _kv_build.read_kv(str(tmp_path))

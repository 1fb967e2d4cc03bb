"""maand's KV read rules and template function map (_kv), from maand's own tests and docs.

Sources (maand-sh/maand): deploy/templates_funcs_test.go, deploy/templates_test.go,
deploy/templates_secret_test.go, data/ AllowedKVNamespaces(WithUpstream),
docs/reference/templates.md and docs/reference/kv/namespaces.md (end-to-end example).
"""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import _gotemplate as gt
from ansible_collections.maand.core.plugins.plugin_utils import _kv

IP = "10.0.0.1"


def render(text, kv, job="app", ip=IP, upstream=(), deleted=None, **fields):
    data = _kv.AllocationData(Job=job, WorkerIP=ip, **fields)
    return _kv.render_allocation(text, "config.tpl", data, kv, upstream, deleted)


def funcs(kv, job="app", ip=IP, upstream=()):
    return _kv.template_funcs(_kv.KVReader(kv, job, ip, tuple(upstream)))


# --- templates_funcs_test.go -------------------------------------------------------------------

def test_func_map_secret_and_helpers():
    f = funcs({"secrets/job/app": {"token": "abc123"}})
    assert f["getSecret"]("token") == "abc123"
    assert f["add"](1, 2) == 3
    assert f["upper"]("hello") == "HELLO"
    assert f["int"]("42") == 42


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
    with pytest.raises(_kv.KVError, match="vars/job/other namespace is not available for job app"):
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
    assert _kv.allowed_namespaces("api", IP) == [
        "maand/bucket", "vars/bucket", "maand/worker", "maand/worker/10.0.0.1",
        "maand/worker/10.0.0.1/tags", "maand/job/api", "vars/bucket/job/api", "vars/job/api",
        "secrets/job/api", "maand/job/api/worker/10.0.0.1"]


def test_upstream_jobs_add_their_job_vars_and_secrets():
    allowed = _kv.allowed_namespaces("web", IP, ["db"])
    assert allowed[-3:] == ["maand/job/db", "vars/job/db", "secrets/job/db"]
    assert "vars/bucket/job/db" not in allowed
    assert "maand/job/db/worker/10.0.0.1" not in allowed


@pytest.mark.parametrize("namespace", [
    "vars/job/db", "secrets/job/db", "maand/job/db", "maand/worker/10.0.0.2",
    "maand/job/app/worker/10.0.0.2", "vars/bucket/job/db", "maand/prometheus"])
def test_other_jobs_and_workers_are_not_readable(namespace):
    with pytest.raises(gt.TemplateError) as err:
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
    with pytest.raises(gt.TemplateError) as err:
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
    with pytest.raises(gt.TemplateError, match="not available for job app"):
        render('{{ getOptional "vars/job/other" "x" }}', {})


def test_deleted_keys_are_missing():
    kv = {"vars/job/app": {"a": "1", "b": "2"}}
    deleted = {"vars/job/app": ["a"]}
    with pytest.raises(gt.TemplateError, match="key a not found"):
        render('{{ get "vars/job/app" "a" }}', kv, deleted=deleted)
    assert render('{{ getOptional "vars/job/app" "a" }}|{{ keys "vars/job/app" }}', kv,
                  deleted=[["vars/job/app", "a"]]) == "|[b]"


def test_deleted_must_name_namespace_and_key():
    with pytest.raises(_kv.KVError, match="namespace, key"):
        _kv.normalize_deleted(["vars/job/app/a"])


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
    with pytest.raises(gt.TemplateError, match="integer divide by zero"):
        render("{{ div 1 0 }}", {})
    with pytest.raises(gt.TemplateError, match='parsing "x1": invalid syntax'):
        render('{{ int "x1" }}', {})
    with pytest.raises(gt.TemplateError, match="expected a string or an int"):
        render("{{ int 1.5 }}", {})
    with pytest.raises(gt.TemplateError, match="wrong type for value; expected int; got string"):
        render('{{ add "1" 2 }}', {})


# --- the dot: AllocationData ------------------------------------------------------------------

def test_dot_fields():
    data = _kv.AllocationData.from_mapping({
        "AllocationID": "a-1", "Job": "api", "CurrentVersion": "1.0", "NewVersion": "1.1",
        "BucketID": "b1", "WorkerID": "w-1", "WorkerIP": IP, "Labels": ["web"], "UpdateSeq": 3})
    text = ("{{.AllocationID}} {{.Job}} {{.CurrentVersion}} {{.NewVersion}} {{.BucketID}}"
            " {{.WorkerID}} {{.WorkerIP}} {{.Labels}} {{.UpdateSeq}} {{.BucketPath}} {{.JobPath}}")
    assert _kv.render_allocation(text, "t.tpl", data, {}) == (
        "a-1 api 1.0 1.1 b1 w-1 10.0.0.1 [web] 3 /opt/worker/b1 /opt/worker/b1/jobs/api")


def test_unknown_dot_field_is_an_error_as_in_go():
    with pytest.raises(gt.TemplateError, match="can't evaluate field Port in type AllocationData"):
        render("{{ .Port }}", {})


def test_unknown_allocation_field_is_refused():
    with pytest.raises(_kv.KVError, match="unknown allocation field.*Port"):
        _kv.AllocationData.from_mapping({"Port": 1})


# --- docs examples ----------------------------------------------------------------------------

def test_templates_md_config_example():
    text = ('{\n  "cluster": "{{ get "vars/job/api" "cluster_name" }}",\n  "version": '
            '"{{ .NewVersion }}",\n  "worker": "{{ .WorkerIP }}",\n  "listen_port": '
            '"{{ get "maand/bucket" "http_port" }}"\n}')
    kv = {"vars/job/api": {"cluster_name": "prod"}, "maand/bucket": {"http_port": "30042"}}
    out = render(text, kv, job="api", NewVersion="1.2.0")
    assert out == ('{\n  "cluster": "prod",\n  "version": "1.2.0",\n  "worker": "10.0.0.1",\n'
                   '  "listen_port": "30042"\n}')


NAMESPACES_E2E = """{
  "env": "{{ get "vars/bucket" "environment" }}",
  "service": "{{ get "vars/job/api" "service_name" }}",
  "listen": "{{ get "maand/bucket" "api_http_port" }}",
  "peers": "{{ get (printf "maand/job/api/worker/%s" .WorkerIP) "peer_workers" }}",
  "version": "{{ .NewVersion }}"
}"""


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
    assert _kv.parse_template('{{ get "a" "b" | upper }}', "x.tpl") is not None
    with pytest.raises(gt.TemplateError) as err:
        _kv.parse_template("ok\n{{ scrapeConfigs }}", "prometheus.yml.tpl")
    assert str(err.value) == ('template: prometheus.yml.tpl:2: function "scrapeConfigs"'
                              ' not defined')
    assert err.value.line == 2

"""The public filter maand.core.gotemplate: plain Go templates, maand allocations, errors."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.filter.gotemplate import FilterModule, render

gotemplate = FilterModule().filters()["gotemplate"]  # the filter as a playbook calls it

KV = {"vars/bucket": {"environment": "staging"}, "vars/job/api": {"service_name": "api-gateway"},
      "maand/bucket": {"api_http_port": "30000"},
      "maand/job/api/worker/10.0.0.1": {"peer_workers": "10.0.0.2"},
      "secrets/job/api": {"pw": "hunter2"}}


def test_registered_under_its_name():
    assert FilterModule().filters()["gotemplate"] is render


def test_plain_go_template_over_json_data():
    text = "{{range $i, $h := .hosts}}{{$i}}={{$h}} {{end}}{{.missing}} {{len .m}} {{.m.b}}"
    assert gotemplate(text, {"hosts": ["a", "b"], "m": {"a": 1, "b": [1, 2]}}) == \
        "0=a 1=b <no value> 2 [1 2]"


def test_maand_allocation_render():
    text = ('{{ get "vars/bucket" "environment" }} {{ get "maand/bucket" "api_http_port" }}'
            ' {{ get (printf "maand/job/api/worker/%s" .WorkerIP) "peer_workers" }}'
            ' {{ .NewVersion }} {{ .JobPath }}')
    out = gotemplate(text, {"NewVersion": "1.2.0", "BucketID": "b1"}, kv=KV, job="api",
                     worker_ip="10.0.0.1")
    assert out == "staging 30000 10.0.0.2 1.2.0 /opt/worker/b1/jobs/api"


def test_extra_funcs_like_go_template_funcs():
    assert gotemplate("{{ shout .x }}", {"x": "hi"}, funcs={"shout": lambda s: s + "!"}) == "hi!"


def test_parse_error_names_line_and_cause():
    with pytest.raises(AnsibleFilterError) as err:
        gotemplate("ok\n{{ if .x }}", {}, name="config.json.tpl")
    msg = str(err.value)
    assert "template: config.json.tpl:2: unexpected EOF" in msg and "line 2" in msg


def test_exec_error_names_line_column_key_and_not_the_secret():
    with pytest.raises(AnsibleFilterError) as err:
        gotemplate('{{ getSecret "pw" }}\n  {{ get "vars/job/api" "nope" }}', {}, kv=KV,
                   job="api", worker_ip="10.0.0.1")
    msg = str(err.value)
    assert "template:2:5" in msg and "line 2, column 5" in msg
    assert "key nope not found in namespace vars/job/api" in msg
    assert "hunter2" not in msg


def test_disallowed_namespace_and_upstream():
    kv = dict(KV, **{"vars/job/db": {"user": "admin"}})
    with pytest.raises(AnsibleFilterError, match="vars/job/db namespace is not available"):
        gotemplate('{{ get "vars/job/db" "user" }}', {}, kv=kv, job="api", worker_ip="10.0.0.1")
    assert gotemplate('{{ get "vars/job/db" "user" }}', {}, kv=kv, job="api",
                      worker_ip="10.0.0.1", upstream_jobs=["db"]) == "admin"


def test_deleted_keys():
    with pytest.raises(AnsibleFilterError, match="key environment not found"):
        gotemplate('{{ get "vars/bucket" "environment" }}', {}, kv=KV, job="api",
                   worker_ip="10.0.0.1", deleted={"vars/bucket": ["environment"]})


@pytest.mark.parametrize("kwargs,message", [
    ({"data": {"Port": 1}}, "unknown allocation field"),
    ({"data": {}, "worker_ip": None}, "give worker_ip"),
    ({"data": {"WorkerIP": "10.0.0.9"}}, "data.WorkerIP is '10.0.0.9' but workerip"),
    ({"data": {}, "kv": {"ns": "flat"}}, r"kv\[ns\] must be a map"),
    ({"data": {}, "funcs": {"bad-name": len}}, "Go identifier"),
])
def test_bad_arguments_are_refused_with_the_field(kwargs, message):
    args = {"kv": KV, "job": "api", "worker_ip": "10.0.0.1"}
    args.update(kwargs)
    data = args.pop("data")
    with pytest.raises(AnsibleFilterError, match=message):
        gotemplate("x", data, **args)

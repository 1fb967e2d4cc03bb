"""Build and the KV: .tpl files checked at build (parse errors, unknown functions), vars.toml read,
data/kv.json written under the lock after the catalog (not in check mode), rebuilt as maand
rebuilds it (maand-sh/maand build/build_variables.go: syncKeyValues, mergeWorkspaceJobVars)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws

WORKERS = ('[{"host":"10.0.0.1","labels":["worker","api"],"memory":"4 gb","cpu":"2 ghz"},'
           '{"host":"10.0.0.2","labels":["worker","api"],"memory":"4 gb","cpu":"2 ghz"}]')
API = {"version": "1.2.0", "selectors": ["api"], "resources": {"memory": {"min": "128 mb", "max": "256 mb"},
                                                               "ports": {"api_http_port": {}}}}


def bucket(tmp_path, tpl=None, vars_toml='service_name = "api-gateway"\n'):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", WORKERS)
    ws(root, "bucket.conf", 'port_min = "30000"\nport_max = "39999"\nenvironment = "staging"\n')
    job(root, "api", API)
    if vars_toml is not None:
        ws(root, "jobs/api/vars.toml", vars_toml)
    for rel, text in (tpl or {}).items():
        ws(root, "jobs/api/" + rel, text)
    return root


def errors(result):
    return [(p.kind, p.file, p.field, p.message, p.fix) for p in result.report.errors]


def test_build_writes_the_kv_after_the_catalog_and_check_mode_writes_nothing(tmp_path):
    root = bucket(tmp_path)
    checked = _service.build(root, check_mode=True)
    assert checked.report.ok and not os.path.exists(os.path.join(root, "data", "kv.json"))
    result = _service.build(root)
    assert result.written and any(line.startswith("KV: ") and "added" in line for line in result.changes)
    kv = _kv_build.read_kv(root)
    assert kv["vars/job/api"] == {"service_name": "api-gateway"}
    assert kv["vars/bucket"]["environment"] == "staging"
    assert kv["maand/job/api"]["workers"] == "10.0.0.1,10.0.0.2"
    assert kv["maand/job/api/worker/10.0.0.2"]["peer_workers"] == "10.0.0.1"
    again = _service.build(root)
    assert not again.changed and not [line for line in again.changes if line.startswith("KV")]


def test_rebuild_drops_stale_build_keys_and_keeps_hook_keys(tmp_path):
    root = bucket(tmp_path)
    _service.build(root)
    store = _store.KVStore.load(root)
    store.put("vars/job/api", "written_by_hook", "yes")
    store.put("secrets/job/api", "token", "s3cr3t-value")
    store.save()
    ws(root, "workers.json", WORKERS.replace(',{"host":"10.0.0.2","labels":["worker","api"],'
                                             '"memory":"4 gb","cpu":"2 ghz"}', ""))
    ws(root, "jobs/api/vars.toml", 'service_name = "renamed"\n')
    result = _service.build(root)
    assert result.report.ok, errors(result)
    kv = _kv_build.read_kv(root, reveal_secrets=True)
    assert kv["vars/job/api"] == {"service_name": "renamed", "written_by_hook": "yes"}
    assert kv["secrets/job/api"] == {"token": "s3cr3t-value"}
    assert "maand/worker/10.0.0.2" not in kv and "maand/job/api/worker/10.0.0.2" not in kv
    assert kv["maand/job/api"]["workers"] == "10.0.0.1"
    history = _store.KVStore.load(root).history("maand/job/api", "workers")
    assert [r.value for r in history] == ["10.0.0.1,10.0.0.2", "10.0.0.1"]
    for name in ("kv.json", "catalog.json"):
        assert "s3cr3t-value" not in open(os.path.join(root, "data", name)).read()


def test_a_removed_job_keeps_its_user_kv_until_cleaned_up_then_it_is_tombstoned(tmp_path):
    import shutil
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog, prune as _prune
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
    root = bucket(tmp_path)
    job(root, "web", {"version": "1.0.0", "selectors": ["worker"]})
    _service.build(root)
    store = _store.KVStore.load(root)
    store.put("secrets/job/api", "token", "s3cr3t-value")
    store.put("vars/job/web", "kept", "yes")
    store.save()
    shutil.rmtree(os.path.join(root, "workspace", "jobs", "api"))
    assert _service.build(root).report.ok
    catalog = _catalog.read_catalog(root)
    assert any(j["name"] == "api" and j.get("removed") for j in catalog["jobs"])
    kv = _kv_build.read_kv(root, reveal_secrets=True)  # removed, not cleaned up on its workers yet: kept
    assert kv["vars/job/api"] == {"service_name": "api-gateway"} and kv["secrets/job/api"] == {"token": "s3cr3t-value"}
    assert "maand/job/api" not in kv  # build-owned: gone at once
    cleaned = [{"job": a["job"], "worker": a["worker"]} for a in catalog["allocations"] if a["job"] == "api"]
    pruned = _plan.prune_catalog(catalog, cleaned)
    assert "api" not in [j["name"] for j in pruned["jobs"]]
    _prune.drop_job_kv(root, catalog, pruned)  # what the deploy does after it cleaned them up
    kv = _kv_build.read_kv(root, reveal_secrets=True)
    assert "vars/job/api" not in kv and "secrets/job/api" not in kv
    assert kv["vars/job/web"] == {"kept": "yes"}
    _catalog.write_catalog(root, pruned)
    store = _store.KVStore.load(root)
    store.put("vars/job/api", "stale", "x")  # left behind (say, the deploy could not write data/kv.json)
    store.save()
    result = _service.build(root)
    assert result.report.ok and "vars/job/api" not in _kv_build.read_kv(root)  # the next build tombstones it
    assert any("deleted" in line for line in result.changes if line.startswith("KV"))


@pytest.mark.parametrize("text, field, cause, fix", [
    ('{\n  "a": "{{ get "vars/job/api" }"\n}', "line 2, column", "unexpected", "fix the template syntax"),
    ('x\n{{ if .Job }}open', "line 2, column", "unexpected EOF", "fix the template syntax"),
    ('{{ getenv "HOME" }}', "line 1, column 3", 'function "getenv" not defined',
     "use maand's functions (add div get getOptional getSecret int join keys lower max min mul ruleFiles"
     " scrapeConfigs split"),
    ('{{ scrapeConfig }}', "line 1, column 3", 'function "scrapeConfig" not defined',
     "use maand's functions ("),
])
def test_bad_templates_fail_the_build_with_job_file_line_column_and_fix(tmp_path, text, field, cause, fix):
    root = bucket(tmp_path, {"conf/config.json.tpl": "{{ .Job }}", "conf/bad.json.tpl": text})
    result = _service.build(root)
    assert not result.written
    assert not {"catalog.json", "kv.json"} & set(os.listdir(os.path.join(root, "data")))
    [(kind, file, got_field, message, got_fix)] = errors(result)
    assert kind == "ErrInvalidJob" and file == "workspace/jobs/api/conf/bad.json.tpl"
    assert got_field.startswith(field) and "job api: template conf/bad.json.tpl does not parse" in message
    assert cause in message and got_fix.startswith(fix)


def test_maand_functions_builtins_and_skipped_folders_parse(tmp_path):
    ok = ('{{ range $i, $w := split (get "maand/job/api" "workers") "," }}{{ $i }}={{ upper $w }}{{ end }}'
          '{{ getOptional "vars/job/api" "x" | trim }}{{ printf "%d" (add 1 (int "2")) }}'
          '{{ getSecret "pw" }}{{ len (keys "maand/bucket") }}{{ index .Labels 0 }}'
          '{{ scrapeConfigs }}{{ ruleFiles | printf "%s" }}')  # maand's FuncMap has them for every job
    root = bucket(tmp_path, {"Makefile.tpl": "start:\n\techo {{ .Job }}\n", "a/b/c.tpl": ok,
                             "_prometheus/x.tpl": "{{ scrapeConfigs }}", "_modules/y.tpl": "{{ nope }}"})
    result = _service.build(root)
    assert result.report.ok, errors(result)
    assert _kv_build.job_templates(os.path.join(root, "workspace", "jobs", "api")) == [
        "Makefile.tpl", "a/b/c.tpl"]


def test_bad_vars_toml_fails_the_build(tmp_path):
    root = bucket(tmp_path, vars_toml='[table]\nx = 1\n')
    result = _service.build(root)
    [(kind, file, dummy, message, fix)] = errors(result)
    assert kind == "ErrInvalidJobVars" and file == "workspace/jobs/api/vars.toml"
    assert "table is a table" in message and "key = value" in fix
    ws(root, "jobs/api/vars.toml", 'a = \n')
    [(kind, file, dummy, message, fix)] = errors(_service.build(root))
    assert kind == "ErrInvalidJobVars" and "job api:" in message


def test_kv_json_is_valid_and_format_2(tmp_path):
    root = bucket(tmp_path)
    _service.build(root)
    doc = json.load(open(os.path.join(root, "data", "kv.json")))
    assert doc["format"] == 2
    assert doc["namespaces"]["maand/bucket"]["bucket_id"]["version"] == 1


def test_j2_syntax_is_checked_at_build(tmp_path):
    root = bucket(tmp_path, {"conf/ok.env.j2": "{{ kv['vars/job/api']['x'] }}{% if WorkerIP %}y{% endif %}",
                             "conf/bad.env.j2": "a\n{% if %}\n", "_modules/z.j2": "{% nope"})
    result = _service.build(root)
    assert not result.written
    [(kind, file, field, message, fix)] = errors(result)
    assert (kind, file, field) == ("ErrInvalidJob", "workspace/jobs/api/conf/bad.env.j2", "line 2")
    assert "job api: template conf/bad.env.j2 does not parse (Jinja2)" in message and "Jinja2" in fix

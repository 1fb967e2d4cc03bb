"""What a deploy ships per allocation (_deploy_stage): maand's excludes, .tpl/.j2 rendered per allocation,
the content hash over the rendered output, secrets kept out of digests, the staged tree."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket import content as _content
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions
from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage
from tests.bucket_factory import make_bucket, write

# docs/reference/kv/namespaces.md, "End-to-end example"
NAMESPACES_E2E = (Path(__file__).resolve().parents[3] / "data" / "templates" / "namespaces_e2e.json.tpl").read_text()
WORKERS = [
    {"host": "10.0.0.1", "labels": ["worker", "api"], "memory": "4096 mb", "cpu": "2000 mhz"},
    {"host": "10.0.0.2", "labels": ["worker", "api"], "memory": "4096 mb", "cpu": "2000 mhz"},
]
JOBS = {"api": {"version": "1.2.0", "selectors": ["worker", "api"],
                "resources": {"memory": {"min": "256 mb", "max": "1 gb"}, "ports": {"api_http_port": {}}}}}
HOSTS = ("10.0.0.1", "10.0.0.2")


def e2e(tmp_path, files=None):
    root = str(tmp_path / "bucket")
    make_bucket(root, WORKERS, JOBS, bucket_conf='environment = "staging"\nport_min = "30000"\nport_max = "39999"\n',
                jobs_conf='[api]\nmemory = "512 mb"\n')
    job = os.path.join(root, "workspace", "jobs", "api")
    write(os.path.join(job, "vars.toml"), 'service_name = "api-gateway"\n')
    write(os.path.join(job, "config.json.tpl"), NAMESPACES_E2E)
    for rel, text in (files or {}).items():
        write(os.path.join(job, rel), text)
    result = _service.compute(root, bucket_id="b-1")
    assert result.report.ok, [p.message for p in result.report.errors]
    kv = _functions.compute_kv(result.catalog, _functions.load_job_vars(root, result.catalog))
    return root, result.catalog, kv


def compute(root, catalog, kv, digest_key=None, **kw):
    return _stage.compute(root, catalog, ["api"], HOSTS, kv=(kv, digest_key), **kw)


def rendered(staging, host, rel="config.json"):
    content = staging.allocations[("api", host)]
    return next(o.content.decode() for o in content.outputs if o.rel == rel)


# --- what ships -------------------------------------------------------------------------------

def test_read_job_applies_maands_excludes(tmp_path):
    root = tmp_path / "job"
    for rel in ("Makefile.tpl", "run.sh", "conf/app.conf.j2", "conf/plain.conf", "vars.toml", "_modules/command_x.py",
                "_prometheus/scrape.yaml", "data/db", "logs/l", "bin/b", "conf/vars.toml", "sub/_modules/kept"):
        write(str(root / rel), "x")
    (root / "empty" / "nested").mkdir(parents=True)
    src = _stage.read_job("api", str(root))
    assert sorted(src.files) == ["conf/plain.conf", "conf/vars.toml", "run.sh", "sub/_modules/kept"]
    assert [(t.rel, t.out, t.kind) for t in src.templates] == [
        ("Makefile.tpl", "Makefile", "go"), ("conf/app.conf.j2", "conf/app.conf", "jinja")]
    assert "empty/nested" in src.dirs and "conf" in src.dirs
    assert not any(d.split("/")[0] in ("_modules", "_prometheus", "data", "logs", "bin") for d in src.dirs)


def test_two_templates_rendering_the_same_file_are_refused(tmp_path):
    write(str(tmp_path / "a.conf.tpl"), "1")
    write(str(tmp_path / "a.conf.j2"), "2")
    with pytest.raises(_content.ContentError, match="a.conf.j2 and a.conf.tpl both render a.conf|"
                       "a.conf.tpl and a.conf.j2 both render a.conf"):
        _stage.read_job("api", str(tmp_path))


def test_a_template_output_replaces_a_plain_file_of_that_name(tmp_path):
    write(str(tmp_path / "app.conf"), "plain")
    write(str(tmp_path / "app.conf.tpl"), "rendered {{ .Job }}")
    src = _stage.read_job("api", str(tmp_path))
    assert src.shadowed == ("app.conf",) and "app.conf" not in src.files
    content = _stage.render(src, _stage.Context({}, _functions.AllocationData(Job="api", WorkerIP="h")))
    assert content.outputs[0].content == b"rendered api"


# --- namespaces.md end to end, per worker ----------------------------------------------------

def test_namespaces_md_example_renders_per_worker(tmp_path):
    root, catalog, kv = e2e(tmp_path)
    staging = compute(root, catalog, kv)
    assert staging.errors == []
    port = kv["maand/bucket"]["api_http_port"]
    for ip, peer in (("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "10.0.0.1")):
        assert rendered(staging, ip) == (
            '{\n  "env": "staging",\n  "service": "api-gateway",\n  "listen": "%s",\n  "peers": "%s",\n'
            '  "version": "1.2.0"\n}' % (port, peer))
        entry = staging.content["api"]["allocations"][ip]
        assert "config.json" in entry["files"] and "config.json.tpl" not in entry["files"]
        assert "vars.toml" not in entry["files"] and entry["origins"] == {"config.json": "template"}
        assert entry["hash"] == _content.tree_hash(entry["files"])
    hashes = {staging.content["api"]["allocations"][ip]["hash"] for ip in HOSTS}
    assert len(hashes) == 2  # the peer differs, so does the content


def test_the_hash_follows_the_rendered_output_not_the_template(tmp_path):
    root, catalog, kv = e2e(tmp_path)
    before = compute(root, catalog, kv).content["api"]["allocations"]
    kv["vars/bucket"]["environment"] = "production"
    after = compute(root, catalog, kv).content["api"]["allocations"]
    for ip in HOSTS:
        assert before[ip]["hash"] != after[ip]["hash"]
        assert _content.changed_paths(before[ip]["files"], after[ip]["files"]) == ["config.json"]
    kv["vars/bucket"]["unused"] = "1"
    again = compute(root, catalog, kv).content["api"]["allocations"]
    assert {ip: again[ip]["hash"] for ip in HOSTS} == {ip: after[ip]["hash"] for ip in HOSTS}


def test_plain_output_digest_is_what_hash_tree_gives_the_same_file(tmp_path):
    root, catalog, kv = e2e(tmp_path)
    staging = compute(root, catalog, kv)
    dest = staging.stage(root, "api", "10.0.0.1")
    on_disk = _content.hash_tree(dest)
    assert on_disk == {"hash": staging.content["api"]["allocations"]["10.0.0.1"]["hash"],
                       "files": staging.content["api"]["allocations"]["10.0.0.1"]["files"]}


def test_makefile_tpl_only_job_ships_a_makefile(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"Makefile.tpl": "start:\n\t@echo {{ get \"maand/bucket\" \"api_http_port\" }}\n"})
    os.remove(os.path.join(root, "workspace", "jobs", "api", "Makefile"))
    staging = compute(root, catalog, kv)
    assert staging.errors == []
    assert rendered(staging, "10.0.0.1", "Makefile") == "start:\n\t@echo %s\n" % kv["maand/bucket"]["api_http_port"]
    dest = staging.stage(root, "api", "10.0.0.1")
    assert sorted(os.listdir(dest)) == ["Makefile", "config.json", "manifest.json"]


def test_dot_fields_and_current_version(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"dot.txt.tpl": "{{ .AllocationID }} {{ .Job }} {{ .CurrentVersion }} "
                                                      "{{ .NewVersion }} {{ .WorkerIP }} {{ join .Labels \",\" }} "
                                                      "{{ .BucketPath }} {{ .JobPath }} {{ .UpdateSeq }}"})
    staging = compute(root, catalog, kv, current_versions={("api", "10.0.0.2"): "1.1.0"}, update_seq=7)
    alloc = {a["worker"]: a["alloc_id"] for a in catalog["allocations"]}
    assert rendered(staging, "10.0.0.1", "dot.txt") == (
        "%s api 0.0.0 1.2.0 10.0.0.1 api,worker /opt/worker/b-1 /opt/worker/b-1/jobs/api 7" % alloc["10.0.0.1"])
    assert rendered(staging, "10.0.0.2", "dot.txt").split()[2] == "1.1.0"


# --- failures: before any worker is touched ---------------------------------------------------

def test_missing_key_names_job_file_line_column_key_and_workers(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"conf/app.ini.tpl": "a\nname = {{ get \"vars/job/api\" \"cluster\" }}\n"})
    staging = compute(root, catalog, kv)
    assert len(staging.errors) == 1  # one message for both workers
    msg = staging.errors[0]
    assert "job api, file conf/app.ini.tpl, line 2, column 10 (worker 10.0.0.1, 10.0.0.2)" in msg
    assert "key cluster not found in namespace vars/job/api" in msg and "getOptional" in msg
    assert staging.content["api"]["allocations"]["10.0.0.1"]["error"].startswith("job api, file conf/app.ini.tpl")


def test_a_job_whose_pre_deploy_runs_later_reads_a_missing_key_as_empty_and_lists_it(tmp_path):
    # deploy/pre_deploy: the plan renders such a job before its hooks ran; its wave renders it again, strictly
    tpl = "name = [{{ get \"vars/job/api\" \"cluster\" }}]\npw = [{{ getSecret \"db_password\" }}]\n"
    root, catalog, kv = e2e(tmp_path, {"conf/app.ini.tpl": tpl})
    staging = compute(root, catalog, kv, digest_key=lambda: b"k" * 32, pending=["api"])
    assert staging.errors == [] and rendered(staging, "10.0.0.1", "conf/app.ini") == "name = []\npw = []\n"
    assert set(staging.missing["api"]) == {("vars/job/api", "cluster"), ("secrets/job/api", "db_password")}
    assert compute(root, catalog, kv, digest_key=lambda: b"k" * 32, pending=["other"]).errors  # only the jobs named


def test_get_optional_is_not_an_error(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"o.tpl": "[{{ getOptional \"vars/job/api\" \"cluster\" }}]"})
    staging = compute(root, catalog, kv)
    assert staging.errors == [] and rendered(staging, "10.0.0.1", "o") == "[]"


def test_disallowed_namespace_fails_even_with_get_optional(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"o.tpl": "{{ getOptional \"vars/job/db\" \"x\" }}"})
    staging = compute(root, catalog, kv)
    assert len(staging.errors) == 1
    assert "vars/job/db namespace is not available for job api" in staging.errors[0]
    assert "demands" in staging.errors[0]


def test_unreadable_kv_fails_the_plan_not_a_traceback(tmp_path):
    root, catalog, dummy = e2e(tmp_path)
    write(os.path.join(root, "data", "kv.json"), "{not json")
    staging = _stage.compute(root, catalog, ["api"], HOSTS)
    assert len(staging.errors) == 1 and "data/kv.json is unreadable" in staging.errors[0]


# --- secrets ---------------------------------------------------------------------------------

def test_secret_bearing_output_gets_an_hmac_digest(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"pw.tpl": "password = {{ getSecret \"db_password\" }}\n"})
    kv["secrets/job/api"] = {"db_password": "hunter2"}
    key = _stage.derive_digest_key(b"k" * 32)
    staging = compute(root, catalog, kv, digest_key=lambda: key)
    entry = staging.content["api"]["allocations"]["10.0.0.1"]
    plain = hashlib.sha256(b"-password = hunter2\n").hexdigest()
    assert entry["files"]["pw"] != plain  # the digest cannot be checked against guesses without the key
    assert entry["files"]["pw"] == _stage.output_digest(b"password = hunter2\n", False, True, lambda: key)
    assert "hunter2" not in repr(entry) and "hunter2" not in repr(staging.content)
    assert entry["files"]["config.json"] == hashlib.sha256(b"-" + rendered(staging, "10.0.0.1").encode()).hexdigest()
    kv["secrets/job/api"]["db_password"] = "hunter3"
    assert compute(root, catalog, kv, digest_key=lambda: key).content["api"]["allocations"]["10.0.0.1"]["files"]["pw"] \
        != entry["files"]["pw"]  # a changed secret still restarts


def test_an_output_that_reads_a_private_key_is_secret_bearing(tmp_path):
    """Security review L2: a template that copies an issued certificate's key gets an HMAC digest."""
    tpl = '{{ get "maand/job/api/worker/10.0.0.1" "certs/tls.key" }}'
    root, catalog, kv = e2e(tmp_path, {"key.pem.tpl": tpl, "crt.pem.tpl": tpl.replace(".key", ".crt")})
    kv["maand/job/api/worker/10.0.0.1"] = dict(kv.get("maand/job/api/worker/10.0.0.1") or {},
                                               **{"certs/tls.key": "PRIVATE", "certs/tls.crt": "PUBLIC"})
    key = _stage.derive_digest_key(b"k" * 32)
    entry = compute(root, catalog, kv, digest_key=lambda: key).content["api"]["allocations"]["10.0.0.1"]
    assert entry["files"]["key.pem"] == _stage.output_digest(b"PRIVATE", False, True, lambda: key)
    assert entry["files"]["crt.pem"] == hashlib.sha256(b"-PUBLIC").hexdigest()   # a certificate is public


@pytest.mark.parametrize("text", [
    "{{ kv['maand/job/api/worker/' ~ WorkerIP]['certs/tls.key'] }}",
    "{{ kv['maand/job/api/worker/' ~ WorkerIP].get('certs/tls.key') }}",
    "{% for k, v in kv['maand/job/api/worker/' ~ WorkerIP].items() %}{{ k }}={{ v }}\n{% endfor %}",
    "{% for v in kv['maand/job/api/worker/' ~ WorkerIP].values() %}{{ v }}{% endfor %}",
])
def test_a_j2_that_reads_a_private_key_is_secret_bearing(tmp_path, text):
    """Security review 4, N5: the Jinja KV view tracks TLS keys as the Go functions do: 0600, no --diff, HMAC."""
    root, catalog, kv = e2e(tmp_path, {"key.pem.j2": text,
                                       "crt.pem.j2": "{{ kv['maand/job/api/worker/' ~ WorkerIP]['certs/tls.crt'] }}"})
    for host in HOSTS:
        kv["maand/job/api/worker/" + host] = dict(kv.get("maand/job/api/worker/" + host) or {},
                                                  **{"certs/tls.key": "PRIVATE", "certs/tls.crt": "PUBLIC"})
    key = _stage.derive_digest_key(b"k" * 32)
    staging = compute(root, catalog, kv, digest_key=lambda: key)
    assert not staging.errors, staging.errors
    entry = staging.content["api"]["allocations"]["10.0.0.1"]
    body = rendered(staging, "10.0.0.1", "key.pem").encode()
    assert b"PRIVATE" in body
    assert entry["files"]["key.pem"] == _stage.output_digest(body, False, True, lambda: key)
    assert staging.is_secret("api", "10.0.0.1", "key.pem") and not staging.is_secret("api", "10.0.0.1", "crt.pem")
    assert entry["files"]["crt.pem"] == hashlib.sha256(b"-PUBLIC").hexdigest()  # a certificate is public
    out = next(o for o in staging.allocations[("api", "10.0.0.1")].outputs if o.rel == "key.pem")
    _stage._write_output(str(tmp_path / "key.pem"), out)
    assert os.stat(str(tmp_path / "key.pem")).st_mode & 0o777 == 0o600


def test_secrets_decrypt_lazily_from_the_store(tmp_path):
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    root, catalog, computed = e2e(tmp_path, {"pw.tpl": "{{ getSecret \"db_password\" }}"})
    with _store.KVStore.edit(root) as store:
        store.apply_build(computed)
        store.put("secrets/job/api", "db_password", "s3cret")
    kv, digest_key = _stage.load_kv(root)
    assert "s3cret" not in repr(kv)
    staging = _stage.compute(root, catalog, ["api"], HOSTS)  # reads data/kv.json itself
    assert staging.errors == [] and rendered(staging, "10.0.0.1", "pw") == "s3cret"
    assert staging.content["api"]["allocations"]["10.0.0.1"]["files"]["pw"] == _stage.output_digest(
        b"s3cret", False, True, digest_key)


# --- Jinja2: the same context ------------------------------------------------------------------

def test_j2_gets_the_kv_the_dot_fields_and_the_functions(tmp_path):
    text = ("{{ kv['vars/bucket']['environment'] }} {{ get('vars/job/api', 'service_name') }} {{ WorkerIP }} "
            "{{ NewVersion }} {{ kv['maand/job/api/worker/' ~ WorkerIP]['peer_workers'] }} "
            "{{ kv['vars/job/api'].get('nope', 'dflt') }} {{ 'nope' in kv['vars/job/api'] }}\n")
    root, catalog, kv = e2e(tmp_path, {"app.env.j2": text})
    staging = compute(root, catalog, kv)
    assert staging.errors == []
    assert rendered(staging, "10.0.0.2", "app.env") == "staging api-gateway 10.0.0.2 1.2.0 10.0.0.1 dflt False\n"


@pytest.mark.parametrize("text,cause", [
    ("ok\n{{ kv['vars/job/api']['cluster'] }}", "key cluster not found in namespace vars/job/api"),
    ("ok\n{{ kv['vars/job/db']['x'] }}", "vars/job/db namespace is not available for job api"),
    ("ok\n{{ undefined_name }}", "'undefined_name' is undefined"),
])
def test_j2_failures_name_file_and_line(tmp_path, text, cause):
    root, catalog, kv = e2e(tmp_path, {"app.env.j2": text})
    staging = compute(root, catalog, kv)
    assert len(staging.errors) == 1
    assert "job api, file app.env.j2, line 2 (worker 10.0.0.1, 10.0.0.2)" in staging.errors[0]
    assert cause in staging.errors[0]


def test_j2_syntax_error(tmp_path):
    root, catalog, kv = e2e(tmp_path)  # build refuses it too; the deploy must not trust that
    write(os.path.join(root, "workspace", "jobs", "api", "app.env.j2"), "ok\n{% if %}")
    staging = compute(root, catalog, kv)
    assert "job api, file app.env.j2, line 2" in staging.errors[0] and "does not parse" in staging.errors[0]


# --- overlays and the staged tree ----------------------------------------------------------

def test_overlays_join_the_tree_and_the_hash(tmp_path):
    root, catalog, kv = e2e(tmp_path)

    def certs(job, host):
        return [_stage.Overlay("certs/%s.crt" % job, ("CERT %s" % host).encode(), origin="certs")]
    staging = compute(root, catalog, kv, overlays=[certs])
    entry = staging.content["api"]["allocations"]["10.0.0.1"]
    assert entry["origins"] == {"certs/api.crt": "certs", "config.json": "template"}
    dest = staging.stage(root, "api", "10.0.0.1")
    with open(os.path.join(dest, "certs", "api.crt"), encoding="utf-8") as handle:
        assert handle.read() == "CERT 10.0.0.1"
    assert _content.hash_tree(dest)["hash"] == entry["hash"]


def test_stage_links_plain_files_and_never_writes_into_the_workspace(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"run.sh": "#!/bin/sh\n", "app.conf": "plain", "app.conf.tpl": "{{ .Job }}",
                                       "tmp/.keep": ""})
    job = os.path.join(root, "workspace", "jobs", "api")
    os.chmod(os.path.join(job, "run.sh"), 0o755)
    os.symlink("run.sh", os.path.join(job, "link.sh"))
    os.makedirs(os.path.join(job, "empty"))
    os.chmod(os.path.join(job, "empty"), 0o777)
    write(os.path.join(job, "ro", "f.txt"), "read only folder")
    os.chmod(os.path.join(job, "ro"), 0o555)
    staging = compute(root, catalog, kv)
    dest = staging.stage(root, "api", "10.0.0.1")
    assert os.path.samefile(os.path.join(dest, "run.sh"), os.path.join(job, "run.sh"))
    assert os.readlink(os.path.join(dest, "link.sh")) == "run.sh"
    assert os.path.isdir(os.path.join(dest, "empty")) and os.stat(os.path.join(dest, "empty")).st_mode & 0o777 == 0o777
    assert os.stat(os.path.join(dest, "ro")).st_mode & 0o777 == 0o555 and os.path.isfile(os.path.join(dest, "ro", "f.txt"))
    with open(os.path.join(dest, "app.conf"), encoding="utf-8") as handle:
        assert handle.read() == "api"
    with open(os.path.join(job, "app.conf"), encoding="utf-8") as handle:
        assert handle.read() == "plain"
    assert not os.path.exists(os.path.join(dest, "vars.toml"))
    assert not os.path.exists(os.path.join(dest, "config.json.tpl"))
    _stage.reset_stage(root)
    assert os.listdir(_stage.stage_root(root)) == [] and os.stat(_stage.stage_root(root)).st_mode & 0o777 == 0o700


def test_a_job_without_templates_is_not_rendered_per_allocation(tmp_path):
    root, catalog, kv = e2e(tmp_path)
    os.remove(os.path.join(root, "workspace", "jobs", "api", "config.json.tpl"))
    staging = compute(root, catalog, kv)
    assert "allocations" not in staging.content["api"] and staging.allocations == {}
    assert staging.content["api"]["hash"] == _content.tree_hash(staging.content["api"]["files"])
    assert "vars.toml" not in staging.content["api"]["files"]
    dest = staging.stage(root, "api", "10.0.0.2")
    assert sorted(os.listdir(dest)) == ["Makefile", "manifest.json"]


@pytest.mark.parametrize("name,text", [
    ("pw.tpl", '{{ int (getSecret "db_password") }}'),
    ("pw.tpl", '{{ $p := get "secrets/job/api" "db_password" }}{{ index $p 99 }}'),
    ("pw.j2", "{{ kv['secrets/job/api']['db_password'] ~ kv['vars/job/api']['nope'] }}"),
    ("pw.j2", "{{ get('secrets/job/api', 'db_password') + 1 }}"),
])
def test_a_failing_template_never_prints_the_secret_it_read(tmp_path, name, text):
    root, catalog, kv = e2e(tmp_path, {name: text})
    kv["secrets/job/api"] = {"db_password": "hunter2"}
    staging = compute(root, catalog, kv, digest_key=lambda: b"k" * 32)
    assert len(staging.errors) == 1, staging.errors
    assert "hunter2" not in repr(staging.errors) and "hunter2" not in repr(staging.content)


def test_remove_tree_removes_read_only_staged_folders_as_any_user(tmp_path):
    ro = tmp_path / "stage" / "h" / "api" / "ro"
    ro.mkdir(parents=True)
    (ro / "f").write_text("x")
    os.chmod(ro, 0o555)
    _stage.remove_tree(str(tmp_path / "stage"))
    assert not (tmp_path / "stage").exists()
    _stage.remove_tree(str(tmp_path / "stage"))  # absent: nothing to do


def test_j2_has_the_common_ansible_filters(tmp_path):
    text = ("{{ {'a': [1, 'x']} | to_json }}|{{ 'hi' | b64encode }}|{{ 'aGk=' | b64decode }}|{{ \"a b\" | quote }}|"
            "{{ 'yes' | bool }}|{{ Labels | to_json }}\n{{ {'b': 1} | to_nice_json(indent=2) }}\n")
    root, catalog, kv = e2e(tmp_path, {"f.txt.j2": text})
    staging = compute(root, catalog, kv)
    assert rendered(staging, "10.0.0.1", "f.txt") == ('{"a": [1, "x"]}|aGk=|hi|\'a b\'|True|["api", "worker"]\n'
                                                      '{\n  "b": 1\n}\n')


# --- property: what the plan hashes is exactly what is staged and shipped ----------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = st.sampled_from(["a", "b.conf", "run.sh", "vars.toml", "_modules", "_prometheus", "data", "conf", "x.tpl",
                          "y.j2", "Makefile.tpl", "z"])
_TEXT = st.sampled_from(["plain\n", "{{ .WorkerIP }}\n", "{{ get \"maand/bucket\" \"api_http_port\" }}", "", "#!/bin/sh\n"])


@given(files=st.dictionaries(st.lists(_NAMES, min_size=1, max_size=3).map("/".join), _TEXT, max_size=8),
       executable=st.sets(st.integers(0, 7)))
@settings(max_examples=60, deadline=None)
def test_the_staged_tree_hashes_to_the_planned_hash_and_holds_no_excluded_file(tmp_path_factory, files, executable):
    root = tmp_path_factory.mktemp("prop")
    job = root / "workspace" / "jobs" / "api"
    job.mkdir(parents=True)
    written = []
    for i, (rel, text) in enumerate(sorted(files.items())):
        path = job / rel
        if any(p.is_file() for p in path.parents if str(p).startswith(str(job))) or path.is_dir():
            continue  # a file where a folder is wanted, or the reverse
        if rel.endswith(".j2"):
            text = text.replace("{{ .WorkerIP }}", "{{ WorkerIP }}").replace('{{ get "maand/bucket" "api_http_port" }}',
                                                                             "{{ kv['maand/bucket']['api_http_port'] }}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if i in executable:
            os.chmod(path, 0o755)
        written.append(rel)
    catalog = {"bucket_id": "b", "workers": [{"host": "h1", "labels": ["worker"], "position": 0}],
               "jobs": [{"name": "api", "version": "1", "path": "workspace/jobs/api"}],
               "allocations": [{"job": "api", "worker": "h1", "alloc_id": "x", "state": "active"}]}
    staging = _stage.compute(str(root), catalog, ["api"], ["h1"], kv=({"maand/bucket": {"api_http_port": "1"}}, None))
    if staging.content["api"].get("error") or staging.errors:
        return  # two templates rendering one file: refused with a message, nothing staged
    entry = staging.content["api"].get("allocations", {}).get("h1") or staging.content["api"]
    dest = staging.stage(str(root), "api", "h1")
    on_disk = _content.hash_tree(dest)
    assert on_disk["hash"] == entry["hash"] and on_disk["files"] == entry["files"]
    for rel in on_disk["files"]:
        assert not _stage.excluded(rel) and _stage.template_kind(rel) is None, rel


def test_a_secret_output_without_the_key_file_is_an_error_naming_it(tmp_path):
    root, catalog, kv = e2e(tmp_path, {"pw.tpl": "{{ getSecret \"db_password\" }}"})
    kv["secrets/job/api"] = {"db_password": "x"}
    staging = compute(root, catalog, kv, digest_key=_stage.digest_loader(root))  # no secrets/kv.key in this bucket
    assert len(staging.errors) == 1 and "secrets/kv.key" in staging.errors[0] and "file pw.tpl" in staging.errors[0]


@pytest.mark.parametrize("name", ["data.tpl", "logs.j2", "bin.tpl"])
def test_a_template_rendering_a_worker_owned_name_is_refused(tmp_path, name):
    write(str(tmp_path / name), "x")
    with pytest.raises(_content.ContentError, match="belongs to the worker"):
        _stage.read_job("api", str(tmp_path))


def test_stage_plan_points_run_and_early_files_ops_at_the_rendered_tree(tmp_path):
    root, catalog, kv = e2e(tmp_path)
    staging = compute(root, catalog, kv)
    workspace = "workspace/jobs/api"
    files = {"id": "api@10.0.0.2/files", "kind": "files", "job": "api", "host": "10.0.0.2", "sync": True,
             "src": workspace, "of": "api@10.0.0.2"}
    plan = {"steps": [
        {"ops": {"10.0.0.1": [{"id": "api@10.0.0.1", "kind": "run", "job": "api", "host": "10.0.0.1", "sync": True,
                               "src": workspace}],
                 "10.0.0.2": [files]}},
        {"ops": {"10.0.0.2": [{"id": "api@10.0.0.2", "kind": "run", "job": "api", "host": "10.0.0.2", "sync": False,
                               "src": workspace}]}}]}
    assert staging.stage_plan(root, plan) == 2
    early = plan["steps"][0]["ops"]["10.0.0.2"][0]["src"]
    assert early == _stage.stage_path(root, "10.0.0.2", "api")
    with open(os.path.join(early, "config.json"), encoding="utf-8") as handle:
        assert handle.read() == rendered(staging, "10.0.0.2")  # 10.0.0.2's own rendering, not the template
    assert plan["steps"][1]["ops"]["10.0.0.2"][0]["src"] == workspace  # ships nothing itself

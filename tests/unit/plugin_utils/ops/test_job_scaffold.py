"""maand.core.job_create (_job_scaffold): the starter job builds as it is (pool port in the KV, template
parsed), names and existing jobs are refused with the fix, nothing is ever overwritten; and the
workspace inventory's refusal of `-i <bucket folder>`."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.inventory import workspace as _workspace
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.ops import scaffold as _scaffold
from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
from tests.maand_init import init_bucket, ws

WORKERS = '[{"host":"10.0.0.1","labels":["worker"],"memory":"4 gb","cpu":"2 ghz"}]'


@pytest.fixture
def root(tmp_path):
    r = init_bucket(tmp_path / "bucket")
    ws(r, "workers.json", WORKERS)
    return r


def test_scaffolded_jobs_build_with_their_pool_ports(root):
    for job in ("api", "web_2"):
        paths = _scaffold.create(root, job)
        assert sorted(os.path.basename(p) for p in paths) == sorted(["manifest.json", "Makefile", "%s.conf.tpl" % job,
                                                                     "server.py"])
    result = _service.build(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert set(jobs["api"]["ports"]) == {"api_port"} and set(jobs["web_2"]["ports"]) == {"web_2_port"}
    assert jobs["api"]["health_check"]
    kv = _kv_build.read_kv(root)
    assert kv["maand/bucket"]["api_port"] == str(jobs["api"]["ports"]["api_port"])
    assert kv["maand/bucket"]["web_2_port"] != kv["maand/bucket"]["api_port"]


def test_files_read_the_pool_port_and_make_is_idempotent():
    files = _scaffold.files("api")
    manifest = json.loads(files["manifest.json"])
    assert manifest["resources"]["ports"] == {"api_port": {}}
    assert {c["port"] for c in manifest["health_check"]["checks"]} == {"api_port"}
    assert '{{ get "maand/bucket" "api_port" }}' in files["api.conf.tpl"]
    makefile = files["Makefile"]
    for target in ("start:", "stop:", "restart:", "reload:", "status:"):
        assert "\n" + target in makefile
    assert "already running" in makefile and "API_PORT" in makefile
    assert "\n    " not in makefile  # recipes are tab-indented
    compile(files["server.py"], "server.py", "exec")


GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "job_create", "golden.json")


@pytest.mark.parametrize("job", ["api", "web_2"])
def test_files_are_byte_identical_to_the_starter_files_before_they_moved_out_of_strings(job):
    # golden.json holds what job_create wrote while the starter files were string literals in scaffold.py
    with open(GOLDEN, encoding="utf-8") as handle:
        golden = json.load(handle)[job]
    assert list(_scaffold.files(job)) == list(golden)
    assert _scaffold.files(job) == golden


def test_the_starter_files_come_from_files_job_create_and_every_token_is_filled(monkeypatch, tmp_path):
    for name in _scaffold.STARTERS:
        with open(os.path.join(_scaffold.STARTER_DIR, name), encoding="utf-8") as handle:
            text = handle.read()
        assert _scaffold._TOKEN.search(text) and "{job}" not in text  # plain files: no doubled braces
        filled = _scaffold.starter(name, "pay_9")
        assert "@" + "job@" not in filled and "@port@" not in filled and "@env@" not in filled
    # a changed starter file changes what job_create writes
    for name in _scaffold.STARTERS:
        (tmp_path / name).write_text("# @job@ listens on @port@ (@env@)\n", encoding="utf-8")
    monkeypatch.setattr(_scaffold, "STARTER_DIR", str(tmp_path))
    assert _scaffold.files("web")["Makefile"] == "# web listens on web_port (WEB_PORT)\n"


def test_a_missing_starter_file_is_an_error_and_nothing_is_written(root, monkeypatch, tmp_path):
    monkeypatch.setattr(_scaffold, "STARTER_DIR", str(tmp_path / "gone"))
    with pytest.raises(_scaffold.ScaffoldError, match=r"cannot read the starter file .*gone/Makefile .*reinstall"):
        _scaffold.create(root, "api")
    assert os.listdir(os.path.join(root, "workspace", "jobs")) == []


@pytest.mark.parametrize("name, message", [
    ("", "name the job: -e maand_job="),
    ("Api", "lower-case letters, digits and _"),
    ("my-api", "its pool port is named my-api_port"),
    ("1api", "starting with a letter"),
])
def test_bad_names_are_refused(root, name, message):
    with pytest.raises(_scaffold.ScaffoldError, match=message.replace("(", r"\(")):
        _scaffold.create(root, name)
    assert os.listdir(os.path.join(root, "workspace", "jobs")) == []


def test_an_existing_job_is_never_overwritten(root):
    folder = os.path.join(root, "workspace", "jobs", "api")
    os.makedirs(folder)
    with open(os.path.join(folder, "Makefile"), "w") as handle:
        handle.write("mine\n")
    with pytest.raises(_scaffold.ScaffoldError, match="job api already exists: %s; nothing was written" % folder):
        _scaffold.create(root, "api")
    assert os.listdir(folder) == ["Makefile"]
    with open(os.path.join(folder, "Makefile")) as handle:
        assert handle.read() == "mine\n"


def test_a_folder_that_is_not_a_bucket_is_refused(tmp_path):
    with pytest.raises(_scaffold.ScaffoldError, match="is not a maand bucket .*maand.core.init"):
        _scaffold.create(str(tmp_path), "api")


def test_files_of_a_bucket_folder_are_claimed_by_the_inventory(root):
    with open(os.path.join(root, "maand.yml"), "w") as handle:
        handle.write("plugin: maand.core.workspace\n")
    _scaffold.create(root, "api")
    assert _workspace.bucket_holding(os.path.join(root, "maand.yml")) is None  # the inventory itself
    assert _workspace.bucket_holding(os.path.join(root, "maand.conf")) == root
    assert _workspace.bucket_holding(os.path.join(root, "workspace", "jobs", "api", "Makefile")) == root
    assert _workspace.bucket_holding(os.path.join(os.path.dirname(root), "hosts.ini")) is None  # outside any bucket
    text = _workspace.folder_error(root, os.path.join(root, "maand.conf"))
    assert "-i was given the maand bucket folder %s (or a file in it: maand.conf)" % root in text
    assert "Fix: pass -i %s" % os.path.join(root, "maand.yml") in text

"""maand.core.job_create (_job_scaffold): the starter job builds as it is (pool port in the KV, template
parsed), names and existing jobs are refused with the fix, nothing is ever overwritten; and the
workspace inventory's refusal of `-i <bucket folder>`."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.inventory import workspace as inv
from ansible_collections.maand.core.plugins.plugin_utils.build import service as _build
from ansible_collections.maand.core.plugins.plugin_utils.ops import scaffold as _job_scaffold
from ansible_collections.maand.core.plugins.plugin_utils.build import kv_build as _kv_build
from tests.maand_init import init_bucket, ws

WORKERS = '[{"host":"10.0.0.1","labels":["worker"],"memory":"4 gb","cpu":"2 ghz"}]'


@pytest.fixture
def root(tmp_path):
    r = init_bucket(tmp_path / "bucket")
    ws(r, "workers.json", WORKERS)
    return r


def test_scaffolded_jobs_build_with_their_pool_ports(root):
    for job in ("api", "web_2"):
        paths = _job_scaffold.create(root, job)
        assert sorted(os.path.basename(p) for p in paths) == sorted(["manifest.json", "Makefile", "%s.conf.tpl" % job,
                                                                     "server.py"])
    result = _build.build(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert set(jobs["api"]["ports"]) == {"api_port"} and set(jobs["web_2"]["ports"]) == {"web_2_port"}
    assert jobs["api"]["health_check"]
    kv = _kv_build.read_kv(root)
    assert kv["maand/bucket"]["api_port"] == str(jobs["api"]["ports"]["api_port"])
    assert kv["maand/bucket"]["web_2_port"] != kv["maand/bucket"]["api_port"]


def test_files_read_the_pool_port_and_make_is_idempotent():
    files = _job_scaffold.files("api")
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


@pytest.mark.parametrize("name, message", [
    ("", "name the job: -e maand_job="),
    ("Api", "lower-case letters, digits and _"),
    ("my-api", "its pool port is named my-api_port"),
    ("1api", "starting with a letter"),
])
def test_bad_names_are_refused(root, name, message):
    with pytest.raises(_job_scaffold.ScaffoldError, match=message.replace("(", r"\(")):
        _job_scaffold.create(root, name)
    assert os.listdir(os.path.join(root, "workspace", "jobs")) == []


def test_an_existing_job_is_never_overwritten(root):
    folder = os.path.join(root, "workspace", "jobs", "api")
    os.makedirs(folder)
    with open(os.path.join(folder, "Makefile"), "w") as handle:
        handle.write("mine\n")
    with pytest.raises(_job_scaffold.ScaffoldError, match="job api already exists: %s; nothing was written" % folder):
        _job_scaffold.create(root, "api")
    assert os.listdir(folder) == ["Makefile"]
    with open(os.path.join(folder, "Makefile")) as handle:
        assert handle.read() == "mine\n"


def test_a_folder_that_is_not_a_bucket_is_refused(tmp_path):
    with pytest.raises(_job_scaffold.ScaffoldError, match="is not a maand bucket .*maand.core.init"):
        _job_scaffold.create(str(tmp_path), "api")


def test_files_of_a_bucket_folder_are_claimed_by_the_inventory(root):
    with open(os.path.join(root, "maand.yml"), "w") as handle:
        handle.write("plugin: maand.core.workspace\n")
    _job_scaffold.create(root, "api")
    assert inv.bucket_holding(os.path.join(root, "maand.yml")) is None  # the inventory itself
    assert inv.bucket_holding(os.path.join(root, "maand.conf")) == root
    assert inv.bucket_holding(os.path.join(root, "workspace", "jobs", "api", "Makefile")) == root
    assert inv.bucket_holding(os.path.join(os.path.dirname(root), "hosts.ini")) is None  # outside any bucket
    text = inv.folder_error(root, os.path.join(root, "maand.conf"))
    assert "-i was given the maand bucket folder %s (or a file in it: maand.conf)" % root in text
    assert "Fix: pass -i %s" % os.path.join(root, "maand.yml") in text

"""Security round 4, N4 (issue 32 item 4): a catalog read from any store is input. Whoever can write the
store (data/catalog.json, or a shared PostgreSQL row) used to point a job's `path` at any controller
folder: the deploy shipped it and `maand.core.job_command` ran its `_modules/command_*.py` on the
controller. Now such a catalog is refused where it is read (path, job names and hosts as build makes
them), and a catalog whose jobs differ from the checkout's workspace/jobs is refused naming the job.

Through real `ansible-playbook` runs on a built bucket: `maand.core.job_command` (which runs a cli
command on the controller), the deploy's inventory, and build, with the file store and a real PostgreSQL."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import state_pg
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from tests.integration.test_security4_hooks_env import playbook
from tests.maand_init import init_bucket, job, ws

pytestmark = [pytest.mark.slow]

MARK = "import os\nopen(os.environ['MAAND_HOOK_MARK'], 'w').write(os.getcwd())\n"


def make_bucket(root, env=None):
    root = init_bucket(root)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "api", '{"selectors":["worker"],"commands":{"command_go":{"executed_on":["cli"]}}}')
    ws(root, "jobs/api/_modules/command_go.py", MARK)
    with open(os.path.join(root, "maand.yml"), "w", encoding="utf-8") as handle:
        handle.write("plugin: maand.core.workspace\n")
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    return root


def outside(tmp_path):
    """A controller folder outside the bucket with a job command that leaves a mark when it runs."""
    evil = tmp_path / "elsewhere"
    (evil / "_modules").mkdir(parents=True)
    (evil / "_modules" / "command_go.py").write_text(MARK.replace("getcwd()", "getcwd() + ' OUTSIDE'"))
    (evil / "manifest.json").write_text("{}")
    return str(evil)


def flat(done):
    return " ".join((done.stdout + done.stderr).split())


def run_command(root, mark, env=None):
    return playbook("-i", os.path.join(root, "maand.yml"), "maand.core.job_command", "-e", "maand_command=command_go",
                    env=dict(env or {}, MAAND_HOOK_MARK=str(mark)))


def tamper_file(root, change):
    path = os.path.join(root, "data", "catalog.json")
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    change(doc)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)


def set_path(value):
    def change(doc):
        next(j for j in doc["jobs"] if j["name"] == "api")["path"] = value
    return change


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_a_job_path_out_of_the_bucket_is_refused_and_its_command_never_runs(tmp_path, kind):
    root = make_bucket(tmp_path / "bucket")
    mark = tmp_path / "mark"
    ok = run_command(root, mark)
    assert ok.returncode == 0 and mark.read_text().endswith("/jobs/api/_modules"), flat(ok)  # the honest run
    mark.unlink()
    evil = outside(tmp_path)
    tamper_file(root, set_path(evil if kind == "absolute" else os.path.relpath(evil, root)))
    done = run_command(root, mark)
    assert done.returncode != 0, flat(done)
    assert not mark.exists(), mark.read_text()  # before issue 32: "<...>/elsewhere/_modules OUTSIDE"
    assert "ErrInvalidCatalog" in flat(done) and "$.jobs[0].path: job api: path" in flat(done), flat(done)
    assert "is not workspace/jobs/api" in flat(done), flat(done)
    deploy = playbook("-i", os.path.join(root, "maand.yml"), "maand.core.deploy", "--check")
    assert deploy.returncode != 0 and "is not workspace/jobs/api" in flat(deploy), flat(deploy)


def test_a_bad_job_or_host_name_in_the_catalog_is_refused(tmp_path):
    root = make_bucket(tmp_path / "bucket")

    def change(doc):
        doc["allocations"][0]["worker"] = "../../x"
        doc["jobs"][0]["name"] = "-rf"
    tamper_file(root, change)
    with pytest.raises(_catalog.CatalogError) as info:
        _catalog.read_catalog(root)
    assert "job name '-rf' is not one build accepts" in str(info.value)
    assert "worker host '../../x' is not one build accepts" in str(info.value)


def test_a_catalog_whose_jobs_differ_from_the_checkout_is_refused_naming_the_job(tmp_path):
    root = make_bucket(tmp_path / "bucket")
    mark = tmp_path / "mark"

    def add_job(doc):  # a job the checkout does not have, its allocation, the inputs left as the build wrote them
        doc["jobs"].append(dict(doc["jobs"][0], name="ghost", path="workspace/jobs/ghost"))
        doc["allocations"].append(dict(doc["allocations"][0], job="ghost"))
    tamper_file(root, add_job)
    done = run_command(root, mark)
    assert done.returncode != 0 and not mark.exists(), flat(done)
    assert "job ghost is in the catalog but workspace/jobs/ghost is not in this checkout" in flat(done), flat(done)
    deploy = playbook("-i", os.path.join(root, "maand.yml"), "maand.core.deploy", "--check")
    assert deploy.returncode != 0 and "job ghost is in the catalog but workspace/jobs/ghost" in flat(deploy)

    def drop_job(doc):
        doc["jobs"] = [j for j in doc["jobs"] if j["name"] != "ghost"]
        doc["allocations"] = [a for a in doc["allocations"] if a["job"] != "ghost"]
        doc["jobs"][0]["name"] = "api2"
        doc["jobs"][0]["path"] = "workspace/jobs/api2"
    tamper_file(root, drop_job)
    done = run_command(root, mark)
    assert done.returncode != 0 and "workspace/jobs/api is not a job of the catalog" in flat(done), flat(done)


def test_a_tampered_postgresql_catalog_is_refused_by_build_deploy_and_job_command(tmp_path, pg_server, monkeypatch):
    env = dict(pg_server.env, MAAND_STATE_URL=pg_server.database())
    root = make_bucket(tmp_path / "bucket", env=env)
    assert not os.path.exists(os.path.join(root, "data", "catalog.json"))
    for key, value in pg_server.env.items():  # this process writes the row as any holder of the credentials could
        monkeypatch.setenv(key, value)
    store = state_pg.PgStore(env["MAAND_STATE_URL"])
    doc = store.read("catalog")
    catalog = json.loads(doc.text)
    catalog["jobs"][0]["path"] = outside(tmp_path)
    store.write("catalog", json.dumps(catalog), expect=doc.generation)
    mark = tmp_path / "mark"
    done = run_command(root, mark, env)
    assert done.returncode != 0 and not mark.exists(), flat(done)
    assert "is not workspace/jobs/api" in flat(done) and "postgresql://" in flat(done), flat(done)
    deploy = playbook("-i", os.path.join(root, "maand.yml"), "maand.core.deploy", "--check", env=env)
    assert deploy.returncode != 0 and "is not workspace/jobs/api" in flat(deploy), flat(deploy)
    build = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=env)
    assert build.returncode != 0 and "ErrInvalidCatalog" in flat(build), flat(build)
    assert "is not workspace/jobs/api" in flat(build) and pg_server.env["PGPASSWORD"] not in flat(build)

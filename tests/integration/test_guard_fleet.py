"""Guards on a real SSH fleet, through the playbooks run from the bucket folder (issue 31 items 2, 3, 4):

- after an unbuilt edit, status, job stop/start, health_check and run_command work on the last built catalog with one
  warning naming what changed,
  and deploy keeps refusing;
- an unknown maand_ extra var (-e maand_rollbak=api, -e maand_plans=HASH) is refused before any worker is touched;
- a selector typo that would remove every allocation of a job is refused by the build;
- the build's warnings are repeated under the deploy plan.

The steps run in file order on one fleet (as test_status_fleet.py)."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.test_status_fleet import StatusEnv

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = tmp_path_factory.mktemp("guard") / "bucket"
    bucket.mkdir()
    e = StatusEnv(fleet, bucket)
    e.play("init")
    fleet.workers_json(path=bucket / "workspace" / "workers.json")
    fleet.install_bucket_key(bucket)
    e.play("job_create", "-e", "maand_job=api")
    e.play("build")
    e.play("deploy")
    return e


def manifest(env):
    return env.bucket / "workspace" / "jobs" / "api" / "manifest.json"


def records(env):
    """Every worker's promoted deploy record of api (what a deploy that touched a worker would rewrite)."""
    return {h: (env.root(h) / "deploy" / "api.json").read_text() for h in env.hosts}


def test_01_status_after_an_unbuilt_edit_runs_on_the_last_built_catalog_with_one_warning(env):
    data = json.loads(manifest(env).read_text())
    data["version"] = "1.1.0"
    manifest(env).write_text(json.dumps(data, indent=2) + "\n")
    rc, out = env.status()
    assert rc == 0, out
    assert out.count("ErrStaleCatalog") == 1, out
    assert "the workspace changed since the last build (workspace/jobs/api/ changed); this run uses the last " \
           "built catalog" in out, out
    assert "ansible-playbook maand.core.build -e maand_bucket=%s" % env.bucket in out, out
    for host in env.hosts:  # the last built catalog's version, running
        assert re.search(r"api\s+%s\s+active\s+1\.0\.0\s+1\.0\.0\s+yes" % re.escape(host), out), out


def test_02_job_stop_and_start_after_the_unbuilt_edit(env):
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=stop")
    assert out.count("ErrStaleCatalog") == 1, out
    for host in env.hosts:
        assert env.make(host, "api", "status", check=False).returncode != 0
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=start")
    for host in env.hosts:
        assert env.make(host, "api", "status").returncode == 0


def test_02b_health_check_and_run_command_after_the_unbuilt_edit(env):
    rc, out = env.play("health_check")
    assert out.count("ErrStaleCatalog") == 1, out
    rc, out = env.play("run_command", "-e", json.dumps({"maand_cmd": "uname -s"}),
                       env={"ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3"})  # a module on the workers
    assert out.count("ErrStaleCatalog") == 1 and "Linux" in out, out


def test_03_deploy_keeps_refusing_the_stale_catalog(env):
    before = records(env)
    rc, out = env.play("deploy", check=False)
    assert rc != 0 and "ErrStaleCatalog" in out and "workspace/jobs/api/ changed" in out, out
    assert records(env) == before


def test_04_a_typo_in_an_extra_var_is_refused_before_any_worker_is_touched(env):
    env.play("build")  # the edit of test_01, built: a deploy would now roll api forward to 1.1.0
    before = records(env)
    rc, out = env.play("deploy", "-e", "maand_rollbak=api", check=False)
    assert rc != 0, out
    assert 'nothing was run: the extra var maand_rollbak is not read by maand.core.deploy (did you mean ' \
           '"maand_rollback"?)' in out, out
    rc, out = env.play("deploy", "-e", "maand_plans=0123456789abcdef", check=False)
    assert rc != 0 and '(did you mean "maand_plan"?)' in out, out
    rc, out = env.play("status", "-e", "maand_job=api", check=False)
    assert rc != 0 and 'maand_job is not read by maand.core.status (did you mean "maand_jobs"?)' in out, out
    for host in env.hosts:
        assert "[%s]" % host not in out and "%s:" % host not in out.split("nothing was run")[0], out
    assert records(env) == before  # no deploy ran: the records still say 1.0.0
    assert all('"1.0.0"' in text for text in before.values()), before


def test_05_a_selector_typo_that_removes_every_allocation_is_refused(env):
    data = json.loads(manifest(env).read_text())
    good = json.dumps(data, indent=2) + "\n"
    data["selectors"] = ["wroker"]
    manifest(env).write_text(json.dumps(data, indent=2) + "\n")
    rc, out = env.play("build", check=False)
    assert rc != 0, out
    assert "ErrRemoveAll: workspace/jobs/api/manifest.json: selectors: job api had 2 allocations" in out, out
    assert "-e maand_allow_remove_all=true" in out, out
    rc, out = env.play("build", "--check", "-e", "maand_allow_remove_all=true")
    assert "ErrRemoveAll" in out and "maand_allow_remove_all=true" in out, out
    manifest(env).write_text(good)


def test_06_the_deploy_plan_repeats_the_builds_warnings(env):
    data = json.loads(manifest(env).read_text())
    data["owner"] = "team-a"  # not a near miss of any known key: a warning, kept with the catalog
    manifest(env).write_text(json.dumps(data, indent=2) + "\n")
    rc, out = env.play("build")
    assert "unknown key 'owner' is ignored" in out, out
    rc, out = env.play("deploy", "--check")
    assert re.search(r"^build warning: ErrInvalidManifest: workspace/jobs/api/manifest.json: owner: unknown key "
                     r"'owner' is ignored", out, re.M), out
    data["helth_check"] = data.pop("owner")  # within two edits of health_check: an error
    manifest(env).write_text(json.dumps(data, indent=2) + "\n")
    rc, out = env.play("build", check=False)
    assert rc != 0 and "unknown key 'helth_check' is 1 edit from the known key 'health_check'" in out, out

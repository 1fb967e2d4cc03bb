"""The deploy under ansible-runner, exactly as AWX / Automation Platform run a job (issue 8 item 6).

AWX checks the SCM project (here: the bucket's repository) out into ``<private_data_dir>/project``,
syncs the inventory source (the bucket's maand.yml, the maand.core.workspace plugin) and calls
``ansible_runner.run(private_data_dir=..., playbook=..., inventory=...)``; it reads the job's events
and its status / rc. These tests do the same on the local fleet and read the same events
(runner_on_ok for the deploy's tasks, playbook_on_stats) and the exit status. The bad-input tests
need no fleet: they stop at the first play, under Ansible's default configuration.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import make_bucket

ansible_runner = pytest.importorskip("ansible_runner", reason="ansible-runner is not installed (requirements-dev.txt)")

REPO = Path(__file__).resolve().parents[2]
# the deploy playbook's first task (maand.core.preflight)
PREFLIGHT = "Assert that the maand.core.workspace inventory loaded, with workers and their SSH key, and known maand_ extra vars"
COLLECTIONS = str(REPO / ".collections")

# The project's playbook: an AWX job template picks a playbook file of the SCM project.
WRAPPER = "---\n- name: Deploy the bucket\n  ansible.builtin.import_playbook: maand.core.deploy\n"
# The bucket repository's ansible.cfg (the one `maand.core.init` writes), plus the settings the local
# fleet needs (hosts share this machine's file system; fresh host keys per fleet).
PROJECT_CFG = """\
[defaults]
host_key_checking = False
interpreter_python = /usr/bin/python3
forks = 20

[inventory]
enable_plugins = maand.core.workspace, script, auto, yaml, ini
any_unparsed_is_failed = True

[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o ConnectTimeout=5
"""


def run_job(private_data_dir: Path, inventory: str, config: Path, **extra):
    """One AWX-style job: the project's deploy.yml against ``inventory``; returns the runner."""
    return ansible_runner.run(
        private_data_dir=str(private_data_dir), playbook="deploy.yml", inventory=inventory,
        envvars={"ANSIBLE_CONFIG": str(config), "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_NOCOLOR": "1"},
        quiet=True, timeout=600, **extra)


def events(runner, kind):
    return [e for e in runner.events if e.get("event") == kind]


def ok_tasks(runner):
    return {e["event_data"].get("task") for e in events(runner, "runner_on_ok")}


def stats(runner):
    (final,) = events(runner, "playbook_on_stats")
    return final["event_data"]


def output(runner):
    return runner.stdout.read() if runner.stdout else ""


def project(private_data_dir: Path) -> Path:
    proj = private_data_dir / "project"
    (proj / "deploy.yml").write_text(WRAPPER)
    (proj / "ansible.cfg").write_text(PROJECT_CFG)
    return proj


def awx_inventory_sync(bucket: Path, config: Path, dest: Path) -> Path:
    """AWX's inventory update: `ansible-inventory --list` of the source, served to the job as a script."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
    proc = subprocess.run(["ansible-inventory", "-i", str(bucket / "maand.yml"), "--list", "--export"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    assert listing["all"]["vars"]["maand_workspace_ok"] is True
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "listing.json").write_text(proc.stdout)
    script = dest / "hosts"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --host ]; then echo '{}'; else cat '%s'; fi\n" % (dest / "listing.json"))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


# -- no fleet: bad input fails the job -----------------------------------------------------------

@pytest.fixture(name="default_cfg")
def _default_cfg(tmp_path):
    cfg = tmp_path / "empty.cfg"
    cfg.write_text("")
    return cfg


@pytest.mark.parametrize("breakage", ["invalid workers.json", "no maand.yml"])
def test_a_bad_bucket_fails_the_job(tmp_path, default_cfg, breakage):
    pdd = tmp_path / "pdd"
    bucket = pdd / "project"
    shutil.copytree(REPO / "examples" / "resources-and-placement", bucket, ignore=shutil.ignore_patterns("data"))
    project(pdd)
    (bucket / "ansible.cfg").unlink()  # Ansible's defaults: the failing source only warns
    if breakage == "no maand.yml":
        (bucket / "maand.yml").unlink()
    else:
        (bucket / "workspace" / "workers.json").write_text("{")
    runner = run_job(pdd, str(bucket / "maand.yml"), default_cfg)
    assert runner.status == "failed" and runner.rc != 0, output(runner)
    failed = events(runner, "runner_on_failed")
    assert [e["event_data"]["task"] for e in failed] == [PREFLIGHT]
    msg = failed[0]["event_data"]["res"]["msg"]
    if breakage == "no maand.yml":  # no inventory source at all
        assert "The maand workspace inventory did not load" in msg
    else:  # the workspace inventory loaded and names the bucket's errors (maand_inventory_errors):
        # here, that it has no catalog (the build it asks for then names workers.json)
        assert "has errors; nothing was run" in msg and "ErrMissingCatalog" in msg, msg
    assert stats(runner)["failures"] == {"localhost": 1}
    assert "Deploy the bucket's jobs" not in {e["event_data"].get("play") for e in events(runner, "playbook_on_play_start")}


# -- on the fleet: a good bucket deploys, the events say what happened --------------------------

@pytest.mark.fleet
@pytest.mark.slow
def test_deploy_under_ansible_runner_as_awx_runs_it(fleet_factory, tmp_path):
    fleet = fleet_factory(2)
    pdd = tmp_path / "pdd"
    bucket = make_bucket(pdd / "project", fleet.state_dir, n_jobs=2)
    proj = project(pdd)
    config = proj / "ansible.cfg"
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
    build = subprocess.run(["ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket],
                           capture_output=True, text=True, env=env, check=False, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    bucket_id = json.loads((bucket / "data" / "catalog.json").read_text())["bucket_id"]

    # 1. first deploy, inventory = the workspace plugin source
    runner = run_job(pdd, str(bucket / "maand.yml"), config)
    assert runner.status == "successful" and runner.rc == 0, output(runner)
    assert {PREFLIGHT, "Take the bucket deploy lock",
            "Compute the deploy plan"} <= ok_tasks(runner), sorted(ok_tasks(runner))
    final = stats(runner)
    assert not final["failures"] and not final["dark"], final
    assert set(final["changed"]) == set(fleet.addresses), final  # every worker changed, nothing else ran
    for host in fleet.addresses:
        jobs = Path(fleet.host(host)["opt_dir"]) / "worker" / bucket_id / "jobs"
        assert sorted(p.name for p in jobs.iterdir()) == ["api", "web"]
        assert (jobs / "api" / "logs" / "events.log").read_text().splitlines() == ["start 0.0.0 1.0.0"]

    # 2. the AWX way: the inventory was synced (ansible-inventory --list) and the job gets the export
    script = awx_inventory_sync(bucket, config, tmp_path / "synced")
    runner = run_job(pdd, str(script), config)
    assert runner.status == "successful" and runner.rc == 0, output(runner)
    final = stats(runner)
    assert not final["failures"] and not final["changed"], final  # the second deploy changes nothing
    assert set(final["ok"]) >= set(fleet.addresses), final
    for host in fleet.addresses:
        events_log = Path(fleet.host(host)["opt_dir"]) / "worker" / bucket_id / "jobs" / "api" / "logs" / "events.log"
        assert events_log.read_text().splitlines() == ["start 0.0.0 1.0.0"]

    # 3. the same job on a bucket edited since its build: the inventory sets maand_workspace_ok=false
    # with the errors, the first play (localhost) fails naming the file, and nothing runs on a worker
    (bucket / "workspace" / "workers.json").write_text("[{")
    runner = run_job(pdd, str(bucket / "maand.yml"), config)
    text = output(runner)
    assert runner.status == "failed" and runner.rc != 0, text
    assert "workers.json" in text, text
    failed = events(runner, "runner_on_failed")
    assert [e["event_data"]["task"] for e in failed] == [PREFLIGHT], text
    assert not [e for e in events(runner, "runner_on_ok") if e["event_data"].get("host") in fleet.addresses], text

"""First steps and status on a real SSH fleet: init -> job_create -> build -> deploy -> status.

The bucket is made by maand.core.init and its jobs by maand.core.job_create; every playbook runs from
the bucket folder with the bucket's own ansible.cfg and no -i (it sets inventory = maand.yml). The
scaffolded jobs must pass their health gates on their pool ports; status must show a job stopped by
hand as not running, the others as running, as a table and as JSON, honour maand_jobs and --limit,
and show an unreachable worker (and exit non-zero). The steps run in file order on one fleet.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
JOBS = ("api", "web")


class StatusEnv(Env):
    """Runs ansible-playbook maand.core.<name> from the bucket folder: its ansible.cfg, no -i."""

    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.cwd = bucket
        self.env.update(ANSIBLE_CONFIG=None, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1",
                        PWD=str(bucket), ANSIBLE_HOST_KEY_CHECKING="False",
                        ANSIBLE_SSH_ARGS="-o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null "
                                         "-o StrictHostKeyChecking=no -o ConnectTimeout=5")

    def cmd(self, name, *args):
        return ["ansible-playbook", "maand.core.%s" % name, *args]

    @classmethod
    def initialised(cls, fleet, bucket):
        """(env, init's output): maand.core.init in the new folder bucket (maand_bucket defaults to the current
        directory), then the fleet's workers.json and bucket key in it."""
        env = cls(fleet, bucket)
        bucket.mkdir()
        rc, out = env.play("init")
        fleet.workers_json(path=bucket / "workspace" / "workers.json")
        fleet.install_bucket_key(bucket)
        return env, out

    def make(self, host, job, target, check=True):
        return self.fleet.ssh(host, "cd /opt/worker/%s/jobs/%s && make %s" % (self.bucket_id, job, target), check=check)

    def status(self, *args, check=True):
        return self.play("status", *args, check=check)

    def status_json(self, *args, check=True):
        """-e maand_format=json: the callback writes the JSON document alone on stdout."""
        proc = self.playbook("status", "-e", "maand_format=json", *args)
        if check and proc.returncode != 0:
            raise AssertionError(proc.stdout + proc.stderr)
        return proc.returncode, json.loads(proc.stdout)


def row(out, job, host):
    """The status table row of job on host, split on runs of two spaces or more."""
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[:2] == [job, host]:
            return cells
    raise AssertionError("no row for %s on %s in:\n%s" % (job, host, out))


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = tmp_path_factory.mktemp("status") / "bucket"
    e, out = StatusEnv.initialised(fleet, bucket)
    assert "maand.core.job_create" in out and "maand.core.status" in out, out  # the next steps
    return e


def test_01_init_writes_the_bucket_ansible_cfg(env):
    cfg = (env.bucket / "ansible.cfg").read_text()
    for line in ("inventory = maand.yml", "display_skipped_hosts = False", "localhost_warning = False",
                 "ssh_args = -C -o ControlMaster=auto -o ControlPersist=15m"):
        assert line in cfg, cfg


def test_02_job_create_scaffolds_and_never_overwrites(env):
    for job in JOBS:
        env.play("job_create", "-e", "maand_job=%s" % job)
        folder = env.bucket / "workspace" / "jobs" / job
        assert sorted(p.name for p in folder.iterdir()) == sorted(["manifest.json", "Makefile", "%s.conf.tpl" % job,
                                                                   "server.py"])
    before = (env.bucket / "workspace" / "jobs" / "api" / "Makefile").read_text()
    rc, out = env.play("job_create", "-e", "maand_job=api", check=False)
    assert rc != 0 and "job api already exists" in out, out
    assert (env.bucket / "workspace" / "jobs" / "api" / "Makefile").read_text() == before


def test_03_build_shows_the_pool_ports(env):
    rc, out = env.play("build")
    assert re.search(r"JOB\s+WORKER\s+STATE.*\bPORTS\b", out), out
    for host in env.hosts:
        assert re.search(r"api\s+%s\s+active.*api_port=3\d{4}" % re.escape(host), out), out


def test_04_deploy_without_i_from_the_bucket_passes_the_health_gates(env):
    rc, out = env.play("deploy")
    # the bucket's ansible.cfg (init) selects the maand.core.deploy callback: one line per passed gate
    assert re.search(r"^api start batch 1/1: health gate passed on ", out, re.M), out
    assert re.search(r"^web start batch 1/1: health gate passed on ", out, re.M), out
    assert "deploy done: 6 started" in out, out
    assert "skipping: [" not in out, out  # display_skipped_hosts = False
    for host in env.hosts:
        conf = env.fleet.ssh(host, "cat /opt/worker/%s/jobs/api/api.conf" % env.bucket_id).stdout
        assert re.search(r"^port = 3\d{4}$", conf, re.M), conf
        assert env.make(host, "api", "status").returncode == 0


def test_05_status_shows_every_allocation_running(env):
    rc, out = env.status()
    assert re.search(r"JOB\s+WORKER\s+STATE\s+VERSION\s+DEPLOYED\s+RUNNING\s+LAST DEPLOY", out), out
    for job in JOBS:
        for host in env.hosts:
            cells = row(out, job, host)
            assert cells[2:6] == ["active", "1.0.0", "1.0.0", "yes"], cells
            assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", cells[6]), cells
    assert "status: 6 running" in out, out


def test_06_a_job_stopped_by_hand_shows_not_running(env):
    h0 = env.hosts[0]
    env.make(h0, "api", "stop")
    rc, out = env.status(check=False)
    assert rc != 0, out  # an active allocation that is not running fails the run, after the table
    assert row(out, "api", h0)[5:] == ["no", row(out, "api", h0)[6], "api not running"], out  # make status's output
    assert row(out, "web", h0)[5] == "yes", out
    for host in env.hosts[1:]:
        assert row(out, "api", host)[5] == "yes", out
    assert "status: 5 running, 1 not running" in out, out
    rc, data = env.status_json(check=False)
    assert rc != 0 and data["not_running"] == ["api@%s" % h0], data
    by_key = {(r["job"], r["worker"]): r for r in data["rows"]}
    assert len(by_key) == 6
    assert by_key[("api", h0)]["running"] is False and by_key[("api", h0)]["deployed_version"] == "1.0.0"
    assert all(r["running"] is True for k, r in by_key.items() if k != ("api", h0)), data
    assert data["unreachable"] == [] and data["failed"] == []


def test_07_start_is_idempotent(env):
    h0 = env.hosts[0]
    first = env.make(h0, "api", "start").stdout
    second = env.make(h0, "api", "start").stdout
    assert "started" in first and "already running" in second, (first, second)
    assert env.make(h0, "api", "status").returncode == 0
    rc, out = env.status()
    assert "status: 6 running" in out, out


def test_08_status_filters_jobs_and_honours_limit(env):
    rc, data = env.status_json("-e", "maand_jobs=web")
    assert {r["job"] for r in data["rows"]} == {"web"} and len(data["rows"]) == 3
    h1 = env.hosts[1]
    rc, data = env.status_json("--limit", h1)
    assert {r["worker"] for r in data["rows"]} == {h1} and len(data["rows"]) == 2
    rc, out = env.status("-e", "maand_jobs=apii", check=False)
    assert rc != 0 and "did you mean" in out, out


def test_09_an_unreachable_worker_shows_and_fails_the_run(env):
    h2 = env.hosts[2]
    env.fleet.stop_host(h2)
    rc, out = env.status(check=False)
    assert rc != 0, out
    for job in JOBS:
        assert row(out, job, h2)[5] == "unreachable", out
        assert row(out, job, env.hosts[0])[5] == "yes", out
    assert "unreachable worker: %s" % h2 in out, out

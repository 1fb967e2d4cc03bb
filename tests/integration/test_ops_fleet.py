"""The operations verbs end to end on a real 2-host SSH fleet (issue 13): an `ssh` health probe gates a
deploy and runs on the worker; maand.core.health_check with a healthy and an unhealthy job (named, exit
non-zero), maand_jobs, --limit and maand_wait; maand.core.job with a custom Makefile target (migrate),
an unknown target, and maand_health_check=true; maand_wait failing fast on a job whose process was killed by
hand (its `make status` says it is not running), as the deploy's gates do.

`flaky`'s ssh probe counts its runs in /opt/flaky-count on the worker and passes from the third run on:
"healthy after a while" without any timing. The steps share one bucket and run in file order.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import MAKEFILE, SERVER_MAKEFILE, SERVER_PY, add_job, make_bucket, pid_makefile
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

PORT = 31011
FLAKY = 'c=$(cat /opt/flaky-count 2>/dev/null || echo 0); echo $((c+1)) > /opt/flaky-count; [ "$c" -ge 2 ]'
MIGRATE = "migrate:\n\tmkdir -p data\n\techo migrated-$(ALLOCATION_IP) > data/migrated\n"
# a server whose `make status` asks its process (exit 0 only while it runs, as the job scaffold's)
STEADY_PORT = 31012
STEADY_BUDGET = 60
STEADY_MAKEFILE = pid_makefile("steady", "/usr/bin/python3 server.py %d" % STEADY_PORT,
                               before_start='\t@echo "steady: serving on %d" >> logs/steady.log\n' % STEADY_PORT)


class OpsEnv(Env):
    timeout = 600
    tail = 8000

    def opt(self, host):
        return Path(self.fleet.host(host)["opt_dir"])

    def reset_flaky(self):
        for host in self.hosts:
            (self.opt(host) / "flaky-count").unlink(missing_ok=True)


def lines(out, word):
    return [line.strip() for line in out.splitlines() if line.strip().startswith(word)]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = make_bucket(tmp_path_factory.mktemp("ops") / "bucket", fleet.state_dir, n_jobs=1, health=True, port=PORT)
    add_job(bucket, "api", files={"health_mode": "ok\n", "server.py": SERVER_PY},
            makefile=SERVER_MAKEFILE.format(port=PORT) + MIGRATE, resources={"ports": {"http_port": PORT}},
            health_check={"checks": [{"type": "tcp", "port": "http_port"},
                                     {"type": "http", "port": "http_port", "path": "/health_mode"},
                                     {"type": "ssh", "command": "touch /opt/api-gate-ran && test -d /opt/worker"}],
                          "timeout_seconds": 2, "wait": {"attempts": 30, "interval_seconds": 0.5}})
    add_job(bucket, "flaky", makefile=MAKEFILE,
            health_check={"checks": [{"type": "ssh", "command": FLAKY}], "timeout_seconds": 5,
                          "wait": {"attempts": 10, "interval_seconds": 0.2}})
    add_job(bucket, "plain", makefile=MAKEFILE)
    add_job(bucket, "steady", files={"server.py": SERVER_PY}, makefile=STEADY_MAKEFILE,
            resources={"ports": {"steady_port": STEADY_PORT}},
            health_check={"checks": [{"type": "tcp", "port": "steady_port"}], "timeout_seconds": 1,
                          "wait": {"attempts": STEADY_BUDGET, "interval_seconds": 1}})
    return OpsEnv(fleet, bucket)


def test_01_an_ssh_probe_gates_the_deploy_and_runs_on_the_worker(env):
    env.play("build")
    rc, out = env.play("deploy")
    assert "health gate passed: api" in out and "health gate passed: flaky" in out
    for host in env.hosts:
        assert (env.opt(host) / "api-gate-ran").exists()  # the probe ran on the worker, not on the controller
        assert int((env.opt(host) / "flaky-count").read_text()) >= 3  # retried until it passed
    assert not Path("/opt/api-gate-ran").exists()


def test_02_health_check_names_the_unhealthy_job_and_fails(env):
    env.reset_flaky()
    rc, out = env.play("health_check", check=False)
    assert rc != 0
    h0, h1 = env.hosts
    ok = lines(out, "ok ")
    assert {line.split()[1:3][1] for line in ok if line.split()[1] == "(worker)"} == {h0, h1}
    api = [line for line in ok if line.split()[1] == "api"]
    assert len(api) == 6 and any("http :%d/health_mode" % PORT in line for line in api)
    assert all(line.endswith(" ms") for line in api)
    failed = lines(out, "FAILED")
    assert sorted(line.split()[2] for line in failed if line.split()[1] == "flaky") == sorted([h0, h1])
    assert all("exited 1" in line for line in failed)
    assert "health check skipped: plain (no health_check config or commands)" in out
    assert "unhealthy jobs: flaky" in out


def test_03_maand_jobs_limit_and_unknown_names(env):
    rc, out = env.play("health_check", "-e", "maand_jobs=api")
    assert not lines(out, "FAILED") and "flaky" not in "\n".join(lines(out, "ok "))
    h0, h1 = env.hosts
    rc, out = env.play("health_check", "-e", "maand_jobs=api", "--limit", h0)
    checked = {line.split()[2] for line in lines(out, "ok ")}
    assert checked == {h0}
    rc, out = env.play("health_check", "-e", "maand_jobs=apy", check=False)
    assert rc != 0 and 'apy (did you mean "api"?)' in out and "nothing was checked" in out


def test_04_maand_wait_retries_until_healthy(env):
    env.reset_flaky()
    rc, out = env.play("health_check", "-e", "maand_jobs=flaky", "-e", "maand_wait=true")
    assert "not healthy yet" in out
    assert len([line for line in lines(out, "ok ") if line.split()[1] == "flaky"]) == 2


def test_05_a_custom_target_runs_through_the_job_playbook(env):
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=migrate")
    for host in env.hosts:
        assert (env.job(host, "api") / "data" / "migrated").read_text().strip() == "migrated-%s" % host
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=nope", check=False)
    assert rc != 0
    assert "defines no target 'nope'; its targets: migrate, reload, restart, start, status, stop" in out
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=-f/etc/passwd", check=False)
    assert rc != 0 and "not a safe Makefile target name" in out


def test_06_maand_health_check_after_the_target(env):
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=restart", "-e", "maand_health_check=true")
    assert len([line for line in lines(out, "ok ") if line.split()[1] == "api"]) == 6
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=stop", "-e", "maand_health_check=true",
                       "-e", "maand_wait_seconds=1", check=False)
    assert rc != 0 and "unhealthy jobs: api" in out
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=start", "-e", "maand_health_check=true")


def test_07_a_probe_deploy_cannot_run_fails_only_its_job(env):
    """A catalog of an older build (no health_gate) with a probe type deploy does not know: that job is
    not deployed and named, the others deploy, and the run fails."""
    path = env.bucket / "data" / "catalog.json"
    saved = path.read_text()
    catalog = json.loads(saved)
    for job in catalog["jobs"]:
        if job["name"] == "flaky":
            job.pop("health_gate", None)
            job["health_check"] = {"checks": [{"type": "grpc", "port": 1}]}
    path.write_text(json.dumps(catalog, indent=2, sort_keys=True))
    try:
        rc, out = env.play("deploy", "-e", "maand_force=true", check=False)
    finally:
        path.write_text(saved)
    assert rc != 0
    assert "job flaky not deployed: its health_check cannot run" in out and "'grpc' is not supported" in out
    assert "health gate passed: api" in out  # api was redeployed (forced) all the same


def test_08_maand_wait_fails_fast_on_a_job_whose_process_was_killed_by_hand(env):
    h0, h1 = env.hosts
    pid = int((env.job(h0, "steady") / "data" / "steady.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # the job's own server, started by this module's deploy
    rc, out = env.play("health_check", "-e", "maand_jobs=steady", "-e", "maand_wait=true", check=False)
    assert rc != 0, out
    # the job, the worker, that its process is not running, and the status line `make status` printed
    assert ("%s: job steady is not running: `make status` said so 2 times in a row" % h0) in out, out
    assert "(steady not running)" in out, out
    assert "not running (`make status`, stopped waiting): steady on %s" % h0 in out, out
    # it stopped waiting long before its 60-attempt budget (rounds go on while a status check is out)
    m = re.search(r"job steady: stopped waiting after [\d.]+ s \((\d+) of %d attempt\(s\), 1\.0 s apart\): "
                  r"`make status` says the job is not running" % STEADY_BUDGET, out)
    assert m and int(m.group(1)) < STEADY_BUDGET / 2, out
    # the status tail a failed gate shows: make status and the job's newest log
    assert "%s: last lines of job steady:" % h0 in out and "--- make status (exit 2):" in out, out
    assert "steady: serving on %d" % STEADY_PORT in out, out
    # the other worker's allocation runs: healthy, not stopped
    assert [line.split()[2] for line in lines(out, "ok ") if line.split()[1] == "steady"] == [h1], out
    assert "%s: job steady is not running" % h1 not in out
    env.play("job", "-e", "maand_job=steady", "-e", "maand_target=start", "-e", "maand_job_workers=%s" % h0,
             "-e", "maand_health_check=true")

"""Narrow steps on a real fleet: a run of steps with few acting hosts is included once (run_once)
and delegates to the acting workers, so idle hosts cost nothing. Plays of more than 8 hosts use them;
MAAND_DEPLOY_WIDE_FACTOR=1 makes a 3-host fleet use them too (a step is wide only when every host
acts), so the rolling, gated path of a big fleet is tested here on three hosts.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.deploy.bucket import make_bucket
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("narrow") / "bucket", fleet.state_dir, n_jobs=2, health=True)
    e = Env(fleet, bucket)
    e.env["MAAND_DEPLOY_WIDE_FACTOR"] = "1"
    return e


def bump(bucket, job, version):
    path = bucket / "workspace" / "jobs" / job / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["version"] = version
    path.write_text(json.dumps(manifest))


def test_01_first_deploy_then_a_gated_rolling_change_in_narrow_steps(env):
    hosts = env.hosts
    env.play("build")
    env.play("deploy")
    bump(env.bucket, "api", "1.1.0")   # restart_policy always, batches of 1, an http gate per batch
    env.play("build")
    rc, out = env.play("deploy")
    assert out.count("health gate passed: api") == 3
    # the narrow steps were included once, for one host, not once per host
    included = re.findall(r"included: \S*/narrow\.yml for (.+?) =>", out)
    assert included and len(set(included)) == 1 and "," not in included[0], out
    assert "steps_narrow.yml" in out
    for h in hosts:
        assert env.events(h, "api")[-1] == "restart 1.0.0 1.1.0"
    rc, out = env.play("deploy")
    assert "no changes required" in out


def test_02_a_failure_in_a_narrow_step_stops_the_rollout_and_fails_the_run(env):
    hosts = env.hosts
    api = env.bucket / "workspace" / "jobs" / "api"
    good = (api / "Makefile").read_text()
    (api / "Makefile").write_text(good.replace("restart:\n", "restart:\n\t@echo boom-narrow; exit 3\n", 1))
    env.play("build")
    rc, out = env.play("deploy", check=False)
    assert rc != 0 and "boom-narrow" in out
    restarted = [h for h in hosts if env.events(h, "api")[-1] != "restart 1.0.0 1.1.0"]
    assert len(restarted) <= 1  # batch size 1: the first batch failed, the others were never touched
    (api / "Makefile").write_text(good + "# fixed\n")
    env.play("build")
    env.play("deploy")
    for h in hosts:
        assert env.events(h, "api")[-1] == "restart 1.1.0 1.1.0"

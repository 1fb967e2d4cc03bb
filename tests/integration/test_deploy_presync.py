"""Files of fresh starts travel early (docs/deploy.md, deploy/schedule.py: _presync) on a real fleet: a
first deploy ships the second wave's files with the first wave's rsync, yet never starts a job of a
wave after a failed one; the next deploy starts it exactly once.
"""

from __future__ import annotations

import pytest

from tests.integration.deploy.bucket import MAKEFILE, add_job, fleet_bucket
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

# db's start fails while its tree holds a file named `fail`
FAILING_MAKEFILE = MAKEFILE.replace("start:\n", "start:\n\ttest ! -f fail\n", 1)
assert FAILING_MAKEFILE != MAKEFILE


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = fleet_bucket(tmp_path_factory.mktemp("presync") / "bucket", fleet.state_dir)
    script = "print('command')\n"
    add_job(bucket, "db", makefile=FAILING_MAKEFILE, files={"fail": "1\n", "_modules/command_ready.py": script},
            commands={"command_ready": {"executed_on": ["cli"]}})
    add_job(bucket, "app", files={"app.conf": "v1\n", "_modules/command_after.py": script},
            commands={"command_after": {"executed_on": ["cli"], "demands": {"job": "db", "command": "command_ready"}}})
    return Env(fleet, bucket)


def test_01_a_failed_first_wave_leaves_the_second_waves_files_but_never_starts_it(env):
    env.build()
    rc, out = env.deploy(check=False)
    assert rc != 0, out
    assert "make start failed" in out and "not deployed because an earlier wave failed: app" in out, out
    for host in env.hosts:
        assert (env.job(host, "app") / "app.conf").read_text() == "v1\n"  # shipped with db's rsync
        assert env.events(host, "app") == [] and env.record(host, "app") is None  # never started
        assert env.events(host, "db") == [] and env.record(host, "db") is None  # its start failed first
    assert out.count("start   not run") == 2, out  # app on both workers, in the verdict table


def test_02_the_next_deploy_starts_the_second_wave_once(env):
    (env.bucket / "workspace" / "jobs" / "db" / "fail").unlink()
    env.build()
    rc, out = env.deploy()
    assert rc == 0, out
    for host in env.hosts:
        assert [e.split()[0] for e in env.events(host, "app")] == ["start"]  # its early files started nothing
        # db's failed start was never promoted: it is stopped before the retry
        assert [e.split()[0] for e in env.events(host, "db")] == ["stop", "start"]
        assert env.record(host, "app")["version"] == "1.0.0" and not (env.job(host, "db") / "fail").exists()
    rc, out = env.deploy()
    assert rc == 0 and all(n == 0 for n in env.changed(out).values()), out

"""Worker maintenance at maand parity on a real SSH fleet (3 workers, issue 23 items 3 and 6), through the
real playbooks.

run_command: `-e maand_batch=1 -e maand_health_check=true` (maand's `-c 1 --health_check`) runs the command
one worker at a time with a health check of every job after each batch; a batch that breaks a job's health
(its HTTP server killed) stops the run there and the later batches never run; a batch where the command
fails stops it too; without maand_cmd the bucket's workspace/command.sh runs (refused, naming both, when it
is gone). maand.core.job: after a deploy that reached only one worker (--limit), the verb refuses the
workers whose worker.json has the older update_seq, naming them and the fix, and runs nothing; it runs on
the worker in sync; a worker without worker.json is refused too.

maand's tests/integration/run_command_test.go TestIntegrationRunCommandWithHealthCheck (after a deploy,
`run_command -c 1 --health_check` passes) is test_01. The steps share one bucket and run in file order. The batch order is read from the first run's output,
never assumed.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import make_bucket

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


class Env(deploy_env.Env):
    order: list = []  # the workers in batch order, from the first run

    def run(self, cmd, *args, check=True):
        extra = ["-e", json.dumps({"maand_cmd": cmd})] if cmd is not None else []
        return self.play("run_command", *extra, *args, check=check)

    def marker(self, host, name):
        path = self.root(host) / name
        return path.read_text().split() if path.exists() else []


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("runcmd") / "bucket", fleet.state_dir, n_jobs=1, health=True)
    e = Env(fleet, bucket)
    e.play("build")
    e.play("deploy")
    return e


def headers(out):
    """The workers of the run_command report, in the order their blocks were printed."""
    return re.findall(r"^=== (\S+) \((?:exit \d+|unreachable|not run)\) ===$", out, re.M)


BATCHES = ["-e", "maand_batch=1", "-e", "maand_health_check=true", "-e", "maand_health_check_delay=0"]


def test_01_batches_of_one_with_a_health_check_after_each(env):
    rc, out = env.run('echo "ran on $WORKER_IP" >> marker-1', *BATCHES[:4], "-e", "maand_health_check_delay=1")
    assert rc == 0, out
    assert out.count("Pausing for 1 seconds") == 3, out  # maand_health_check_delay, once per batch
    env.order[:] = headers(out)
    assert sorted(env.order) == sorted(env.hosts), out
    for n, host in enumerate(env.order, 1):
        assert "run_command: batch %d of 3: ok on 1 of 1 worker(s)" % n in out, out
        assert "run_command: batch %d of 3: health check passed" % n in out, out
        assert env.marker(host, "marker-1") == ["ran", "on", host]
    # the health check of a batch ran before the next batch's command: its lines sit between the blocks
    first_health = out.index("run_command: batch 1 of 3: health check passed")
    assert out.index("=== %s (" % env.order[0]) < first_health < out.index("=== %s (" % env.order[1]), out
    between = out[out.index("=== %s (" % env.order[0]):out.index("=== %s (" % env.order[1])]
    for host in env.hosts:  # every job on every worker of the play was checked, as maand
        assert re.search(r"ok\s+api\s+%s\s+http :31001/health_mode" % re.escape(host), between), between


def test_02_an_unhealthy_batch_stops_the_later_ones(env):
    first, second, third = env.order
    cmd = ('echo "$WORKER_IP" >> marker-2; if [ "$WORKER_IP" = %s ]; then kill "$(cat jobs/api/data/http.pid)"; fi'
           % first)
    rc, out = env.run(cmd, *BATCHES, "-e", "maand_wait_seconds=2", check=False)
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "the health check after batch 1 of 3 (%s) failed" % first in flat, out
    assert re.search(r"api on %s: (tcp|http) :31001" % re.escape(first), flat), out
    assert "stopped after batch 1 of 3 (unhealthy): not run on %s, %s" % (second, third) in flat, out
    assert headers(out) == [first], out
    assert env.marker(first, "marker-2") == [first]
    assert env.marker(second, "marker-2") == env.marker(third, "marker-2") == []
    # a failing command stops the run at its batch as well (here batches of 2: the third worker never runs)
    rc, out = env.run('echo x >> marker-3; test "$WORKER_IP" != %s' % first, "-e", "maand_batch=2", check=False)
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "run_command: batch 1 of 2: ok on 1 of 2 worker(s)" in flat, out
    assert "stopped after batch 1 of 2 (the command failed): not run on %s" % third in flat, out
    assert [len(env.marker(h, "marker-3")) for h in env.order] == [1, 1, 0]
    # the job verb brings the server back on the worker the test broke (all workers are in sync)
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=restart", "-e", "maand_job_workers=%s" % first,
             "-e", "maand_health_check=true")


def test_03_workspace_command_sh_is_the_default_command(env):
    script = env.bucket / "workspace" / "command.sh"
    script.write_text('echo "command.sh on $WORKER_IP in $(pwd)"\necho \'{{ not_a_template }}\'\n')
    rc, out = env.run(None)
    assert rc == 0, out
    assert sorted(headers(out)) == sorted(env.hosts), out
    for host in env.hosts:
        assert "command.sh on %s in /opt/worker/%s" % (host, env.bucket_id) in out, out
    assert out.count("{{ not_a_template }}") >= 3, out  # run as written, never templated
    assert "run_command: ok on 3 of 3 worker(s)" in out
    script.unlink()
    rc, out = env.run(None, check=False)
    flat = " ".join(out.split())
    assert rc != 0 and "no command: pass it as -e maand_cmd='uptime', or write it to %s" % script in flat, out
    assert not headers(out)
    rc, out = env.run("true", "-e", "maand_batch=0", check=False)
    assert rc != 0 and "maand_batch must be a whole number of workers, at least 1" in " ".join(out.split()), out


def test_04_job_verbs_refuse_a_worker_a_deploy_did_not_reach(env):
    first, second, third = env.order
    (env.bucket / "workspace" / "jobs" / "api" / "conf" / "extra.conf").write_text("more=1\n")
    env.play("build")
    env.play("deploy", "--limit", first)
    seq = {h: json.loads((env.root(h) / "worker.json").read_text())["update_seq"] for h in env.hosts}
    assert seq[second] == seq[third] == seq[first] - 1, seq
    before = {h: env.events(h, "api") for h in env.hosts}
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=restart", check=False)
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "maand.core.job: 2 worker(s) out of sync with the catalog; nothing was run" in flat, out
    for host in (second, third):
        assert ("worker %s: update_seq mismatch (its worker.json has update_seq %d, the bucket's last deploy wrote %d)"
                % (host, seq[host], seq[first])) in flat, out
    assert "Fix: deploy first" in flat and "worker %s:" % first not in flat, out
    assert {h: env.events(h, "api") for h in env.hosts} == before  # nothing ran, not even on the worker in sync
    # the worker the deploy reached is in sync: the verb runs there
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=restart", "-e", "maand_job_workers=%s" % first)
    assert env.events(first, "api")[-1].startswith("restart ")
    # a worker without worker.json (never deployed, or wiped) is refused too, each stale worker with its reason
    (env.root(second) / "worker.json").unlink()
    rc, out = env.play("job", "-e", "maand_job=api", "-e", "maand_target=status", check=False)
    flat = " ".join(out.split())
    assert rc != 0 and "worker %s: no worker.json in /opt/worker/%s" % (second, env.bucket_id) in flat, out
    assert "worker %s: update_seq mismatch" % third in flat, out

"""Faults during a deploy, on a real SSH fleet (issue 8, "Bad input and faults"): a controller step that
raises, a worker that vanishes mid-step, a SIGKILL of the deploy process, two deploys at once, and a
start whose health gate failed. Each ends with a non-zero exit naming the cause (or, for the loser of
two deploys, a refusal), nothing under data/ or logs/ on any worker is lost, and the next deploy
converges (the one after it changes nothing).

The steps share one bucket and one 3-host fleet and run in file order.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import MAKEFILE, SERVER_MAKEFILE, SERVER_PY, add_job, make_bucket
from tests.integration.deploy.env import Env, race_deploys

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
FAULT_ENV = "MAAND_DEPLOY_TEST_FAULT"  # plugins/plugin_utils/deploy/run.py (test-only)

# `restart` logs "restart-begin", sleeps for the seconds in the job's slow_seconds file, then logs "restart":
# a window in which the test can kill a worker or the deploy while a make target runs.
SLOW_MAKEFILE = MAKEFILE.replace(
    "restart:\n\t$(call record,restart)\n",
    "restart:\n\t$(call record,restart-begin)\n\tsleep $$(cat slow_seconds 2>/dev/null || echo 0)\n"
    "\t$(call record,restart)\n", 1)
assert SLOW_MAKEFILE != MAKEFILE


class FaultsEnv(Env):
    timeout = 400

    def start(self, name, *args):
        """ansible-playbook in the background, in a session of its own (so its pid names all we started)."""
        return subprocess.Popen(self.cmd(name, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=str(REPO), start_new_session=True)

    def converges(self):
        """A deploy that succeeds, then one that changes nothing."""
        self.deploy()
        rc, out = self.deploy()
        assert set(self.changed(out).values()) == {0}, out
        assert "no changes required" in out, out

    def runtime_kept(self):
        """data/ and logs/ of every job on every worker still hold what the first deploy wrote."""
        for host in self.hosts:
            for job in ("api", "web", "job2", "slow"):
                root = self.job(host, job)
                assert (root / "data" / "start.count").read_text().strip() == "1", (host, job)
                assert (root / "logs" / "events.log").read_text().startswith("start "), (host, job)

    def bump(self, job, text):
        (self.bucket / "workspace" / "jobs" / job / "app.txt").write_text(text)
        self.build()


def session_pids(sid):
    """Processes still alive in session sid (a session this test started)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, encoding="utf-8") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # field 6 of stat: session id
                pids.append(int(name))
    return pids


def reap_session(sid, timeout=120.0):
    """Wait for the orphans of a killed ansible-playbook (session sid) to end; kill the rest by pid."""
    end = time.monotonic() + timeout
    while session_pids(sid) and time.monotonic() < end:
        time.sleep(0.5)
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("faults") / "bucket", fleet.state_dir, n_jobs=3, health=True,
                         port=31051)
    add_job(bucket, "slow", files={"app.txt": "v1\n", "slow_seconds": "0\n"}, makefile=SLOW_MAKEFILE)
    return FaultsEnv(fleet, bucket)


def test_01_baseline(env):
    env.build()
    env.converges()
    env.runtime_kept()
    rc, out = env.deploy("--check", "-e", "maand_job=api", check=False)  # a typo of maand_jobs is refused
    assert rc != 0 and 'the extra var maand_job is not read by maand.core.deploy (did you mean "maand_jobs"?)' \
        in " ".join(out.split()), out


def test_02_a_controller_step_that_raises_fails_the_run_and_the_next_deploy_converges(env):
    h0, h1, h2 = env.hosts
    env.bump("job2", "job 2 v2\n")  # restart, one worker per batch: steps 0 (+ worker metadata), 1, 2
    rc, out = env.deploy(check=False, env={FAULT_ENV: "step:1"})
    assert rc != 0, out
    assert "injected controller fault at step:1" in out, out
    assert env.events(h0, "job2")[-1].startswith("restart"), env.events(h0, "job2")
    for h in (h1, h2):  # the batches after the crash never ran
        assert not env.events(h, "job2")[-1].startswith("restart"), env.events(h, "job2")
    assert not (env.bucket / "data" / "deploy.lock").exists() or "deploy.lock" in out
    env.runtime_kept()
    env.converges()
    for h in env.hosts:
        assert (env.job(h, "job2") / "app.txt").read_text() == "job 2 v2\n"
        assert sum(e.startswith("restart") for e in env.events(h, "job2")) == 1, env.events(h, "job2")


def test_03_a_crashing_finish_fails_the_run_releases_the_lock_and_keeps_the_work(env):
    env.bump("job2", "job 2 v3\n")
    rc, out = env.deploy(check=False, env={FAULT_ENV: "finish"})
    assert rc != 0, out
    assert "the deploy finish step crashed" in out and "injected controller fault at finish" in out, out
    assert not (env.bucket / "data" / "deploy.lock").exists()
    for h in env.hosts:  # the steps ran and were promoted: the next deploy has nothing to redo
        assert (env.job(h, "job2") / "app.txt").read_text() == "job 2 v3\n"
    env.runtime_kept()
    env.converges()
    for h in env.hosts:
        assert sum(e.startswith("restart") for e in env.events(h, "job2")) == 2, env.events(h, "job2")


def test_04_a_worker_that_vanishes_mid_step_fails_its_allocation_and_the_next_deploy_converges(env):
    h0, h1, h2 = env.hosts
    (env.bucket / "workspace" / "jobs" / "slow" / "slow_seconds").write_text("20\n")
    env.bump("slow", "v2\n")
    seen = len(env.events(h1, "slow"))
    proc = env.start("deploy")
    try:
        env.wait_for_event(h1, "slow", "restart-begin", seen)
        env.fleet.stop_host(h1)  # every process in its namespace, sshd included
        out = proc.communicate(timeout=400)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap_session(proc.pid)
        env.fleet.start_host(h1)
    assert proc.returncode != 0, out
    assert h1 in out and re.search(r"slow@%s" % re.escape(h1), out), out
    assert env.events(h0, "slow")[-1].startswith("restart "), env.events(h0, "slow")
    assert env.events(h2, "slow") == ["start 0.0.0 1.0.0"], env.events(h2, "slow")  # later batch never ran
    env.runtime_kept()
    (env.bucket / "workspace" / "jobs" / "slow" / "slow_seconds").write_text("0\n")
    env.build()
    env.converges()
    for h in env.hosts:
        assert (env.job(h, "slow") / "app.txt").read_text() == "v2\n"
        assert env.events(h, "slow")[-1].startswith("restart "), (h, env.events(h, "slow"))


def test_05_sigkill_of_the_deploy_then_the_next_deploy_converges(env):
    h0, h1, h2 = env.hosts
    (env.bucket / "workspace" / "jobs" / "slow" / "slow_seconds").write_text("5\n")
    env.bump("slow", "v3\n")
    seen = len(env.events(h1, "slow"))
    proc = env.start("deploy")
    try:
        env.wait_for_event(h1, "slow", "restart-begin", seen)
        before = len(env.events(h1, "slow"))
        os.kill(proc.pid, signal.SIGKILL)  # the ansible-playbook process only, as an OOM killer would
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap_session(proc.pid)  # its forked workers finish the task already running, then exit
    assert proc.returncode == -signal.SIGKILL
    assert (env.bucket / "data" / "deploy.lock").exists()  # left behind by the killed process: stale
    assert len(env.events(h1, "slow")) >= before
    env.runtime_kept()
    rc, out = env.deploy()
    assert "took over a stale deploy lock" in out, out
    rc, out = env.deploy()
    assert "no changes required" in out, out
    for h in env.hosts:
        assert (env.job(h, "slow") / "app.txt").read_text() == "v3\n"
        assert env.events(h, "slow")[-1].startswith("restart "), (h, env.events(h, "slow"))
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_06_two_deploys_at_once_one_runs_the_other_is_refused(env):
    (env.bucket / "workspace" / "jobs" / "slow" / "slow_seconds").write_text("3\n")
    env.bump("slow", "v4\n")
    counts = {h: sum(e.startswith("restart ") for e in env.events(h, "slow")) for h in env.hosts}
    loser = race_deploys(env, env)
    assert "another deploy holds data/deploy.lock" in loser, loser
    for h in env.hosts:  # every allocation restarted once, by the winner
        assert sum(e.startswith("restart ") for e in env.events(h, "slow")) == counts[h] + 1, env.events(h, "slow")
    env.runtime_kept()
    rc, out = env.deploy()
    assert "no changes required" in out, out


def test_07_a_start_that_failed_its_gate_is_stopped_before_it_is_retried(env):
    h0 = env.hosts[0]
    add_job(env.bucket, "gated", files={"health_mode": "ok\n", "server.py": SERVER_PY},
            makefile=SERVER_MAKEFILE.format(port=31052), resources={"ports": {"http_port": 31052}},
            health_check={"checks": [{"type": "http", "port": "http_port", "path": "/missing"}],
                          "timeout_seconds": 1, "wait": {"attempts": 3, "interval_seconds": 0.3}})
    env.build()
    rc, out = env.deploy(check=False)
    assert rc != 0 and "gated" in out, out
    assert env.events(h0, "gated") == ["start 0.0.0 1.0.0"]
    leftover = (env.job(h0, "gated") / "data" / "http.pid").read_text().strip()
    assert os.path.exists("/proc/%s" % leftover)  # the failed start left its server running
    manifest = env.bucket / "workspace" / "jobs" / "gated" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["health_check"]["checks"][0]["path"] = "/health_mode"
    manifest.write_text(json.dumps(data, indent=2))
    env.build()
    rc, out = env.deploy("--check", "--diff")
    assert re.search(r"gated\s+%s\s+start\s.*retry: the previous start failed its gate" % re.escape(h0), out), out
    env.converges()
    events = env.events(h0, "gated")
    assert [e.split()[0] for e in events] == ["start", "stop", "start"], events  # stopped before the retry
    assert not os.path.exists("/proc/%s" % leftover)  # the leftover server is gone
    for h in env.hosts:
        assert env.record(h, "gated") is not None, h

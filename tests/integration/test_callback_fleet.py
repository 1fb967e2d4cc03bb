"""The stdout callback maand.core.deploy on a real SSH fleet (issue 14, item 1): the plan line, progress
lines while a health gate waits (the job's server listens only ~2 s after its start), the verdict
table, the final line; a worker that is down shows as unreachable and the others as ok, with a non-zero
exit; a gate that fails at a first start says how long it waited, what `make status` said and that the
job must listen on its port.

The steps share one bucket and one 3-host fleet and run in file order. MAAND_CALLBACK_CAPTURE=<dir>
keeps the captured output of each deploy there (docs/deploy.md shows one).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import SERVER_MAKEFILE, SERVER_PY, add_job, make_bucket
from tests.integration.deploy.env import Env
from ansible_collections.maand.core.plugins.plugin_utils import health

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

PORT = 31061
# the server binds its port ~2 s after `make start` returned: the gate needs a few attempts
SLOW_SERVER_PY = "import time\ntime.sleep(2)\n" + SERVER_PY


class CallbackEnv(Env):
    """Plays through the maand.core.deploy stdout callback; their output as printed, stdout and stderr apart."""
    timeout = 400

    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="maand.core.deploy", MAAND_DEPLOY_LIVE="never")

    def play(self, name, *args, env=None):
        proc = self.playbook(name, *args, env=env, text=False)
        # bytes, decoded here: text mode would turn the live line's carriage returns into newlines
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")

    def build(self):
        rc, out, err = self.play("build")
        assert rc == 0, out + err

    def deploy(self, name, env=None):
        rc, out, err = self.play("deploy", env=env)
        capture = os.environ.get("MAAND_CALLBACK_CAPTURE")
        if capture:
            Path(capture).mkdir(parents=True, exist_ok=True)
            (Path(capture) / ("%s.log" % name)).write_text(out + err)
        return rc, out, err

    def bump(self, job, version):
        manifest = self.bucket / "workspace" / "jobs" / job / "manifest.json"
        data = json.loads(manifest.read_text())
        data["version"] = version
        manifest.write_text(json.dumps(data, indent=2))
        self.build()


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("callback") / "bucket", fleet.state_dir, n_jobs=2, health=True,
                         port=PORT)
    (bucket / "workspace" / "jobs" / "api" / "server.py").write_text(SLOW_SERVER_PY)
    return CallbackEnv(fleet, bucket)


def table_row(out, job, host):
    found = [l for l in out.splitlines() if l.startswith(job + " ") and l.split()[:2] == [job, host]]
    assert len(found) == 1, (job, host, out)
    return found[0].split()


def test_01_first_deploy_shows_plan_progress_verdict_and_done_line(env):
    env.build()
    rc, out, err = env.deploy("first")
    assert rc == 0, out + err
    assert "plan: 6 start; gates: api" in out, out
    waits = re.findall(r"^api start batch 1/1: waiting for (\S+) (?:tcp|http) :%d\S* \(attempt (\d+)/30, [\d.]+ s\)$"
                       % PORT, out, re.M)
    assert waits and waits[0][1] == "1" and waits[0][0] in env.hosts, out
    assert re.search(r"^api start batch 1/1: health gate passed on %s \(\d+\.\d s\)$"
                     % re.escape(", ".join(env.hosts)), out, re.M), out
    assert re.search(r"^JOB\s+WORKER\s+ACTION\s+RESULT\s+GATE\s+VERSION$", out, re.M), out
    for h in env.hosts:
        api = table_row(out, "api", h)
        assert api[2:4] == ["start", "started"] and api[5] == "s" and float(api[4]) >= 1.5, api
        assert api[-3:] == ["-", "->", "1.0.0"], api
        assert table_row(out, "web", h)[2:5] == ["start", "started", "-"]
    assert "workers: 3 ok" in out
    assert out.rstrip().splitlines()[-1] == "deploy done: 6 started", out
    assert "skipping:" not in out and "PLAY RECAP" not in out and "TASK [" not in out, out


def test_02_a_change_with_the_live_line_redrawn_in_place(env):
    env.bump("api", "1.1.0")
    rc, out, err = env.deploy("live", env={"MAAND_DEPLOY_LIVE": "always"})
    assert rc == 0, out + err
    assert "plan: 3 restart, 3 unchanged; gates: api" in out, out
    assert "\r\x1b[K" in out and re.search(r"\r\x1b\[Kapi upgrade batch 1/3: waiting for ", out), out
    for h in env.hosts:
        assert table_row(out, "api", h)[2:4] == ["restart", "restarted"]
        assert table_row(out, "api", h)[-3:] == ["1.0.0", "->", "1.1.0"]
    assert re.search(r"^web\s+\(3 workers\)\s+skip\s+unchanged", out, re.M), out
    assert out.rstrip().splitlines()[-1] == "deploy done: 3 restarted, 3 unchanged", out


def test_03_a_worker_that_is_down_is_unreachable_and_the_others_ok(env):
    down = env.hosts[2]
    env.bump("api", "1.2.0")
    env.fleet.stop_host(down)  # every process in its namespace, sshd included
    try:
        rc, out, err = env.deploy("unreachable")
    finally:
        env.fleet.start_host(down)
    text = out + err
    assert rc != 0, text
    assert table_row(out, "api", down)[2:4] == ["unreachable", "unreachable"], out
    assert table_row(out, "web", down)[2:4] == ["unreachable", "unreachable"], out
    for h in env.hosts[:2]:
        assert table_row(out, "api", h)[2:4] == ["restart", "restarted"], out
    assert "workers: 2 ok, 1 unreachable (%s)" % down in out, out
    assert re.search(r"^deploy done: 2 restarted, 2 unreachable, 2 unchanged", out.rstrip().splitlines()[-1]), out
    assert "failed=1" not in text and "PLAY RECAP" not in text, text


def test_04_a_gate_that_fails_at_a_first_start_says_why(env):
    add_job(env.bucket, "mute", files={"health_mode": "off\n", "server.py": SERVER_PY},
            makefile=SERVER_MAKEFILE.format(port="$(MUTE_PORT)"), resources={"ports": {"mute_port": {}}},
            selectors=["worker"], max_concurrent_starts=1, start_gate="every_batch",  # a gate per start batch
            health_check={"checks": [{"type": "tcp", "port": "mute_port"}],
                          "timeout_seconds": 1, "wait": {"attempts": 3, "interval_seconds": 0.3}})
    env.build()
    port = json.loads((env.bucket / "data" / "catalog.json").read_text())
    port = next(j["ports"]["mute_port"] for j in port["jobs"] if j["name"] == "mute")
    rc, out, err = env.deploy("gate-failed")
    text = out + err
    assert rc != 0, text
    h0 = env.hosts[0]
    assert re.search(r"mute start batch 1/3: health gate FAILED on %s after [\d.]+ s \(3 attempts\)" % re.escape(h0),
                     out), text
    assert "tcp %s:%d" % (h0, port) in text and "Connection refused" in text, text
    assert re.search(r"gave up after \d+\.\d s \(3 attempt\(s\), 0.3 s apart\)", text), text
    assert "--- make status (exit 0):" in text and "running" in text, text   # the job's own status output
    assert ("hint: nothing listens on port %d (mute_port) of job mute yet" % port) in text, text
    assert '{{ get "maand/bucket" "mute_port" }}' in text and "$MUTE_PORT" in text, text
    assert table_row(out, "mute", h0)[2:4] == ["start", "gate"], out
    assert table_row(out, "mute", env.hosts[1])[2:5] == ["start", "not", "run"], out


def test_status_command_tails_make_status_and_the_newest_log(tmp_path):
    """The command a failed gate runs on its workers, here in a local shell."""
    root = tmp_path / "worker"
    job = root / "jobs" / "api"
    (job / "logs").mkdir(parents=True)
    (job / "Makefile").write_text("status:\n\t@echo line1; echo line2; exit 3\n")
    (job / "logs" / "app.log").write_text("".join("log %d\n" % i for i in range(30)))
    out = subprocess.run(["sh", "-c", health.status_command(str(root), "api", lines=3)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "--- make status (exit 2):"                         # make's own exit status
    assert out[1:3] == ["line1", "line2"] and "Error 3" in out[3]
    assert out[4] == "--- logs/app.log:" and out[5:] == ["log 27", "log 28", "log 29"]
    missing = subprocess.run(["sh", "-c", health.status_command(str(root), "nope")], capture_output=True, text=True,
                             check=True).stdout
    assert "(no job folder" in missing
    # a symlink the job's user planted is named, never followed (the command may run as root)
    secret = tmp_path / "root-only"
    secret.write_text("do not leak\n")
    (job / "logs" / "zz.log").symlink_to(secret)
    os.utime(job / "logs" / "zz.log", follow_symlinks=False)
    linked = subprocess.run(["sh", "-c", health.status_command(str(root), "api")], capture_output=True, text=True,
                            check=True).stdout
    assert "--- logs/zz.log: a symlink, not read" in linked and "do not leak" not in linked, linked
    (job / "logs" / "zz.log").unlink()
    (job / "logs").rename(job / "old-logs")
    (job / "logs").symlink_to(tmp_path)
    linked = subprocess.run(["sh", "-c", health.status_command(str(root), "api")], capture_output=True, text=True,
                            check=True).stdout
    assert "--- logs: a symlink, not read" in linked and "do not leak" not in linked, linked


def test_05_check_diff_ends_with_the_plan_not_a_play_recap(env):
    """issue 23 item 10: --check --diff prints the plan; its end says nothing was changed, no task counts."""
    env.bump("api", "1.3.0")
    rc, out, err = env.play("deploy", "--check", "--diff")
    assert rc == 0, out + err
    assert re.search(r"^deploy plan for bucket \S+: changes required", out, re.M), out
    assert out.rstrip().splitlines()[-1] == "check mode: nothing was changed; run without --check to apply the plan above", out
    assert "PLAY RECAP" not in out + err, out

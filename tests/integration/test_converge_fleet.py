"""Rollouts that converge on running, on a real SSH fleet (issue 30 items 4, 7 and 8).

One bucket, one 3-host fleet, steps in file order. The job `web` runs a real server (its pid in data/web.pid,
`make status` exits 0 only while it runs), listens one second after its start (the gate's tcp probe waits for
it), and every make target and the server's bind append "<event> <time>" to logs/events.log:
1. a first deploy starts the three;
2. a no-change deploy on the healthy fleet (every `make status` asked by the state read says running) says
   no changes;
3. the server killed by hand on one worker: `--check` shows `start ... not running`, a plain deploy starts it
   again there (and only there), the verdict says so, and the deploy after it changes nothing;
4. `max_concurrent_upgrades: "34%"` of 3 allocations: an upgrade rolls in 2 batches, the plan names the number;
5. `maand.core.job -e maand_target=restart` rolls: batch 2's restarts begin only after batch 1's servers are
   up (the gate), a line per batch; `-e maand_job_all_at_once=true` restarts all three without a gate.

MAAND_CALLBACK_CAPTURE=<dir> keeps the outputs there (docs/deploy.md shows them).
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tests.integration.deploy.bucket import add_job
from tests.integration.deploy.env import Env, capture, fleet_env, verdict_rows

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

SERVER = """\
import socketserver, sys, time


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"web\\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


time.sleep(1.0)  # a service that takes a moment to listen: the gate must wait for it
server = Server(("0.0.0.0", int(sys.argv[1])), Handler)
with open("logs/events.log", "a") as log:
    log.write("up %.6f\\n" % time.time())
server.serve_forever()
"""

MAKEFILE = """\
.PHONY: start stop restart reload status
PID := data/web.pid
RUNNING = [ -f $(PID) ] && kill -0 "$$(cat $(PID))" 2>/dev/null
LOG = logs/events.log
define event
\t@mkdir -p data logs
\t@echo "$(1) $$(date +%s.%N)" >> $(LOG)
endef
define halt
\t@if $(RUNNING); then kill "$$(cat $(PID))"; sleep 0.2; fi; rm -f $(PID)
endef
define launch
\t@setsid nohup python3 server.py $(WEB_PORT) </dev/null >>logs/web.log 2>&1 & echo $$! > $(PID)
endef
start:
\t$(call event,start)
\t$(call launch)
stop:
\t$(call event,stop)
\t$(call halt)
restart:
\t$(call event,restart)
\t$(call halt)
\t$(call launch)
reload: restart
status:
\t@if $(RUNNING); then echo "web running"; else echo "web not running"; exit 1; fi
"""

HEALTH = {"checks": [{"type": "tcp", "port": "web_port"}], "timeout_seconds": 1,
          "wait": {"attempts": 40, "interval_seconds": 0.5}}


class Web(Env):
    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="maand.core.deploy", MAAND_DEPLOY_LIVE="never")

    def set_job(self, version):
        add_job(self.bucket, "web", version=version, makefile=MAKEFILE, files={"server.py": SERVER},
                max_concurrent_upgrades="34%", resources={"ports": {"web_port": {}}}, health_check=HEALTH)
        self.build()

    def times(self, host, event):
        return [float(line.split()[1]) for line in self.events(host, "web") if line.startswith(event + " ")]

    def pid(self, host):
        return int((self.job(host, "web") / "data" / "web.pid").read_text())

    def alive(self, host):
        try:
            os.kill(self.pid(host), 0)
        except (OSError, ValueError):
            return False
        return True


def rows(out, job="web"):
    return verdict_rows(out, job)


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    return fleet_env(Web, fleet_factory, tmp_path_factory, "converge")


def test_01_first_deploy_starts_every_server(env):
    env.set_job("1.0.0")
    rc, out = env.deploy()
    assert "deploy done: 3 started" in out, out
    for h in env.hosts:
        assert env.alive(h) and env.times(h, "up"), env.events(h, "web")


def test_02_a_no_change_deploy_on_a_healthy_fleet_says_no_changes(env):
    rc, out = env.deploy()
    capture("converge-no-change.log", out)
    assert "no changes required" in out and "not running" not in out, out
    for h in env.hosts:
        assert len(env.times(h, "start")) == 1 and not env.times(h, "restart")


def test_03_a_job_killed_by_hand_is_started_again_by_a_plain_deploy(env):
    dead = env.hosts[1]
    os.kill(env.pid(dead), signal.SIGKILL)
    end = time.monotonic() + 10
    while env.alive(dead) and time.monotonic() < end:
        time.sleep(0.1)
    assert not env.alive(dead)
    rc, out = env.deploy("--check")
    capture("converge-check.log", out)
    assert re.search(r"web +%s +start +not running \(`make status` exit 2 on the worker\)" % re.escape(dead), out), out
    assert len(env.times(dead, "start")) == 1 and not env.alive(dead)  # --check started nothing
    rc, out = env.deploy()
    capture("converge-deploy.log", out)
    assert ["web", dead, "start", "started"] == rows(out)[[r[1] for r in rows(out)].index(dead)][:4], out
    assert "(was not running)" in out and "deploy done: 1 started, 2 unchanged" in out, out
    assert len(env.times(dead, "start")) == 2 and env.alive(dead)
    for h in env.hosts:
        if h != dead:
            assert len(env.times(h, "start")) == 1 and not env.times(h, "restart"), env.events(h, "web")
    rc, out = env.deploy()
    assert "no changes required" in out, out


def test_04_34_percent_of_3_allocations_rolls_in_2_batches(env):
    env.set_job("1.1.0")
    rc, out = env.deploy()
    capture("converge-percent.log", out)
    assert "note: job web: max_concurrent_upgrades 34% of 3 active allocation(s) = batches of 2" in out, out
    assert "web upgrade batch 1/2" in out and "web upgrade batch 2/2" in out and "batch 3/" not in out, out
    assert out.count("health gate passed") == 2 and "deploy done: 3 restarted" in out, out
    first, second = env.hosts[:2], env.hosts[2]
    assert min(env.times(second, "restart")) > max(env.times(h, "up")[-1] for h in first)  # behind the gate


def test_05_a_rolling_job_restart_goes_one_batch_at_a_time_behind_its_gate(env):
    before = {h: len(env.times(h, "restart")) for h in env.hosts}
    rc, out = env.play("job", "-e", "maand_job=web", "-e", "maand_target=restart")
    capture("converge-job-restart.log", out)
    assert "web restart batch 1/2: health gate passed" in out and "web restart batch 2/2: health gate passed" in out, out
    assert "deploy done: 3 restarted" in out and "is not read by maand.core.deploy" not in out, out
    first, second = env.hosts[:2], env.hosts[2]
    for h in env.hosts:
        assert len(env.times(h, "restart")) == before[h] + 1 and env.alive(h)
        assert env.record(h, "web")["version"] == "1.1.0"
    # batch 2 began only once batch 1's servers listened (the gate)
    assert min(env.times(second, "restart")[before[second]:]) > max(env.times(h, "up")[-1] for h in first)
    rc, out = env.deploy()
    assert "no changes required" in out, out  # the restart left the deploy state as it was


def test_06_all_at_once_keeps_maands_behaviour(env):
    before = {h: len(env.times(h, "restart")) for h in env.hosts}
    rc, out = env.play("job", "-e", "maand_job=web", "-e", "maand_target=restart", "-e", "maand_job_all_at_once=true")
    assert "restart batch" not in out and "health gate passed" not in out, out  # maand's way: no batches, no gate
    for h in env.hosts:
        assert len(env.times(h, "restart")) == before[h] + 1

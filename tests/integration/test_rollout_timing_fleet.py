"""Rollouts that wait for the truth on a real SSH fleet (issue 30, items 2, 3, 5 and 6): a small HTTP job on
three workers whose server.py behaves as its mode.conf says (ok; flap:N, which dies after answering N requests;
silent, which runs but never listens), deployed through the playbook.

One bucket, one 3-host fleet, steps in file order:
1. the first deploy;
2. `canary: 1` + `auto_promote: true` (+ `min_healthy_time`): one deploy upgrades the canary, holds the rest
   until the canary's gate and min_healthy_time passed, then upgrades the other two;
3. a version that flaps (answers the gate, then dies) with `min_healthy_time` and `auto_revert`: the batch
   fails inside the window and is reverted; the other workers are not touched;
4. a version that never listens (its process runs, so fail fast cannot tell) with a big gate budget and
   `progress_deadline`: the rollout fails at the deadline naming the worker and the probe it waited for;
5. an orphan holds the job's port on a worker: the new process dies with "Address already in use" while the
   orphan answers the probe; the gate fails because `make status` says the job is not running there; once the
   orphan is gone the next deploy converges.

MAAND_CALLBACK_CAPTURE=<dir> keeps each deploy's output there (docs/deploy.md shows it).
"""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.deploy.bucket import add_job
from tests.integration.deploy.env import Env, capture, fleet_env, verdict_rows

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

SERVER_PY = """\
import http.server, os, socketserver, sys, time

MODE = open("mode.conf").read().strip()
served = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global served
        body = ("web %s\\n" % MODE).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        served += 1
        if MODE.startswith("flap:") and served >= int(MODE.split(":")[1]):
            print("web %s: exiting after %d requests" % (MODE, served), flush=True)
            os._exit(1)

    def log_message(self, *args):
        pass


class Server(socketserver.TCPServer):
    allow_reuse_address = True


if MODE == "silent":  # runs, never listens: a rollout that makes no progress
    print("web silent: not listening", flush=True)
    time.sleep(3600)
server = Server(("0.0.0.0", int(sys.argv[1])), Handler)  # another process on the port: Address already in use
print("web %s: serving on %s" % (MODE, sys.argv[1]), flush=True)
server.serve_forever()
"""

# stop waits for the process to be gone, so a restart never races the old listener for the port; a zombie
# (an exited process its reaper has not collected yet) is not running
MAKEFILE = """\
.PHONY: start stop restart reload status
PID := data/web.pid
RUNNING = [ -f $(PID) ] && kill -0 "$$(cat $(PID))" 2>/dev/null && ! grep -qs '^State:.*Z' /proc/$$(cat $(PID))/status
start:
\t@mkdir -p data logs
\t@setsid nohup /usr/bin/python3 server.py $(WEB_PORT) </dev/null >>logs/web.log 2>&1 & echo $$! > $(PID)
stop:
\t@if $(RUNNING); then kill "$$(cat $(PID))"; for i in $$(seq 50); do $(RUNNING) || break; sleep 0.1; done; fi
\t@rm -f $(PID)
restart: stop start
reload: restart
status:
\t@if $(RUNNING); then echo "web running"; else echo "web not running"; exit 1; fi
"""

ORPHAN = ("cd /; setsid nohup /usr/bin/python3 -c 'import http.server, socketserver, sys; "
          "socketserver.TCPServer.allow_reuse_address = True; socketserver.TCPServer((\"0.0.0.0\", int(sys.argv[1])), "
          "http.server.SimpleHTTPRequestHandler).serve_forever()' %d </dev/null >/dev/null 2>&1 & echo $!")


def health(attempts=20):
    return {"checks": [{"type": "http", "port": "web_port", "path": "/"}], "timeout_seconds": 1,
            "wait": {"attempts": attempts, "interval_seconds": 0.5}}


class Web(Env):
    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="maand.core.deploy", MAAND_DEPLOY_LIVE="never")

    def set_job(self, version, mode, attempts=20, **manifest):
        add_job(self.bucket, "web", version=version, makefile=MAKEFILE, max_concurrent_upgrades=1,
                resources={"ports": {"web_port": {}}}, health_check=health(attempts),
                files={"server.py": SERVER_PY, "mode.conf": mode + "\n"}, **manifest)
        self.build()

    def port(self):
        return next(j for j in self.catalog()["jobs"] if j["name"] == "web")["ports"]["web_port"]

    def versions(self):
        return [(self.record(h, "web") or {}).get("version") for h in self.hosts]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    return fleet_env(Web, fleet_factory, tmp_path_factory, "timing")


def verdict(out):
    """{worker: RESULT} of the verdict table."""
    return {row[1]: row[3] for row in verdict_rows(out, "web")}


def test_01_first_deploy(env):
    env.set_job("1.0.0", "ok")
    rc, out = env.deploy()
    assert "deploy done: 3 started" in out, out
    assert env.versions() == ["1.0.0"] * 3


def test_02_auto_promote_rolls_canary_and_rest_in_one_deploy(env):
    env.set_job("1.1.0", "ok", canary=1, auto_promote=True, min_healthy_time=2)
    rc, out = env.deploy()
    capture("timing-auto-promote.log", out)
    h1, h2, h3 = env.hosts
    assert re.search(r"web\s+%s\s+restart\s+.*\[web canary batch 1/1\]" % re.escape(h1), out), out
    assert re.search(r"web\s+%s\s+restart\s+.*after the canary \(auto_promote\)\s+\[web upgrade batch 2/2\]"
                     % re.escape(h3), out), out
    assert "hold" not in verdict(out).values() and "deploy done: 3 restarted" in out, out
    # the canary's gate and its min_healthy_time came before the rest was touched
    canary = out.index("web canary batch 1/1: healthy on %s; min_healthy_time: probing 2 s more" % h1)
    assert canary < out.index("web upgrade batch 1/2: applying on %s" % h2), out
    assert env.versions() == ["1.1.0"] * 3


def test_03_a_flap_inside_min_healthy_time_fails_the_batch_and_auto_revert_reverts_it(env):
    env.set_job("1.2.0", "flap:3", min_healthy_time=6, auto_revert=True)
    rc, out = env.deploy(check=False)
    capture("timing-flap.log", out)
    h1 = env.hosts[0]
    assert rc != 0, out
    assert re.search(r"%s: http %s:\d+: .* \([\d.]+ s into min_healthy_time 6 s: the gate had passed, then this "
                     r"probe failed\)" % (re.escape(h1), re.escape(h1)), out), out
    assert "web flap:3: exiting after 3 requests" in out, out  # the log tail of the failed gate
    assert verdict(out) == {h1: "reverted", env.hosts[1]: "not", env.hosts[2]: "not"}, out
    assert env.versions() == ["1.1.0"] * 3  # the flapping version was never promoted anywhere


def test_04_a_stuck_rollout_hits_its_progress_deadline_naming_what_it_waited_for(env):
    env.set_job("1.3.0", "silent", attempts=400, progress_deadline=6)  # a 200 s gate budget
    rc, out = env.deploy(check=False)
    capture("timing-deadline.log", out)
    h1 = env.hosts[0]
    assert rc != 0, out
    m = re.search(r"progress_deadline 6 s passed: job web made no progress for ([\d.]+) s; it was waiting for "
                  r"%s http :%d/ \((.*?)\)" % (re.escape(h1), env.port()), out)
    assert m and "Connection refused" in m.group(2), out
    assert "job web is not running" not in out, out  # its process runs: only the deadline could end the wait
    assert env.versions() == ["1.1.0"] * 3


def test_05_a_port_held_by_an_orphan_fails_the_gate_because_make_status_says_not_running(env):
    h1, h2, h3 = env.hosts
    job = "/opt/worker/%s/jobs/web" % env.bucket_id
    env.fleet.ssh(h2, "cd %s && kill $(cat data/web.pid) && while kill -0 $(cat data/web.pid) 2>/dev/null; "
                  "do sleep 0.1; done" % job)
    orphan = int(env.fleet.ssh(h2, ORPHAN % env.port()).stdout.split()[-1])
    try:
        for dummy in range(50):  # the orphan answers on the job's port
            if env.fleet.ssh(h2, "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 1)'"
                             % env.port(), check=False).returncode == 0:
                break
            time.sleep(0.2)
        env.set_job("1.4.0", "ok")
        rc, out = env.deploy(check=False)
        capture("timing-orphan.log", out)
        assert rc != 0, out
        assert "%s: status: its probes pass, but job web is not running there: `make status` said so" % h2 in out, out
        assert "Address already in use" in out, out  # the new process's log, in the failed gate's tail
        assert verdict(out)[h2] == "gate", out  # "gate failed"
    finally:
        env.fleet.ssh(h2, "kill %d" % orphan, check=False)
    rc, out = env.deploy()
    assert env.versions() == ["1.4.0"] * 3, out

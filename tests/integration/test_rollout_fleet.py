"""Rollouts of a quorum service on a real SSH fleet (issue 22 items 1-3): Debian's etcd 3.4 as a job.

One bucket, one 3-host fleet, steps in file order:
1. first deploy with `max_concurrent_starts: 1`: the members start one after another and the health
   gate (etcd's /health, 200 only while the cluster has a leader, so only with a majority up) runs
   once, after the last start batch, over all three (maand's start semantics); a gate after the first
   start batch could never pass;
2. an upgrade one member at a time while a client keeps writing through etcdctl: no acknowledged
   write is lost (every one is read back with etcdctl get);
3. a broken upgrade (the new version's etcd exits at start) fails batch 1 and touches no other member;
   `-e maand_rollback=etcd` restores the promoted version where it failed, leaves the others alone,
   and every member runs the old version again, healthy;
4. the same broken version with `auto_revert: true`: one deploy fails batch 1, restores the promoted
   version there, gates it, and ends failed with the verdict `reverted`; status says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time

import pytest

from tests.integration.deploy.bucket import add_job, fleet_bucket
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

CLIENT, PEER = 32379, 32380
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"

MAKEFILE = """\
.PHONY: start stop restart reload status
PID = data/etcd.pid
LOG = logs/events.log
start:
\tmkdir -p data logs
\techo "start $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)
\tif [ -f $(PID) ] && kill -0 $$(cat $(PID)) 2>/dev/null; then exit 0; fi; \\
\tsetsid nohup /usr/bin/etcd --name m$(ALLOCATION_INDEX) --data-dir data/etcd \\
\t  --listen-client-urls http://$(ALLOCATION_IP):$(CLIENT_PORT),http://127.0.0.1:$(CLIENT_PORT) \\
\t  --advertise-client-urls http://$(ALLOCATION_IP):$(CLIENT_PORT) \\
\t  --listen-peer-urls http://$(ALLOCATION_IP):$(PEER_PORT) \\
\t  --initial-advertise-peer-urls http://$(ALLOCATION_IP):$(PEER_PORT) \\
\t  --initial-cluster $$(cat cluster.conf) --initial-cluster-token maand-rollout --initial-cluster-state new \\
\t  $$(cat flags.conf) </dev/null >>logs/etcd.log 2>&1 & echo $$! > $(PID)
stop:
\tmkdir -p data logs
\techo "stop $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)
\tif [ -f $(PID) ]; then kill $$(cat $(PID)) 2>/dev/null || true; \\
\t  for i in $$(seq 50); do kill -0 $$(cat $(PID)) 2>/dev/null || break; sleep 0.1; done; rm -f $(PID); fi
restart:
\tmkdir -p logs
\techo "restart $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)
\t$(MAKE) --no-print-directory stop start
reload: restart
status:
\t@[ -f $(PID) ] && kill -0 $$(cat $(PID)) 2>/dev/null
"""

HEALTH = {"checks": [{"type": "http", "port": "client_port", "path": "/health"}], "timeout_seconds": 2,
          "wait": {"attempts": 16, "interval_seconds": 0.5}}


class Etcd(Env):
    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="maand.core.deploy", MAAND_DEPLOY_LIVE="never")

    def set_job(self, version, flags, **manifest):
        add_job(self.bucket, "etcd", version=version, makefile=MAKEFILE, max_concurrent_starts=1,
                max_concurrent_upgrades=1, resources={"ports": {"client_port": CLIENT, "peer_port": PEER}},
                health_check=HEALTH, files={"flags.conf": flags + "\n", "cluster.conf": self.cluster() + "\n"},
                **manifest)
        self.build()

    def cluster(self):
        return ",".join("m%d=http://%s:%d" % (i, h, PEER) for i, h in enumerate(self.hosts))

    def endpoints(self, hosts=None):
        return ",".join("http://%s:%d" % (h, CLIENT) for h in hosts or self.hosts)

    def etcdctl(self, *args, hosts=None, timeout=10):
        return subprocess.run([ETCDCTL, "--endpoints", self.endpoints(hosts), "--dial-timeout=2s",
                               "--command-timeout=3s", *args], capture_output=True, text=True, timeout=timeout,
                              env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}, check=False)

    def healthy(self, host):
        return self.etcdctl("endpoint", "health", hosts=[host]).returncode == 0

    def flags(self, host):
        return (self.job(host, "etcd") / "flags.conf").read_text().strip()

    def restarts(self, host):
        return [e for e in self.events(host, "etcd") if e.startswith("restart")]


class Writer(threading.Thread):
    """A client that keeps writing rollout/<n> through every endpoint and remembers what was acknowledged."""

    def __init__(self, env):
        super().__init__(daemon=True)
        self.env, self.acked, self.failed, self.stopping = env, [], 0, threading.Event()

    def run(self):
        n = 0
        while not self.stopping.is_set():
            key = "rollout/%06d" % n
            if self.env.etcdctl("put", key, "v%d" % n).returncode == 0:
                self.acked.append(key)
            else:
                self.failed += 1
            n += 1
            time.sleep(0.05)


def verdict_rows(out):
    """The rows of the verdict table (between its JOB header and the workers: line), split."""
    lines = out.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("JOB ") and "RESULT" in line)
    return [line.split() for line in lines[start + 1:] if line.startswith("etcd ")]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    if not shutil.which("etcd", path="/usr/bin") or not shutil.which("etcdctl"):
        pytest.fail("etcd-server and etcd-client are not installed: run scripts/bootstrap.sh", pytrace=False)
    fleet = fleet_factory(3)
    bucket = fleet_bucket(tmp_path_factory.mktemp("rollout") / "bucket", fleet.state_dir)
    return Etcd(fleet, bucket)


def test_01_first_deploy_one_member_at_a_time_passes_one_gate_after_the_last_start(env):
    env.set_job("1.0.0", "")
    rc, out = env.deploy()
    print(out)
    for i, h in enumerate(env.hosts):
        assert re.search(r"etcd +%s +start +new allocation  \[etcd start batch %d/3\]" % (re.escape(h), i + 1), out), out
    # one gate, after the third start, over the three members (a gate after the first could never pass)
    assert out.count("health gate passed") == 1, out
    assert "health gate passed on %s" % ", ".join(env.hosts) in out, out
    assert "deploy done: 3 started" in out, out
    for h in env.hosts:
        assert env.record(h, "etcd")["version"] == "1.0.0" and env.healthy(h)


def test_02_upgrade_one_member_at_a_time_loses_no_acknowledged_write(env):
    env.set_job("1.1.0", "--snapshot-count 5000")
    writer = Writer(env)
    writer.start()
    try:
        time.sleep(1)
        rc, out = env.deploy()
        time.sleep(1)
    finally:
        writer.stopping.set()
        writer.join(30)
    print(out)
    assert out.count("health gate passed") == 3 and "deploy done: 3 restarted" in out, out
    assert len(writer.acked) >= 20, (len(writer.acked), writer.failed)
    got = env.etcdctl("get", "rollout/", "--prefix", "--keys-only")
    assert got.returncode == 0, got.stderr
    stored = {line for line in got.stdout.splitlines() if line}
    assert set(writer.acked) <= stored, sorted(set(writer.acked) - stored)[:10]
    for h in env.hosts:
        assert env.record(h, "etcd")["version"] == "1.1.0" and env.flags(h) == "--snapshot-count 5000"
        assert len(env.restarts(h)) == 1 and env.healthy(h)


def test_03_broken_upgrade_fails_batch_1_then_maand_rollback_restores_it(env):
    first, others = env.hosts[0], env.hosts[1:]
    env.set_job("1.2.0", "--bogus-flag")  # etcd exits at start: the new version never becomes healthy
    rc, out = env.deploy(check=False)
    print(out)
    assert rc != 0 and "etcd upgrade batch 1/3: health gate FAILED on %s" % first in out, out
    assert env.flags(first) == "--bogus-flag" and not env.healthy(first)
    for h in others:  # never got the new version; the cluster keeps its quorum
        assert env.flags(h) == "--snapshot-count 5000" and len(env.restarts(h)) == 1 and env.healthy(h)
    rc, preview = env.deploy("--check", "--diff", "-e", "maand_rollback=etcd")
    # --diff of this rollback: the failed attempt's file on the worker -> the promoted copy that goes back
    assert "--- etcd/flags.conf (%s)\n+++ etcd/flags.conf (promoted)\n" % first in preview, preview
    assert "\n---bogus-flag\n" in preview and "\n+--snapshot-count 5000\n" in preview, preview
    assert env.flags(first) == "--bogus-flag"   # --check changed nothing
    rc, out = env.deploy("-e", "maand_rollback=etcd")
    print(out)
    assert re.search(r"etcd +%s +rollback +rollback: restore 1.1.0 \(1.2.0 failed its gate\)" % re.escape(first), out), out
    for h in others:
        assert re.search(r"etcd +%s +skip +rollback: left alone \(runs 1.1.0; 1.2.0 never reached it\)" % re.escape(h),
                         out), out
    assert "etcd rollback batch 1/1: health gate passed on %s" % first in out, out
    for h in env.hosts:
        assert env.record(h, "etcd")["version"] == "1.1.0" and env.flags(h) == "--snapshot-count 5000", h
        assert env.healthy(h)
    for h in others:
        assert len(env.restarts(h)) == 1  # left alone
    rc, status = env.play("status", "-e", "maand_jobs=etcd", env={"ANSIBLE_STDOUT_CALLBACK": None})
    print(status)
    assert "reverted from 1.2.0" in [line for line in status.splitlines() if first in line and "etcd" in line][0]


def test_04_auto_revert_puts_the_promoted_version_back_in_one_deploy(env):
    first, others = env.hosts[0], env.hosts[1:]
    env.set_job("1.2.0", "--bogus-flag", auto_revert=True)
    before = {h: len(env.restarts(h)) for h in env.hosts}
    rc, out = env.deploy(check=False)
    print(out)
    assert rc != 0, out
    assert "etcd upgrade batch 1/3: health gate FAILED on %s" % first in out, out
    assert "auto_revert put the last promoted version back on %s (restarted, gate passed)" % first in out, out
    verdict = verdict_rows(out)
    assert [first, "restart", "reverted"] == verdict[0][1:4] and "(1.2.0 reverted)" in " ".join(verdict[0]), verdict
    assert [v[3] for v in verdict[1:]] == ["not", "not"], verdict  # "not run": later batches untouched
    assert len(env.restarts(first)) == before[first] + 2  # the broken start, then the revert
    for h in env.hosts:
        assert env.record(h, "etcd")["version"] == "1.1.0" and env.flags(h) == "--snapshot-count 5000", h
        assert env.healthy(h)
    for h in others:
        assert len(env.restarts(h)) == before[h]
    record = env.record(first, "etcd")
    assert record["reverted_from"] == "1.2.0", json.dumps(record)


def test_05_canary_rolls_out_to_one_member_and_the_rest_waits_for_maand_promote(env):
    first, others = env.hosts[0], env.hosts[1:]
    env.set_job("1.3.0", "--snapshot-count 6000", canary=1)
    rc, out = env.deploy()
    print(out)
    assert "etcd canary batch 1/1: health gate passed on %s" % first in out, out
    for h in others:
        assert re.search(r"etcd +%s +hold +canary: waits for -e maand_promote=etcd" % re.escape(h), out), out
    assert "deploy done: 1 restarted, 2 held" in out, out
    assert env.record(first, "etcd")["version"] == "1.3.0"
    assert [env.record(h, "etcd")["version"] for h in others] == ["1.1.0", "1.1.0"]
    rc, out = env.deploy("-e", "maand_promote=etcd")
    print(out)
    assert "deploy done: 2 restarted, 1 unchanged" in out, out
    for h in env.hosts:
        assert env.record(h, "etcd")["version"] == "1.3.0" and env.flags(h) == "--snapshot-count 6000" and env.healthy(h)

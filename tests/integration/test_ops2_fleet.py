"""maand.core.run_command and maand.core.gc on a real SSH fleet (3 workers).

run_command: output per worker with BUCKET_ID and WORKER_IP in /opt/worker/<bucket_id>, workers chosen
by maand_workers / maand_labels (unknown names refused), a failing command and an unreachable worker
fail the run naming the worker. gc: jobs api (everywhere), web (workers labelled web) and job2 are
deployed; then api is disabled on one worker, job2 is removed and web moves off one worker; after
build + deploy, `gc --check --diff` lists exactly those leftovers and deletes nothing, `gc` deletes them
(their data/ too) and the data/ of active and disabled allocations is intact; gc while a deploy holds
the lock is refused, naming the holder. The steps share one bucket and run in file order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import make_bucket, manifest

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


class Env(deploy_env.Env):
    def run(self, cmd, *args, check=True):
        return self.play("run_command", "-e", json.dumps({"maand_cmd": cmd}), *args, check=check)


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("ops2") / "bucket", fleet.state_dir, n_jobs=3, labels="worker,web")
    web = bucket / "workspace" / "jobs" / "web" / "manifest.json"
    web.write_text(manifest("1.0.0", selectors=["web"], restart_policy="reload", restart_globs=["conf/*.conf"]))
    return Env(fleet, bucket)


def blocks(out):
    """{host: [lines]} of the run_command report."""
    found, current = {}, None
    for line in out.splitlines():
        line = line.strip()
        match = re.match(r"^=== (\S+) \((.*)\) ===$", line)
        if match:
            current = match.group(1)
            found[current] = [match.group(2)]
        elif current and line.startswith("run_command:"):
            current = None
        elif current:
            found[current].append(line)
    return found


def test_01_deploy_then_run_command_everywhere(env):
    env.play("build")
    env.play("deploy")
    for h in env.hosts:
        for job in ("api", "web", "job2"):
            (env.job(h, job) / "data").mkdir(exist_ok=True)
            (env.job(h, job) / "data" / "keep.me").write_text("%s@%s" % (job, h))
    rc, out = env.run('echo "B=$BUCKET_ID W=$WORKER_IP D=$(pwd)"; ls jobs; echo warn >&2')
    assert rc == 0
    got = blocks(out)
    assert sorted(got) == sorted(env.hosts), out
    for h in env.hosts:
        assert got[h][0] == "exit 0"
        assert "B=%s W=%s D=/opt/worker/%s" % (env.bucket_id, h, env.bucket_id) in got[h], out
        assert {"api", "web", "job2", "--- stderr ---", "warn"} <= set(got[h]), got[h]
    assert "run_command: ok on 3 of 3 worker(s)" in out


def test_02_choosing_workers(env):
    h0, h1, h2 = env.hosts
    rc, out = env.run("hostname", "-e", "maand_workers=%s,%s" % (h2, h0))
    assert sorted(blocks(out)) == sorted([h0, h2]), out
    rc, out = env.run("hostname", "-e", "maand_labels=web", "--limit", h1)
    assert list(blocks(out)) == [h1], out
    bad = h0[:-1] + ("9" if h0[-1] != "9" else "8")
    rc, out = env.run("touch /tmp/should-not-run", "-e", "maand_workers=%s" % bad, "-e", "maand_labels=wbe", check=False)
    assert rc != 0
    flat = " ".join(out.split())
    assert "unknown worker %s (did you mean" % bad in flat and 'no worker has the label wbe (did you mean "web"?)' in flat
    assert not blocks(out)
    rc, out = env.play("run_command", check=False)
    assert rc != 0 and "maand_cmd='uptime'" in out, out
    rc, out = env.play("run_command", "-e", "maand_cmd=touch /tmp/x", check=False)  # split by Ansible at the space
    assert rc != 0 and "would be only 'touch'; nothing was run" in " ".join(out.split()), out
    rc, out = env.run("true", "-e", "maand_worker=%s" % h0, check=False)  # a typo of maand_workers
    assert rc != 0 and 'did you mean "maand_workers"?' in " ".join(out.split()), out


def test_03_a_failing_command_fails_the_run_naming_the_worker(env):
    h0, h1, h2 = env.hosts
    rc, out = env.run('echo on $WORKER_IP; test "$WORKER_IP" != "%s" || { echo broken >&2; exit 3; }' % h1, check=False)
    assert rc != 0
    got = blocks(out)
    assert got[h1][0] == "exit 3" and "broken" in got[h1], got
    assert got[h0][0] == got[h2][0] == "exit 0"
    assert "worker %s: `" % h1 in out and "exited 3" in out
    assert "run_command: ok on 2 of 3 worker(s)" in out


def test_04_an_unreachable_worker_is_named_with_a_fix(env):
    h0, h1, h2 = env.hosts
    env.fleet.stop_host(h2)  # every process in its namespace, sshd included
    try:
        rc, out = env.run("echo alive", check=False)  # the whole output (a raised failure keeps only its tail)
    finally:
        env.fleet.start_host(h2)
    assert rc != 0
    got = blocks(out)
    assert h0 in got and h2 in got, out
    assert got[h0][:2] == ["exit 0", "alive"] and got[h2][0] == "unreachable", got
    flat = " ".join(out.split())
    assert "worker %s is unreachable" % h2 in flat and "fix: check that it is up and that SSH works" in flat, out


def test_05_disable_remove_and_move_then_gc_check_lists_exactly_the_leftovers(env):
    h0, h1, h2 = env.hosts
    with _store.KVStore.edit(str(env.bucket)) as store:
        store.put("vars/job/job2", "note", "from a hook")
    (env.bucket / "workspace" / "disabled.json").write_text(json.dumps({"jobs": {"api": {"allocations": [h0]}}}))
    shutil.rmtree(env.bucket / "workspace" / "jobs" / "job2")
    workers = json.loads((env.bucket / "workspace" / "workers.json").read_text())
    for worker in workers:
        if worker["host"] == h2:
            worker["labels"] = ["worker"]
    (env.bucket / "workspace" / "workers.json").write_text(json.dumps(workers, indent=2))
    env.play("build")
    env.play("deploy")
    for h in env.hosts:  # the deploy kept the removed allocations' data/ and logs/
        assert (env.job(h, "job2") / "data" / "keep.me").exists()
        assert sorted(p.name for p in env.job(h, "job2").iterdir()) == ["data", "logs"]
    assert (env.job(h2, "web") / "data" / "keep.me").exists()
    assert (env.job(h0, "api") / "Makefile").exists()  # disabled: stopped, files kept

    rc, out = env.play("gc", "--check", "--diff")
    assert rc == 0, out
    bid = env.bucket_id
    per_worker, host = [], None
    for line in out.splitlines():
        match = re.match(r"^\s*worker (\S+):$", line)
        host = match.group(1) if match else host
        match = re.match(r"^\s*delete /opt/worker/%s/jobs/(\S+) \(" % bid, line)
        if match:
            per_worker.append((host, match.group(1)))
    assert sorted(per_worker) == sorted([(h0, "job2"), (h1, "job2"), (h2, "job2"), (h2, "web")]), out
    assert len(re.findall(r"delete /opt/worker/", out)) == 4, out
    spaces = set(re.findall(r"kv: delete namespace (\S+) ", out))
    assert {"vars/job/job2", "maand/job/job2", "maand/job/web/worker/%s" % h2} <= spaces, out
    assert not [ns for ns in spaces if "api" in ns or ns in ("maand/job/web", "vars/job/web")], spaces
    for h in env.hosts:  # nothing was deleted
        assert (env.job(h, "job2") / "data" / "keep.me").exists()
    assert (env.job(h2, "web") / "data" / "keep.me").exists()
    store = _store.KVStore.load(str(env.bucket))
    # the deploy that cleaned job2's last allocation already deleted its user keys (as maand's deploy
    # purges a job's namespaces); gc deletes what is left of the namespace (tombstones, history)
    assert store.get("vars/job/job2", "note") is None and "vars/job/job2" in store.namespaces
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_06_gc_deletes_them_and_keeps_active_and_disabled_data(env):
    h0, h1, h2 = env.hosts
    rc, out = env.play("gc")
    assert "gc done" in out
    for h in env.hosts:
        assert not env.job(h, "job2").exists()
        assert (env.job(h, "api") / "data" / "keep.me").read_text() == "api@%s" % h  # h0: disabled
    assert not env.job(h2, "web").exists()
    for h in (h0, h1):
        assert (env.job(h, "web") / "data" / "keep.me").read_text() == "web@%s" % h
    store = _store.KVStore.load(str(env.bucket))
    assert "vars/job/job2" not in store.namespaces and "maand/job/job2" not in store.namespaces
    assert "maand/job/web/worker/%s" % h2 not in store.namespaces
    assert "maand/job/api/worker/%s" % h0 in store.namespaces  # the disabled allocation's namespace stays
    assert {a["state"] for a in env.catalog()["allocations"] if a["job"] == "api" and a["worker"] == h0} == {"disabled"}
    rc, out = env.play("gc", "--check", "--diff")
    assert "nothing to collect" in out, out
    rc, out = env.play("deploy")
    assert "no changes required" in out, out
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_07_gc_is_refused_while_a_deploy_holds_the_lock(env):
    h0 = env.hosts[0]
    env.fleet.ssh(h0, "mkdir -p /opt/worker/%s/jobs/stray/data" % env.bucket_id)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        lock = {"pid": holder.pid, "start": _locks.process_start(holder.pid), "host": socket.gethostname(),
                "started": "2026-11-26T04:00:00+0000"}
        (env.bucket / "data" / "deploy.lock").write_text(json.dumps(lock))
        rc, out = env.play("gc", check=False)
        assert rc != 0
        flat = " ".join(out.split())
        assert "another deploy holds data/deploy.lock (pid %d on %s" % (holder.pid, socket.gethostname()) in flat, out
        assert "wait for it to finish" in flat
        assert env.job(h0, "stray").exists()
        assert json.loads((env.bucket / "data" / "deploy.lock").read_text())["pid"] == holder.pid  # not released
    finally:
        os.kill(holder.pid, 9)
        holder.wait()
    rc, out = env.play("gc")  # the holder is gone: its lock is stale, and gc goes ahead
    assert not env.job(h0, "stray").exists(), out
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_08_gc_faults_are_named_and_release_the_lock(env):
    h0, h1, h2 = env.hosts
    rc, out = env.play("gc", "-e", "maand_retain_days=week", check=False)
    assert rc != 0 and "maand_retain_days 'week' is not a number of days" in out, out
    assert not (env.bucket / "data" / "deploy.lock").exists()
    env.fleet.ssh(h0, "mkdir -p /opt/worker/%s/jobs/stray2" % env.bucket_id)
    env.fleet.stop_host(h1)
    try:
        rc, out = env.play("gc", check=False)
    finally:
        env.fleet.start_host(h1)
    assert rc != 0
    flat = " ".join(out.split())
    assert "worker %s could not be read" % h1 in flat and "fix: check that it is up and reachable over SSH" in flat, out
    assert not env.job(h0, "stray2").exists()  # the reachable workers were collected
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_09_gc_leaves_removed_allocations_a_deploy_has_not_stopped_yet(env):
    h0, h1, h2 = env.hosts
    shutil.rmtree(env.bucket / "workspace" / "jobs" / "web")
    env.play("build")  # web@h0 and web@h1 are now removed in the catalog, still running on the workers
    assert {a["state"] for a in env.catalog()["allocations"] if a["job"] == "web"} == {"removed"}
    rc, out = env.play("gc")
    flat = " ".join(out.split())
    for h in (h0, h1):
        assert "web on %s: the worker still holds a deploy record of it" % h in flat, out
        assert (env.job(h, "web") / "data" / "keep.me").exists() and (env.job(h, "web") / "Makefile").exists()
    assert "/jobs/web" not in out
    assert "maand/job/web" not in " ".join(re.findall(r"kv: deleted namespace (\S+) ", out)), out
    assert len([a for a in env.catalog()["allocations"] if a["job"] == "web"]) == 2
    env.play("deploy")  # stops and removes them, keeping data/ and logs/
    for h in (h0, h1):
        assert sorted(p.name for p in env.job(h, "web").iterdir()) == ["data", "logs"]
    rc, out = env.play("gc")
    for h in (h0, h1):
        assert not env.job(h, "web").exists(), out
    store = _store.KVStore.load(str(env.bucket))
    assert not [ns for ns in store.namespaces if "/web" in ns], sorted(store.namespaces)

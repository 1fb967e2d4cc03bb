"""End to end: build -> deploy -> change -> deploy -> disable -> remove -> deploy, on a real SSH fleet.

The steps share one bucket and one 4-host fleet and run in file order; each step checks files on
the workers, which Makefile targets ran (the test jobs append to logs/events.log), that data/ and
logs/ survive, idempotence (a second deploy reports changed=0 everywhere) and the plan output.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import make_bucket
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(4)
    bucket = make_bucket(tmp_path_factory.mktemp("e2e") / "bucket", fleet.state_dir, n_jobs=3, health=True)
    return Env(fleet, bucket)


def test_01_check_mode_plans_and_changes_nothing(env):
    env.build()
    rc, out = env.deploy("--check", "--diff")
    assert rc == 0
    assert "changes required" in out
    for h in env.hosts:
        assert re.search(r"api\s+%s\s+start\s+new allocation" % re.escape(h), out), out
        assert not env.root(h).exists()
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_02_first_deploy_starts_everything(env):
    rc, out = env.deploy()
    assert "health gate passed: api" in out
    for h in env.hosts:
        assert json.loads((env.root(h) / "worker.json").read_text())["worker"] == h
        jobs = json.loads((env.root(h) / "jobs.json").read_text())  # maand's list (issue 13)
        assert [j["job"] for j in jobs] == ["api", "job2", "web"]
        for job in ("api", "job2", "web"):
            assert env.events(h, job) == ["start 0.0.0 1.0.0"]
            rec = env.record(h, job)
            assert rec["running"] and rec["version"] == "1.0.0" and "Makefile" in rec["files"]
        assert (env.job(h, "web") / "static" / "index.html").read_text() == "<h1>v1</h1>\n"
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_03_second_deploy_changes_nothing(env):
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out
    assert "no changes required" in out
    for h in env.hosts:
        assert env.events(h, "api") == ["start 0.0.0 1.0.0"]


def test_04_changes_roll_out_per_policy_and_keep_runtime_dirs(env):
    h0 = env.hosts[0]
    # worker-owned runtime files inside a deployed job: rsync must neither overwrite nor delete them
    for sub in ("data", "logs", "bin"):
        d = env.job(h0, "web") / sub
        d.mkdir(exist_ok=True)
        (d / "keep.me").write_text(sub)
    web = env.bucket / "workspace" / "jobs" / "web"
    (web / "static" / "index.html").write_text("<h1>v2</h1>\n")          # no restart_glob -> reload
    api = env.bucket / "workspace" / "jobs" / "api"
    manifest = json.loads((api / "manifest.json").read_text())
    manifest["version"] = "1.1.0"                                        # always -> restart, batches of 1
    (api / "manifest.json").write_text(json.dumps(manifest))
    env.build()
    rc, out = env.deploy("--check", "--diff")
    assert re.search(r"web\s+\S+\s+reload\s+content changed: static/index.html; no restart_globs matched", out), out
    assert re.search(r"api\s+\S+\s+restart\s+content changed: manifest.json; version 1.0.0 -> 1.1.0", out), out
    assert "api upgrade batch 4/4" in out
    rc, out = env.deploy()
    assert out.count("health gate passed: api") == 4
    for h in env.hosts:
        assert env.events(h, "web")[-1] == "reload 1.0.0 1.0.0"
        assert env.events(h, "api")[-1] == "restart 1.0.0 1.1.0"
        assert env.events(h, "job2") == ["start 0.0.0 1.0.0"]
        assert env.record(h, "api")["version"] == "1.1.0"
        assert (env.job(h, "web") / "static" / "index.html").read_text() == "<h1>v2</h1>\n"
    for sub in ("data", "logs", "bin"):
        assert (env.job(h0, "web") / sub / "keep.me").read_text() == sub
    assert (env.job(h0, "web") / "data" / "start.count").read_text().strip() == "1"
    # a restart_glob match restarts
    (web / "conf" / "site.conf").write_text("listen=81\n")
    env.build()
    rc, out = env.deploy()
    assert "restart_globs matched: conf/site.conf" in out
    for h in env.hosts:
        assert env.events(h, "web")[-1] == "restart 1.0.0 1.0.0"
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out


def test_05_failing_target_reports_its_output_and_resumes(env):
    job2 = env.bucket / "workspace" / "jobs" / "job2"
    good = (job2 / "Makefile").read_text()
    (job2 / "Makefile").write_text(good.replace("restart:\n", "restart:\n\t@echo boom-from-restart; exit 3\n", 1))
    env.build()
    rc, out = env.deploy(check=False)
    assert rc != 0
    assert "make restart failed" in out and "boom-from-restart" in out
    # max_concurrent_upgrades 1: the first batch failed, the rest of job2 was not touched or promoted
    for h in env.hosts:
        assert env.events(h, "job2") == ["start 0.0.0 1.0.0"]
    hashes = {env.record(h, "job2")["hash"] for h in env.hosts}
    assert len(hashes) == 1
    (job2 / "Makefile").write_text(good + "# fixed\n")
    env.build()
    rc, out = env.deploy()
    for h in env.hosts:
        assert env.events(h, "job2") == ["start 0.0.0 1.0.0", "restart 1.0.0 1.0.0"]
        assert env.record(h, "job2")["hash"] not in hashes
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out


def test_06_disable_stops_and_reenable_starts(env):
    h1 = env.hosts[1]
    disabled = env.bucket / "workspace" / "disabled.json"
    disabled.write_text(json.dumps({"jobs": {"job2": {"allocations": [h1]}}}))
    env.build()
    rc, out = env.deploy()
    assert re.search(r"job2\s+%s\s+stop\s+disabled \(was running\)" % re.escape(h1), out), out
    assert env.events(h1, "job2")[-1].startswith("stop ")
    assert (env.job(h1, "job2") / "Makefile").exists() and (env.job(h1, "job2") / "data" / "status").read_text() == "stopped\n"
    assert env.record(h1, "job2")["running"] is False
    assert json.loads((env.root(h1) / "jobs.json").read_text())[1] == {
        "alloc_id": env.record(h1, "job2")["alloc_id"], "disabled": 1, "job": "job2", "version": "1.0.0"}
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out
    disabled.write_text("{}")
    env.build()
    rc, out = env.deploy()
    assert env.events(h1, "job2")[-1] == "start 1.0.0 1.0.0"
    assert env.record(h1, "job2")["running"] is True


def test_07_remove_job_and_worker_keeps_data_and_logs(env):
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    h3 = env.hosts[3]
    store = _store.KVStore.load(str(env.bucket))  # what a hook of job2 would have written
    store.put("vars/job/job2", "cluster_initialized", "true")
    store.put("secrets/job/job2", "root_token", "t0k3n-job2")
    store.put("vars/job/api", "kept", "yes")
    store.save()
    shutil.rmtree(env.bucket / "workspace" / "jobs" / "job2")
    workers = json.loads((env.bucket / "workspace" / "workers.json").read_text())
    (env.bucket / "workspace" / "workers.json").write_text(json.dumps([w for w in workers if w["host"] != h3]))
    env.build()
    kv = _kv_build.read_kv(str(env.bucket), reveal_secrets=True)  # removed, not cleaned up yet: kept
    assert kv["vars/job/job2"] == {"cluster_initialized": "true"} and kv["secrets/job/job2"] == {"root_token": "t0k3n-job2"}
    rc, out = env.deploy("--check", "--diff")
    assert re.search(r"job2\s+\S+\s+remove\s+job left the workspace", out), out
    assert re.search(r"\*\s+%s\s+purge" % re.escape(h3), out), out
    rc, out = env.deploy()
    for h in env.hosts[:3]:
        jd = env.job(h, "job2")
        assert env.events(h, "job2")[-1].startswith("stop ")
        assert sorted(p.name for p in jd.iterdir()) == ["data", "logs"]
        assert env.record(h, "job2") is None
        assert (env.job(h, "api") / "Makefile").exists()
    root3 = env.root(h3)
    assert sorted(p.name for p in root3.iterdir()) == ["jobs"]
    for job in ("api", "job2", "web"):
        assert sorted(p.name for p in (root3 / "jobs" / job).iterdir()) == ["data", "logs"]
        assert (root3 / "jobs" / job / "logs" / "events.log").read_text().splitlines()[-1].startswith("stop ")
    cat = env.catalog()
    assert all(a["state"] != "removed" for a in cat["allocations"]), cat["allocations"]
    assert h3 not in [w["host"] for w in cat["workers"]]
    assert "job2" not in [j["name"] for j in cat["jobs"]]
    kv = _kv_build.read_kv(str(env.bucket), reveal_secrets=True)  # cleaned up and out of the catalog: tombstoned
    assert "vars/job/job2" not in kv and "secrets/job/job2" not in kv and kv["vars/job/api"]["kept"] == "yes"
    assert "KV: 2 key(s) of removed job(s) job2 deleted" in out, out
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out


def test_08_unreachable_worker_fails_only_its_allocations(env):
    h0, h1, h2 = env.hosts[:3]
    web = env.bucket / "workspace" / "jobs" / "web"
    (web / "static" / "index.html").write_text("<h1>v3</h1>\n")
    env.build()
    env.fleet.stop_host(h1)
    try:
        rc, out = env.deploy(check=False)
        assert rc != 0
        assert "web@%s not deployed: worker unreachable" % h1 in out
        assert "api@%s not deployed: worker unreachable" % h1 in out
        for h in (h0, h2):
            assert (env.job(h, "web") / "static" / "index.html").read_text() == "<h1>v3</h1>\n"
        assert (env.job(h1, "web") / "static" / "index.html").read_text() == "<h1>v2</h1>\n"
    finally:
        env.fleet.start_host(h1)
    before_h0 = env.events(h0, "web")
    rc, out = env.deploy()
    assert (env.job(h1, "web") / "static" / "index.html").read_text() == "<h1>v3</h1>\n"
    assert env.events(h1, "web")[-1] == "reload 1.0.0 1.0.0"
    assert env.events(h0, "web") == before_h0  # only the retried allocations ran (h0 just gets worker.json)
    assert re.search(r"web\s+%s\s+skip" % re.escape(h0), out) or "web              (3 workers)" not in out


def test_09_deploy_lock_refuses_while_held_and_stale_lock_is_taken_over(env):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        sys.path.insert(0, str(REPO / ".collections"))
        from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
        web = env.bucket / "workspace" / "jobs" / "web"
        (web / "static" / "index.html").write_text("<h1>v4</h1>\n")
        env.build()
        assert _locks.acquire(str(env.bucket), holder.pid)[0]
        rc, out = env.play("build", check=False)  # a writing build beside a running deploy is refused (N10)
        assert rc != 0 and "build refused: a deploy of this bucket is running" in out and "pid %d" % holder.pid in out
        rc, out = env.deploy(check=False)
        assert rc != 0 and "another deploy holds data/deploy.lock" in out and "pid %d" % holder.pid in out
        assert (env.job(env.hosts[0], "web") / "static" / "index.html").read_text() == "<h1>v3</h1>\n"
    finally:
        holder.kill()
        holder.wait()
    rc, out = env.deploy()  # the holder is dead: stale lock taken over
    assert (env.job(env.hosts[0], "web") / "static" / "index.html").read_text() == "<h1>v4</h1>\n"
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_10_options_jobs_force_sync_only_and_limit(env):
    h0, h1 = env.hosts[:2]
    before_h1 = env.events(h1, "web")
    rc, out = env.deploy("-e", "maand_jobs=web", "-e", "maand_force=true", "--limit", h0)
    assert env.events(h0, "web")[-1] == "reload 1.0.0 1.0.0"  # forced, reload policy
    assert env.events(h1, "web") == before_h1  # --limit
    assert env.events(h0, "api")[-1] == "restart 1.0.0 1.1.0"  # untouched by the web-only run
    rc, out = env.deploy("-e", "maand_jobs=nope", check=False)
    assert rc != 0 and "unknown job(s) nope" in out
    web = env.bucket / "workspace" / "jobs" / "web"
    (web / "static" / "index.html").write_text("<h1>v5</h1>\n")
    env.build()
    before = env.events(h0, "web")
    rc, out = env.deploy("-e", "maand_sync_only=true")
    assert env.events(h0, "web") == before  # no lifecycle
    assert (env.job(h0, "web") / "static" / "index.html").read_text() == "<h1>v5</h1>\n"
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out


def test_11_job_playbook_runs_targets_on_active_allocations(env):
    h0, h1 = env.hosts[:2]
    before_h0 = env.events(h0, "web")
    rc, out = env.play("job", "-e", "maand_job=web", "-e", "maand_target=restart", "--limit", h1)
    assert env.events(h1, "web")[-1] == "restart 1.0.0 1.0.0"
    assert env.events(h0, "web") == before_h0
    rc, out = env.play("job", "-e", "maand_job=web", "-e", "maand_target=status")
    assert "running" in out
    rc, out = env.play("job", "-e", "maand_job=nope", "-e", "maand_target=status", check=False)
    assert rc != 0 and "nope" in out


def test_12_worker_holding_another_bucket_id_is_refused_until_restored_or_adopted(env):
    # a lost data/catalog.json rebuilt with a new bucket_id: the workers still hold the old tree
    old_id = env.bucket_id
    new_id = "22222222-2222-4222-8222-222222222222"
    path = env.bucket / "data" / "catalog.json"
    cat = json.loads(path.read_text())
    path.write_text(json.dumps(dict(cat, bucket_id=new_id), indent=2))
    rc, out = env.deploy(check=False)
    assert rc != 0 and old_id in out and new_id in out
    assert "maand_adopt_bucket_id=%s" % old_id in out and "Restore the data/catalog.json" in out
    for h in env.hosts[:3]:
        assert not (Path(env.fleet.host(h)["opt_dir"]) / "worker" / new_id).exists()  # nothing started twice
    rc, out = env.deploy("-e", "maand_adopt_bucket_id=%s" % old_id)
    assert env.bucket_id == old_id
    assert "no changes required" in out


def test_13_stale_catalog_is_refused_by_the_plan_even_with_a_preview_inventory(env):
    # preview: true makes the inventory build in memory (no catalog check); the plan still compares the
    # workspace with the catalog's input fingerprint and refuses before any worker is touched
    maand_yml = env.bucket / "maand.yml"
    original = maand_yml.read_text()
    conf = env.bucket / "workspace" / "jobs" / "web" / "static" / "index.html"
    before = conf.read_text()
    try:
        maand_yml.write_text(original + "preview: true\n")
        conf.write_text("edited after the build\n")
        rc, out = env.deploy(check=False)
        assert rc != 0, out
        assert "ErrStaleCatalog" in out and "workspace/jobs/web/ changed" in out, out
        for h in env.hosts[:3]:
            assert (env.job(h, "web") / "static" / "index.html").read_text() == before
        assert not (env.bucket / "data" / "deploy.lock").exists()
    finally:
        conf.write_text(before)
        maand_yml.write_text(original)
    rc, out = env.deploy()
    assert "no changes required" in out

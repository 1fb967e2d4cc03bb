"""maand.core.gc reaches departed workers, on a real SSH fleet of 2 workers (issue 23 item 4).

api and web are deployed to both workers; the second leaves workers.json; build keeps it in the
catalog's departed list, and the deploy that stops its jobs keeps their data/ and logs/ (only an
explicit gc deletes them) and drops its workers row. `gc --check --diff` lists its whole
/opt/worker/<bucket_id> and deletes nothing; gc while it is down fails, naming it, and keeps the row;
gc once it is up deletes the folder and drops the row, and the first worker's data/ is intact. Then
a bucket folder left on it is reached again with -e maand_departed=<host>. The steps share one bucket
and run in file order.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import make_bucket

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = make_bucket(tmp_path_factory.mktemp("gcdepart") / "bucket", fleet.state_dir, n_jobs=2)
    return deploy_env.Env(fleet, bucket)


def departed(env):
    return [d["host"] for d in env.catalog().get("departed", [])]


def items(out, title):
    """The item lines ("delete ..." / "deleted ...") of the gc block that starts with title (its lines are indented)."""
    block = itertools.takewhile(lambda line: line.startswith("  "), out.split(title, 1)[1].splitlines()[1:])
    return [line for line in block if re.match(r"\s+(?:catalog: |kv: )?deleted? ", line)]


def test_01_a_worker_leaves_and_the_deploy_keeps_its_data_and_logs(env):
    h0, h1 = env.hosts
    env.play("build")
    env.play("deploy")
    for h in env.hosts:
        for job in ("api", "web"):
            (env.job(h, job) / "data" / "keep.me").write_text("%s@%s" % (job, h))
    workers = json.loads((env.bucket / "workspace" / "workers.json").read_text())
    (env.bucket / "workspace" / "workers.json").write_text(json.dumps([w for w in workers if w["host"] != h1]))
    rc, out = env.play("build")
    assert "+ departed worker %s" % h1 in out, out
    assert departed(env) == [h1]
    env.play("deploy")
    for job in ("api", "web"):  # stopped, files deleted, data/ and logs/ kept: only gc deletes them
        assert sorted(p.name for p in env.job(h1, job).iterdir()) == ["data", "logs"]
        assert (env.job(h1, job) / "data" / "keep.me").read_text() == "%s@%s" % (job, h1)
    cat = env.catalog()
    assert h1 not in [w["host"] for w in cat["workers"]] and departed(env) == [h1]
    assert not [a for a in cat["allocations"] if a["worker"] == h1]
    listing = json.loads(subprocess.run(["ansible-inventory", "-i", str(env.bucket / "maand.yml"), "--list"],
                                        capture_output=True, text=True, check=True, cwd=str(env.cwd)).stdout)
    assert listing["maand_departed_workers"]["hosts"] == [h1]
    assert h1 not in listing["maand_workers"]["hosts"]


def test_02_gc_check_lists_the_bucket_folder_and_deletes_nothing(env):
    h0, h1 = env.hosts
    rc, out = env.play("gc", "--check", "--diff")
    assert rc == 0, out
    bid = env.bucket_id
    assert re.search(r"worker %s:\n\s+delete /opt/worker/%s \(departed worker: the whole bucket folder, data/ and "
                     r"logs/ included\)" % (re.escape(h1), bid), out), out
    assert "catalog: delete departed row %s (departed worker, cleaned)" % h1 in out, out
    assert (env.job(h1, "api") / "data" / "keep.me").exists() and departed(env) == [h1]
    assert len(re.findall(r"delete /opt/worker/", out)) == 1 and "worker %s:" % h0 not in out, out
    planned = len(items(out, "gc plan (check mode: nothing is deleted), bucket %s:" % bid))
    assert planned >= 2 and "check mode: nothing was deleted (%d item(s) would be)" % planned in out, out


def test_03_an_unreachable_departed_worker_fails_the_run_and_keeps_its_row(env):
    h0, h1 = env.hosts
    env.fleet.stop_host(h1)
    try:
        rc, out = env.play("gc", check=False)
    finally:
        env.fleet.start_host(h1)
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "departed worker %s could not be read" % h1 in flat and "-e maand_departed_forget=%s" % h1 in flat, out
    assert departed(env) == [h1] and (env.job(h1, "api") / "data" / "keep.me").exists()
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_04_gc_deletes_the_bucket_folder_and_drops_the_row(env):
    h0, h1 = env.hosts
    rc, out = env.play("gc")
    assert "gc done" in out and "deleted /opt/worker/%s (departed worker" % env.bucket_id in out, out
    done = len(items(out, "gc done, bucket %s:" % env.bucket_id))
    assert done >= 2 and "gc: %d item(s) deleted" % done in out, out  # the summary of a run that succeeded
    assert not env.root(h1).exists(), out
    assert "departed" not in env.catalog()
    for job in ("api", "web"):
        assert (env.job(h0, job) / "data" / "keep.me").read_text() == "%s@%s" % (job, h0)
    rc, out = env.play("gc", "--check", "--diff")
    assert "nothing to collect" in out and "check mode: nothing was deleted (0 item(s) would be)" in out, out
    rc, out = env.play("deploy")
    assert "no changes required" in out, out


def test_05_a_departed_worker_named_with_maand_departed_is_reached(env):
    h0, h1 = env.hosts
    env.fleet.ssh(h1, "mkdir -p /opt/worker/%s/jobs/old/data && echo x > /opt/worker/%s/jobs/old/data/f"
                  % (env.bucket_id, env.bucket_id))
    rc, out = env.play("gc", "-e", "maand_departed=%s" % h0, check=False)
    assert rc != 0 and "maand_departed: %s is a worker of workspace/workers.json" % h0 in " ".join(out.split()), out
    assert env.root(h1).exists()
    rc, out = env.play("gc", "-e", "maand_departed=%s" % h1)
    assert not env.root(h1).exists(), out
    assert (env.job(h0, "api") / "data" / "keep.me").exists()

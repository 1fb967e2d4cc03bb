"""Pinned plans, --diff content and rollback on a real SSH fleet (issue 14 items 3 and 4).

One bucket, one 3-host fleet, steps in file order: deploy v1; change a file and the version (v2) and
read the plan hash and the content diff from --check --diff; change again and see the deploy pinned to
the old hash refused with nothing changed on the workers; deploy v2; roll back to v1 and see every
worker run v1 again (files, recorded version) with data/ and logs/ intact; the next plan rolls forward.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.deploy.bucket import make_bucket
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

HASH = re.compile(r"plan hash: ([0-9a-f]{16}) ")


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = make_bucket(tmp_path_factory.mktemp("pin") / "bucket", fleet.state_dir, n_jobs=2, health=True,
                         port=31071)
    return Env(fleet, bucket)


def _set_api(env, conf, version):
    api = env.bucket / "workspace" / "jobs" / "api"
    (api / "conf" / "api.conf").write_text(conf)
    manifest = json.loads((api / "manifest.json").read_text())
    manifest["version"] = version
    (api / "manifest.json").write_text(json.dumps(manifest))
    env.build()


def _snapshot(env):
    """What the workers hold for api: conf, recorded version, events."""
    return {h: ((env.job(h, "api") / "conf" / "api.conf").read_text(), env.record(h, "api")["version"],
                tuple(env.events(h, "api"))) for h in env.hosts}


def test_01_deploy_v1(env):
    env.build()
    rc, out = env.deploy()
    assert "health gate passed: api" in out
    # the first promotion leaves the current tree's copy, no previous one
    for h in env.hosts:
        assert (env.root(h) / "history" / "api" / "current" / "files" / "conf" / "api.conf").read_text() == "threads=4\n"
        assert not (env.root(h) / "history" / "api" / "previous").exists()
        (env.job(h, "api") / "data" / "keep.me").write_text("data of %s" % h)


def test_02_rollback_without_a_previous_version_is_refused(env):
    before = _snapshot(env)
    rc, out = env.deploy("-e", "maand_rollback=api", check=False)
    assert rc != 0
    assert "maand_rollback: api@%s has no previous version to roll back to" % env.hosts[0] in out
    assert _snapshot(env) == before


def test_03_check_diff_prints_the_plan_hash_and_the_content_diff(env):
    _set_api(env, "threads=8\n", "1.1.0")
    rc, out = env.deploy("--check", "--diff")
    hashes = HASH.findall(out)
    assert len(set(hashes)) == 1, out
    env.pinned = hashes[0]
    rc, again = env.deploy("--check", "--diff")
    assert HASH.findall(again)[0] == env.pinned  # stable across runs
    for h in env.hosts:
        assert "--- api/conf/api.conf (%s)" % h in out, out
    assert out.count("-threads=4\n+threads=8") == 3, out
    assert re.search(r"api\s+\S+\s+restart\s+content changed: conf/api.conf, manifest.json; version 1.0.0 -> 1.1.0",
                     out), out


def test_04_a_pinned_plan_that_changed_is_refused_before_any_worker_is_touched(env):
    before = _snapshot(env)
    _set_api(env, "threads=16\n", "1.1.0")
    rc, out = env.deploy("-e", "maand_plan=%s" % env.pinned, check=False)
    assert rc != 0
    assert "not the pinned plan %s" % env.pinned in out, out
    for h in env.hosts:
        assert re.search(r"api@%s: restart hash \w+ 1\.0\.0 -> 1\.1\.0, pinned plan: restart hash \w+"
                         % re.escape(h), out), out
    assert _snapshot(env) == before
    assert not (env.bucket / "data" / "deploy.lock").exists()


def test_05_the_pinned_plan_deploys_v2(env):
    rc, out = env.deploy("--check")
    current = HASH.findall(out)[0]
    assert current != env.pinned
    rc, out = env.deploy("-e", "maand_plan=%s" % current)
    assert "plan hash matches the pinned plan %s" % current in out
    for h in env.hosts:
        assert (env.job(h, "api") / "conf" / "api.conf").read_text() == "threads=16\n"
        assert env.record(h, "api")["version"] == "1.1.0"
        assert env.events(h, "api")[-1] == "restart 1.0.0 1.1.0"
        prev = env.root(h) / "history" / "api" / "previous"
        assert (prev / "files" / "conf" / "api.conf").read_text() == "threads=4\n"


def test_06_rollback_restores_v1_on_every_worker_through_the_gate(env):
    rc, out = env.deploy("--check", "--diff", "-e", "maand_rollback=api")
    assert out.count("rollback: api 1.1.0 -> 1.0.0") == 3, out
    assert out.count("+++ api/conf/api.conf (previous)\n@@ -1 +1 @@\n-threads=16\n+threads=4\n") == 3, out
    rc, out = env.deploy("-e", "maand_rollback=api")
    assert out.count("health gate passed: api") == 3
    for h in env.hosts:
        job = env.job(h, "api")
        assert (job / "conf" / "api.conf").read_text() == "threads=4\n"
        assert json.loads((job / "manifest.json").read_text())["version"] == "1.0.0"
        rec = env.record(h, "api")
        assert rec["version"] == "1.0.0" and rec["rolled_back_from"] == "1.1.0" and rec["running"]
        assert env.events(h, "api")[-1] == "restart 1.1.0 1.0.0"
        assert (job / "data" / "keep.me").read_text() == "data of %s" % h
        assert (job / "logs" / "events.log").exists() and (job / "data" / "restart.count").read_text().strip() == "2"
        assert not (env.root(h) / "deploy" / "api.rollback").exists()
        hist = env.root(h) / "history" / "api"
        assert (hist / "previous" / "files" / "conf" / "api.conf").read_text() == "threads=16\n"
    assert env.catalog()["jobs"][0]["version"] == "1.1.0"  # the catalog is not changed


def test_07_the_next_plan_rolls_forward_again(env):
    rc, out = env.deploy("--check")
    assert out.count("roll forward after the rollback from 1.1.0") == 3, out
    rc, out = env.deploy()
    for h in env.hosts:
        assert (env.job(h, "api") / "conf" / "api.conf").read_text() == "threads=16\n"
        assert env.record(h, "api")["version"] == "1.1.0" and "rolled_back_from" not in env.record(h, "api")
    rc, out = env.deploy()
    assert set(env.changed(out).values()) == {0}, out

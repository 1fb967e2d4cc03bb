"""Two controllers, one bucket, one PostgreSQL state store (issue 24), on the real SSH fleet and a real
PostgreSQL server (tests/fleet/pg.py).

The bucket is a git repository; controllers A and B are two clones of it, each its own bucket folder
(as two people, or two AWX jobs, each with a checkout). maand.conf names the store (state_url, no
password: PGPASSWORD as libpq reads it); neither checkout has a data/catalog.json or data/kv.json.

- a hook variable written by a deploy from A is rendered by a deploy from B;
- a build from a checkout that lacks the commit the stored catalog was built from is refused;
- two deploys started at once from A and B never interleave: one refuses naming the holder, or waits
  with -e maand_lock_wait and then finds nothing to do;
- a controller killed mid-deploy leaves no lock behind, and the next deploy, from the other controller,
  resumes and converges.

The steps share the fleet, the store and the clones, and run in file order.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from tests.integration.deploy.bucket import MAKEFILE, add_job, fleet_bucket, write
from tests.integration.deploy.env import Env, race_deploys
from tests.integration.test_deploy_faults import SLOW_MAKEFILE, reap_session

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

PAINT_TPL = 'painted_by={{ getOptional "vars/job/paint" "painted_by" }}\n'
# post_deploy: after this deploy rendered its files, so only a later deploy can render what it writes
PAINT_HOOK = """\
import os
import maand

if os.environ.get("MAAND_HOOK_PAINT"):
    maand.put_job_variable("painted_by", os.environ["MAAND_HOOK_PAINT"]).raise_for_status()
"""


def git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")).stdout


class Controller(Env):
    timeout = 400

    def __init__(self, fleet, bucket, store):
        super().__init__(fleet, bucket)
        self.store = store

    def start(self, name, *args, env=None):
        full = dict(os.environ, **self.env, **(env or {}))
        return subprocess.Popen(self.cmd(name, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=str(self.cwd), start_new_session=True, env=full)

    def catalog(self):
        return json.loads(self.store.psql("SELECT body FROM maand_documents WHERE name = 'catalog'", db=self.db))

    @property
    def db(self):
        return self.url.rsplit("/", 1)[1]

    @property
    def bucket_id(self):
        return self.catalog()["bucket_id"]

    def commit(self, message):
        git(self.bucket, "add", "-A")
        git(self.bucket, "commit", "-q", "-m", message)

    def bump(self, job, text):
        (self.bucket / "workspace" / "jobs" / job / "app.txt").write_text(text)
        self.commit("bump %s" % job)

    def lock_row(self):
        return self.store.psql("SELECT host || ' ' || run_pid FROM maand_deploy_lock", db=self.db)


@pytest.fixture(scope="module")
def pair(fleet_factory, pg_server, tmp_path_factory):
    fleet = fleet_factory(2)
    root = tmp_path_factory.mktemp("state")
    url = pg_server.database()
    origin = fleet_bucket(root / "origin", fleet.state_dir)
    with open(origin / "maand.conf", "a", encoding="utf-8") as handle:
        handle.write('state_url = "%s"\n' % url)
    add_job(origin, "paint", files={"paint.txt.tpl": PAINT_TPL, "_modules/command_paint.py": PAINT_HOOK},
            commands={"command_paint": {"executed_on": ["post_deploy"]}})
    add_job(origin, "slow", files={"app.txt": "v1\n", "slow_seconds": "3\n"}, makefile=SLOW_MAKEFILE)
    add_job(origin, "plain", files={"app.txt": "plain v1\n"}, makefile=MAKEFILE)
    write(origin / ".gitignore", "data/\nsecrets/\nlogs/\n")
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "the bucket")
    key = root / "kv.key"  # what a credential injects next to MAAND_STATE_URL
    controllers = []
    for name in ("a", "b"):
        clone = root / name
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
        shutil.copytree(origin / "secrets", clone / "secrets")  # the SSH key: a machine credential's job
        ctl = Controller(fleet, clone, pg_server)
        ctl.url = url
        ctl.env = dict(pg_server.env, MAAND_KV_KEY_FILE=str(key))
        controllers.append(ctl)
    return controllers


def test_01_a_hook_variable_written_by_a_deploy_from_one_controller_is_rendered_by_a_deploy_from_the_other(pair):
    a, b = pair
    a.build()
    a.deploy(env={"MAAND_HOOK_PAINT": "controller-a"})  # hooks see MAAND_HOOK_* of the controller (allow-list)
    for host in a.hosts:  # rendered before the post_deploy hook wrote it
        assert (a.job(host, "paint") / "paint.txt").read_text() == "painted_by=\n"
    for ctl in (a, b):
        assert not (ctl.bucket / "data" / "catalog.json").exists()
        assert not (ctl.bucket / "data" / "kv.json").exists()
    rc, out = b.deploy()
    for host in b.hosts:
        assert (b.job(host, "paint") / "paint.txt").read_text() == "painted_by=controller-a\n", out
    rc, out = a.deploy()
    assert "no changes required" in out, out
    # the deploy records of both controllers are in the store: B lists A's runs and its own (maand.core.logs)
    rc, out = b.play("logs", "-e", "maand_format=json")
    runs, dummy = json.JSONDecoder().raw_decode(out[out.index("\n{\n") + 1:])
    summaries = [r["summary"] for r in runs["runs"]]
    assert [r["outcome"] for r in runs["runs"]] == ["ok"] * 3, runs
    assert summaries[0] == "6 started" and summaries[1].endswith(", 4 unchanged") and summaries[2] == "6 unchanged"
    assert not (a.bucket / "data" / "deploys").exists() and not (b.bucket / "data" / "deploys").exists()


def test_02_a_build_from_a_stale_checkout_is_refused(pair):
    a, b = pair
    a.bump("plain", "plain v2\n")
    a.build()
    generation = a.store.psql("SELECT generation FROM maand_documents WHERE name = 'catalog'", db=a.db)
    written_at = a.store.psql("SELECT to_char(written_at, 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM maand_documents "
                              "WHERE name = 'catalog'", db=a.db)
    head = git(a.bucket, "rev-parse", "HEAD").strip()
    rc, out = b.play("build", check=False)
    flat = " ".join(out.split())
    assert rc != 0, out
    assert "ErrStaleCheckout" in flat and "stale checkout" in flat, out
    assert "commit %s (update_seq %s, written at %s" % (head[:12], generation, written_at) in flat, out
    assert "git pull" in flat, out
    assert a.store.psql("SELECT generation FROM maand_documents WHERE name = 'catalog'", db=a.db) == generation
    git(b.bucket, "pull", "-q", str(a.bucket), "main")
    rc, out = b.build()
    b.deploy()
    for host in b.hosts:
        assert (b.job(host, "plain") / "app.txt").read_text() == "plain v2\n"


def _restarts(ctl, job):
    return {h: sum(e.startswith("restart ") for e in ctl.events(h, job)) for h in ctl.hosts}


def test_03_two_deploys_at_once_from_two_controllers_never_interleave(pair):
    a, b = pair
    a.bump("slow", "v2\n")
    git(b.bucket, "pull", "-q", str(a.bucket), "main")
    a.build()
    before = _restarts(a, "slow")
    loser = race_deploys(a, b)
    assert "another deploy holds the deploy lock in the state store" in loser, loser
    assert "ansible-playbook pid" in loser and "maand_lock_wait" in loser, loser
    assert _restarts(a, "slow") == {h: before[h] + 1 for h in a.hosts}  # once, by the winner

    # with -e maand_lock_wait the second one waits for the first, then has nothing to do
    a.bump("slow", "v3\n")
    git(b.bucket, "pull", "-q", str(a.bucket), "main")
    a.build()
    before = _restarts(a, "slow")
    first = a.start("deploy")
    deadline = time.monotonic() + 120
    while not a.lock_row() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert a.lock_row(), "the first deploy never took the lock"
    second = b.start("deploy", "-e", "maand_lock_wait=300")
    out_a, out_b = first.communicate(timeout=400)[0], second.communicate(timeout=400)[0]
    assert first.returncode == 0, out_a
    assert second.returncode == 0, out_b
    assert "no changes required" in out_b, out_b
    assert _restarts(a, "slow") == {h: before[h] + 1 for h in a.hosts}
    assert not a.lock_row()


def test_04_a_controller_killed_mid_deploy_leaves_no_lock_and_the_other_resumes(pair):
    a, b = pair
    h0, h1 = a.hosts
    (a.bucket / "workspace" / "jobs" / "slow" / "slow_seconds").write_text("6\n")
    a.bump("slow", "v4\n")
    git(b.bucket, "pull", "-q", str(a.bucket), "main")
    a.build()
    seen = len(a.events(h0, "slow"))
    proc = a.start("deploy")
    try:
        a.wait_for_event(h0, "slow", "restart-begin", seen)
        os.kill(proc.pid, signal.SIGKILL)  # the ansible-playbook process only, as an OOM killer would
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 30  # the holder follows its playbook within a poll
    while a.lock_row() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not a.lock_row()
    reap_session(proc.pid)  # the killed run's forked workers finish the task already running
    rc, out = b.deploy()
    assert "another deploy holds" not in out, out
    rc, out = b.deploy()
    assert "no changes required" in out, out
    for host in b.hosts:
        assert (b.job(host, "slow") / "app.txt").read_text() == "v4\n"
        assert b.events(host, "slow")[-1].startswith("restart "), (host, b.events(host, "slow"))

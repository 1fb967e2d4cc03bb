"""A deploy sliced as AWX slices it (issue 33), on the real SSH fleet and one real PostgreSQL state store.

Six workers; the bucket is a git repository and every slice is a job of its own, each with its own clone (as AWX
gives each job its own checkout) and its own inventory as AWX hands a slice its hosts: the inventory synced
(`ansible-inventory --list --export`), then, with the hosts sorted by name, slice k of N holds hosts[k-1::N]
(AWX's rule, awx/main/models/inventory.py get_script_data), served as a script; the groups left empty are dropped.
All slices carry the same awx_workflow_job_id and their own awx_job_id, and run at the same time.

Two jobs: `db` (max_concurrent_starts and _upgrades 2) and `web` (1 and 1, an http gate), which demands a
command of db and so rolls out in the second wave. Their Makefiles log a span per start (begin, end, wall clock)
on each worker, from which the test reads what ran at the same time across the whole fleet:

1. two slices deploy every worker; never more restarts of a job at once than its max_concurrent_upgrades across
   the slices (max_concurrent_starts on the first deploy); every db span ends before the first web span begins (waves in order across slices);
2. three slices roll out a new version of both jobs the same way;
3. a web version whose gate fails: the first batch fails (in whichever slice holds it) and no other slice
   starts web anywhere after it; every slice fails;
4. a slice SIGKILLed in the middle of a rollout and relaunched (a new awx_job_id, the same workflow): the run
   completes, every worker on the new version, no allocation restarted twice;
5. a slice that never arrives: the others end after maand_slice_wait with its workers reported not deployed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import SERVER_PY, add_job, fleet_bucket, write
from tests.integration.deploy.env import REPO
from tests.integration.test_deploy_faults import reap_session
from tests.integration.test_state_fleet import git

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

# Every start logs "begin <t> <version>" and "end <t> <version>" to logs/spans.log; a restart spans its stop too.
SPAN_MAKEFILE = """\
.PHONY: start stop restart reload status
PID := data/app.pid
RUNNING = [ -f $(PID) ] && kill -0 "$$(cat $(PID))" 2>/dev/null
define stop_it
\tif $(RUNNING); then kill "$$(cat $(PID))"; for i in $$(seq 50); do $(RUNNING) || break; sleep 0.1; done; fi; rm -f $(PID)
endef
define start_it
\tif [ "$$(cat mode)" = ok ]; then setsid nohup /usr/bin/python3 server.py $(PORT) </dev/null >>logs/app.log 2>&1 & \
echo $$! > $(PID); fi
\tsleep {hold}
endef
start:
\t@mkdir -p data logs
\t@echo "begin $$(date +%s.%N) $(NEW_VERSION)" >> logs/spans.log
\t@$(start_it)
\t@echo "end $$(date +%s.%N) $(NEW_VERSION)" >> logs/spans.log
stop:
\t@$(stop_it)
restart:
\t@mkdir -p data logs
\t@echo "begin $$(date +%s.%N) $(NEW_VERSION)" >> logs/spans.log
\t@$(stop_it)
\t@$(start_it)
\t@echo "end $$(date +%s.%N) $(NEW_VERSION)" >> logs/spans.log
reload: restart
status:
\t@if $(RUNNING); then echo running; else echo "not running"; exit 1; fi
"""
COMMAND = "print('ok')\n"
WORKFLOW = 7000  # awx_workflow_job_id of the first sliced run; each run is a new workflow job


def gate(port_var):
    return {"checks": [{"type": "http", "port": port_var, "path": "/"}], "timeout_seconds": 1,
            "wait": {"attempts": 6, "interval_seconds": 0.5}}


def set_jobs(bucket, version, web_mode="ok", hold="0.6", db_limit=2, web_limit=1):
    """db (batches of db_limit) and web (of web_limit, the second wave) at version; bench/bench_slices.py too."""
    add_job(bucket, "db", version=version, makefile=SPAN_MAKEFILE.format(hold=hold).replace("$(PORT)", "$(DB_PORT)"),
            max_concurrent_upgrades=db_limit, max_concurrent_starts=db_limit, resources={"ports": {"db_port": {}}}, health_check=gate("db_port"),
            files={"server.py": SERVER_PY, "mode": "ok\n", "_modules/command_ready.py": COMMAND},
            commands={"command_ready": {"executed_on": ["cli"]}})
    add_job(bucket, "web", version=version, makefile=SPAN_MAKEFILE.format(hold=hold).replace("$(PORT)", "$(WEB_PORT)"),
            max_concurrent_upgrades=web_limit, max_concurrent_starts=web_limit, resources={"ports": {"web_port": {}}}, health_check=gate("web_port"),
            files={"server.py": SERVER_PY, "mode": web_mode + "\n", "_modules/command_after.py": COMMAND},
            commands={"command_after": {"executed_on": ["cli"], "demands": {"job": "db", "command": "command_ready"}}})


def awx_slice(listing, k, n):
    """AWX's slice k (1-based) of n of a synced inventory: hosts sorted by name, hosts[k-1::n]; each group keeps
    its hosts of the slice, and a group left without hosts or children is dropped (as the sync drops it)."""
    hostvars = listing["_meta"]["hostvars"]
    keep = set(sorted(hostvars)[k - 1::n])
    out = {"_meta": {"hostvars": {h: v for h, v in hostvars.items() if h in keep}}}
    for name, group in listing.items():
        if name == "_meta":
            continue
        group = dict(group)
        if "hosts" in group:
            group["hosts"] = [h for h in group["hosts"] if h in keep]
            if not group["hosts"] and not group.get("children") and name != "all":
                continue
        out[name] = group
    for group in out.values():
        if isinstance(group, dict) and "children" in group:
            group["children"] = [c for c in group["children"] if c in out]
    return out


class Slice:
    """One AWX job of the sliced workflow: its own clone, its slice of the synced inventory."""

    def __init__(self, name, clone, env):
        self.name, self.clone, self.env = name, clone, env
        self.inv = clone.parent / ("%s-inventory" % name)
        self.proc = None
        self.hosts = []

    def inventory(self, k, n):
        proc = subprocess.run(["ansible-inventory", "-i", str(self.clone / "maand.yml"), "--list", "--export"],
                              capture_output=True, text=True, cwd=str(REPO), env=self.env, check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        listing = awx_slice(json.loads(proc.stdout), k, n)
        self.inv.mkdir(exist_ok=True)  # outside the checkout, as AWX keeps a job's inventory (/runner/inventory)
        (self.inv / "slice.json").write_text(json.dumps(listing))
        script = self.inv / "hosts"
        script.write_text("#!/bin/sh\nif [ \"$1\" = --host ]; then echo '{}'; else cat '%s'; fi\n"
                          % (self.inv / "slice.json"))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return sorted(listing["_meta"]["hostvars"])

    def start(self, workflow, job_id, *extra):
        cmd = ["ansible-playbook", "-i", str(self.inv / "hosts"), "maand.core.deploy",
               "-e", "awx_workflow_job_id=%s" % workflow, "-e", "awx_job_id=%s" % job_id, *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(REPO),
                                     start_new_session=True, env=self.env)
        return self.proc

    def wait(self, timeout=500):
        out = self.proc.communicate(timeout=timeout)[0]
        return self.proc.returncode, out


class Sliced:
    def __init__(self, fleet, origin, slices, store, db):
        self.fleet, self.origin, self.slices, self.store, self.db = fleet, origin, slices, store, db
        self.hosts = sorted(fleet.addresses)
        self.workflow = WORKFLOW

    def commit(self, message, version, **kw):
        set_jobs(self.origin, version, **kw)
        git(self.origin, "add", "-A")
        git(self.origin, "commit", "-q", "-m", message)
        for s in self.slices:
            git(s.clone, "pull", "-q", "--ff-only")

    def build(self):
        proc = subprocess.run(["ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % self.slices[0].clone],
                              capture_output=True, text=True, cwd=str(REPO), env=self.slices[0].env, check=False,
                              timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def catalog(self):
        return json.loads(self.store.psql("SELECT body FROM maand_documents WHERE name = 'catalog'", db=self.db))

    def spans(self, job):
        return read_spans(self.fleet, self.catalog()["bucket_id"], job)

    def record(self, host, job):
        bucket_id = self.catalog()["bucket_id"]
        path = Path(self.fleet.host(host)["opt_dir"]) / "worker" / bucket_id / "deploy" / ("%s.json" % job)
        return json.loads(path.read_text()) if path.exists() else None

    def launch(self, n):
        """A new workflow job of n slices: each slice's inventory made; the slices, not started."""
        self.workflow += 1
        for k, s in enumerate(self.slices[:n], 1):
            s.hosts = s.inventory(k, n)
        return self.slices[:n]

    def run(self, n, *extra):
        """All n slices of a new workflow job at once; [(rc, out)] in slice order."""
        for k, s in enumerate(self.launch(n), 1):
            s.start(self.workflow, "%d%02d" % (self.workflow, k), *extra)
        return [s.wait() for s in self.slices[:n]]


def read_spans(fleet, bucket_id, job):
    """[(begin, end, host, version)] of every start of job on the fleet (its logs/spans.log), in begin order;
    bench/bench_slices.py too."""
    out = []
    for host in sorted(fleet.addresses):
        path = Path(fleet.host(host)["opt_dir"]) / "worker" / bucket_id / "jobs" / job / "logs" / "spans.log"
        begin = None
        for line in path.read_text().splitlines() if path.exists() else ():
            word, when, version = line.split()
            if word == "begin":
                begin = float(when)
            else:
                out.append((begin, float(when), host, version))
    return sorted(out)


def max_overlap(spans):
    """The most spans open at one instant."""
    events = sorted([(b, 1) for b, e, h, v in spans] + [(e, -1) for b, e, h, v in spans], key=lambda x: (x[0], x[1]))
    best = cur = 0
    for dummy, delta in events:
        cur += delta
        best = max(best, cur)
    return best


@pytest.fixture(scope="module")
def sliced(fleet_factory, pg_server, tmp_path_factory):
    fleet = fleet_factory(6)
    root = tmp_path_factory.mktemp("slices")
    url = pg_server.database()
    origin = fleet_bucket(root / "origin", fleet.state_dir)
    with open(origin / "maand.conf", "a", encoding="utf-8") as handle:
        handle.write('state_url = "%s"\n' % url)
    set_jobs(origin, "1.0.0")
    write(origin / ".gitignore", "data/\nsecrets/\nlogs/\n")
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "the bucket")
    env = dict(os.environ, **pg_server.env, MAAND_KV_KEY_FILE=str(root / "kv.key"), ANSIBLE_NOCOLOR="1")
    slices = []
    for name in ("a", "b", "c", "d"):
        clone = root / name
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
        shutil.copytree(origin / "secrets", clone / "secrets")
        slices.append(Slice(name, clone, env))
    return Sliced(fleet, origin, slices, pg_server, url.rsplit("/", 1)[1])


def assert_fleet_wide(sliced, version):
    db, web = sliced.spans("db"), sliced.spans("web")
    db_new = [s for s in db if s[3] == version]
    web_new = [s for s in web if s[3] == version]
    assert sorted(s[2] for s in db_new) == sliced.hosts and sorted(s[2] for s in web_new) == sliced.hosts, (db, web)
    assert max_overlap(db_new) <= 2, db_new  # max_concurrent_upgrades of db, across the slices
    assert max_overlap(web_new) <= 1, web_new
    assert max(e for b, e, h, v in db_new) < min(b for b, e, h, v in web_new), (db_new, web_new)  # wave order
    for host in sliced.hosts:
        assert (sliced.record(host, "db") or {}).get("version") == version
        assert (sliced.record(host, "web") or {}).get("version") == version


def test_01_two_slices_deploy_every_worker_with_fleet_wide_batches_and_waves(sliced):
    sliced.build()
    outs = sliced.run(2)
    for rc, out in outs:
        assert rc == 0, out[-6000:]
    assert_fleet_wide(sliced, "1.0.0")
    # each slice worked only its own hosts: the hand's output names only its slice's workers
    hand_out = next(out for rc, out in outs if "as a hand" in out)
    assert "joined run key awx-workflow-" in hand_out, hand_out[-3000:]


def test_02_three_slices_roll_out_a_new_version_the_same_way(sliced):
    sliced.commit("v2", "2.0.0")
    sliced.build()
    for rc, out in sliced.run(3):
        assert rc == 0, out[-6000:]
    assert_fleet_wide(sliced, "2.0.0")


def test_03_a_failed_gate_in_one_slice_stops_the_job_in_every_slice(sliced):
    sliced.commit("v3 broken web", "3.0.0", web_mode="bad")
    sliced.build()
    outs = sliced.run(3)
    assert all(rc != 0 for rc, out in outs), [o[-3000:] for rc, o in outs]
    web_new = [s for s in sliced.spans("web") if s[3] == "3.0.0"]
    assert len(web_new) == 1, web_new  # the first batch only: no slice started web 3.0.0 anywhere after it
    for rc, out in outs:
        assert "web" in out and "health" in out.lower(), out[-3000:]


def test_04_a_killed_slice_relaunched_completes_the_run_without_double_restarts(sliced):
    sliced.commit("v4", "4.0.0", hold="1.5")
    sliced.build()
    a, b = sliced.launch(2)
    a.start(sliced.workflow, "%d01" % sliced.workflow)
    time.sleep(3)  # a takes the lock: the planner
    b.start(sliced.workflow, "%d02" % sliced.workflow)
    b_hosts = set(b.hosts)
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline:  # kill b once one of its db restarts is under way
        if any(h in b_hosts and v == "4.0.0" for bb, e, h, v in sliced.spans("db")):
            break
        time.sleep(0.2)
    os.killpg(b.proc.pid, signal.SIGKILL)  # the slice's controller dies (its EE pod is killed): all of it at once
    reap_session(b.proc.pid, timeout=0)
    b.proc.communicate(timeout=30)
    b.start(sliced.workflow, "%d03" % sliced.workflow)  # AWX relaunches the slice: a new job, the same workflow
    (rc_a, out_a), (rc_b, out_b) = a.wait(), b.wait()
    assert rc_a == 0 and rc_b == 0, (out_a[-5000:], out_b[-5000:])
    for job in ("db", "web"):
        starts = [h for bb, e, h, v in sliced.spans(job) if v == "4.0.0"]
        assert sorted(starts) == sliced.hosts, (job, starts)  # every worker once: nothing restarted twice
    assert_fleet_wide(sliced, "4.0.0")


def test_05_a_slice_that_never_arrives_ends_the_run_with_its_workers_not_deployed(sliced):
    sliced.commit("v5", "5.0.0", hold="0.2")
    sliced.build()
    a, b = sliced.launch(2)
    a.start(sliced.workflow, "%d01" % sliced.workflow, "-e", "maand_slice_wait=5")  # b never starts
    rc, out = a.wait()
    assert rc != 0, out[-5000:]
    assert "no slice of run key awx-workflow-%d claimed this worker" % sliced.workflow in out, out[-5000:]
    for host in b.hosts:
        assert (sliced.record(host, "db") or {}).get("version") == "4.0.0"  # not deployed
    for host in a.hosts:
        assert (sliced.record(host, "db") or {}).get("version") == "5.0.0"

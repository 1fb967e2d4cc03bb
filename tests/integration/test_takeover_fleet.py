"""Taking over a fleet maand deploys today (issue 13, item 3), on real sshd hosts: the workers hold
what maand's deploy leaves (/opt/worker/<bucket_id>/ with maand's worker.json and jobs.json, the job
tree with its certs, the job running), the bucket holds data/maand.db built from maand's own schema
SQL. The first maand.core build + deploy keeps the bucket_id and restarts nothing (no make target
runs), writes worker.json/jobs.json that maand's own worker scripts still read, and a second deploy
changes nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import fleet_bucket, write

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "tests" / "data" / "maand" / "schema_v1.sql"
BUCKET_ID = "7e0c3b1a-9d2f-4e5a-8b6c-1d2e3f4a5b6c"
MAKEFILE = """\
.PHONY: start stop restart reload
start stop restart reload:
\tmkdir -p logs
\techo "$@" >> logs/events.log
"""
# maand-sh/maand deploy/worker.py, as maand ships it to /opt/worker/<bucket_id>/bin/worker.py
MAAND_WORKER_PY = """\
import json
import sys

def main(json_file, bucket_id, worker_id, update_seq):
    try:
        with open(json_file, 'r') as file:
            data = json.load(file)
        if data.get("bucket_id") != bucket_id:
           sys.exit(1)
        if data.get("worker_id") != worker_id:
            sys.exit(2)
        if data.get("update_seq") != update_seq:
            sys.exit(3)
        sys.exit(0)
    except Exception as e:
        print(f"Error: {e}")
        sys.exit(2)

if __name__ == "__main__":
    bucket_id = sys.argv[1]
    worker_id = sys.argv[2]
    update_seq = int(sys.argv[3])
    json_file = f"/opt/worker/{bucket_id}/worker.json"
    main(json_file, bucket_id, worker_id, update_seq)
"""


class Env(deploy_env.Env):
    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.worker_ids = {h: "0b7c9a2e-1111-4a4a-9a9a-%012d" % i for i, h in enumerate(self.hosts)}

    def root(self, host):  # maand's bucket_id: the worker trees exist before the first build
        return Path(self.fleet.host(host)["opt_dir"]) / "worker" / BUCKET_ID


def _maand_db(env):
    """data/maand.db as maand leaves it after `maand build && maand deploy` (update_seq 3)."""
    from ansible_collections.maand.core.plugins.plugin_utils.placement import place as _place

    path = env.bucket / "data" / "maand.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path))
    conn.executescript(SCHEMA.read_text())
    conn.execute("INSERT INTO bucket VALUES (?, 3)", (BUCKET_ID,))
    for pos, host in enumerate(env.hosts):
        conn.execute("INSERT INTO worker (worker_id, worker_ip, available_memory_mb, available_cpu_mhz, position)"
                     " VALUES (?, ?, '4096', '2000', ?)", (env.worker_ids[host], host, pos))
        alloc = _place.alloc_id("api", host)
        conn.execute("INSERT INTO allocations VALUES (?, ?, 'api', 0, 0, 0, '1.0.0')", (alloc, host))
        conn.execute("INSERT INTO hash (namespace, key, current_hash, previous_hash, current_version)"
                     " VALUES ('api_allocation', ?, 'd41d8cd98f00b204e9800998ecf8427e', '', '1.0.0')", (alloc,))
    conn.execute("INSERT INTO key_value VALUES ('mode', 'blue', 'vars/job/api', 1, '0', '', 0)")
    for host, (crt, key) in env.leaves.items():  # maand's BuildCerts: PEMs in the allocation namespace (trimmed)
        for name, value in (("certs/tls.crt", crt), ("certs/tls.key", key)):
            conn.execute("INSERT INTO key_value VALUES (?, ?, ?, 1, '0', '', 0)",
                         (name, value, "maand/job/api/worker/%s" % host))
    conn.execute("INSERT INTO key_value VALUES ('certs/ca.crt', ?, 'maand/worker', 1, '0', '', 0)", (env.ca_pem,))
    conn.commit()
    conn.close()


def _maand_worker(env, host, api_src):
    """/opt/worker/<bucket_id>/ as maand's deploy leaves it (deploy/prepare.go, runner.py, worker.py)."""
    root = env.root(host)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "worker.py").write_text(MAAND_WORKER_PY)
    (root / "worker.json").write_text(json.dumps({
        "bucket_id": BUCKET_ID, "worker_id": env.worker_ids[host], "worker_ip": host,
        "labels": ["worker"], "update_seq": 3}, indent=3))
    (root / "jobs.json").write_text(json.dumps([{"job": "api", "disabled": 0}], indent=3))
    shutil.copytree(api_src, root / "jobs" / "api")
    certs = root / "jobs" / "api" / "certs"  # maand's updateCerts: .crt 0644, .key 0600, ca.crt
    certs.mkdir()
    crt, key = env.leaves[host]
    (certs / "tls.crt").write_text(crt)
    (certs / "tls.key").write_text(key)
    (certs / "tls.key").chmod(0o600)
    (certs / "ca.crt").write_text(env.ca_pem)
    (root / "jobs" / "api" / "logs").mkdir()
    (root / "jobs" / "api" / "logs" / "events.log").write_text("start\n")  # maand started it


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = tmp_path_factory.mktemp("takeover") / "bucket"
    fleet_bucket(bucket, fleet.state_dir, memory="4096 mb", cpu="2000 mhz",
                 conf='use_sudo = false\nssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 0\n')
    api = bucket / "workspace" / "jobs" / "api"
    write(api / "manifest.json", json.dumps({"version": "1.0.0", "selectors": ["worker"],
                                             "certs": {"tls": {"subject": {"common_name": "api.internal"}}}}))
    write(api / "Makefile", MAKEFILE)
    e = Env(fleet, bucket)
    from ansible_collections.maand.core.plugins.plugin_utils import certs as _certs

    ca = _certs.load_or_create_ca(str(bucket), BUCKET_ID)  # what `maand init` made: secrets/ca.crt, ca.key
    e.ca_pem = ca.cert_pem.strip()
    e.leaves = {}
    for host in e.hosts:
        leaf = _certs.issue_leaf(ca, "api.internal", [host], 60, False)
        e.leaves[host] = (leaf.cert_pem.strip(), leaf.key_pem.strip())
    _maand_db(e)
    for host in e.hosts:
        _maand_worker(e, host, api)
    return e


def test_01_first_build_keeps_maands_bucket_id(env):
    rc, out = env.play("build")
    assert "issued" not in out  # maand's leaves are valid: kept
    assert "taking the bucket over from maand: bucket_id %s" % BUCKET_ID in out, out
    catalog = json.loads((env.bucket / "data" / "catalog.json").read_text())
    assert catalog["bucket_id"] == BUCKET_ID
    assert {w["host"]: w["worker_id"] for w in catalog["workers"]} == env.worker_ids


def test_02_first_deploy_restarts_nothing(env):
    rc, out = env.play("deploy", "--check", "--diff")
    for host in env.hosts:
        assert re.search(r"api\s+%s\s+sync\s+taken over from maand" % re.escape(host), out), out
    rc, out = env.play("deploy")
    assert "issued" not in out
    for host in env.hosts:
        assert env.events(host, "api") == ["start"]  # no make target ran
        certs = env.root(host) / "jobs" / "api" / "certs"
        assert (certs / "tls.crt").read_text() == env.leaves[host][0]  # maand's certificate, kept
        assert (certs / "tls.key").read_text() == env.leaves[host][1]
        assert (certs / "tls.key").stat().st_mode & 0o777 == 0o600
        root = env.root(host)
        assert (root / "deploy" / "api.json").is_file()  # recorded as maand.core's now
        assert sorted(p.name for p in (Path(env.fleet.host(host)["opt_dir"]) / "worker").iterdir()
                      if not p.name.startswith(".")) == [BUCKET_ID]  # no second tree
        worker = json.loads((root / "worker.json").read_text())
        jobs = json.loads((root / "jobs.json").read_text())
        assert worker["worker_id"] == env.worker_ids[host] and worker["worker_ip"] == host
        assert worker["update_seq"] > 3  # above maand's (maand.db and the workers say 3)
        assert [(j["job"], j["disabled"]) for j in jobs] == [("api", 0)]  # maand's runner.py reads this
        # maand's own worker.py check (exit 0 = in sync), run on this host's worker.json
        code = ("import runpy, sys; ns = runpy.run_path(sys.argv[1]); "
                "ns['main'](sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))")
        check = subprocess.run([sys.executable, "-c", code, str(root / "bin" / "worker.py"), str(root / "worker.json"),
                                BUCKET_ID, env.worker_ids[host], str(worker["update_seq"])],
                               check=False, capture_output=True, text=True)
        assert check.returncode == 0, (check.returncode, check.stdout, check.stderr)


def test_03_second_deploy_changes_nothing(env):
    rc, out = env.play("deploy")
    assert "no changes required" in out, out
    assert set(int(m) for m in re.findall(r"changed=(\d+)", out)) == {0}, out
    for host in env.hosts:
        assert env.events(host, "api") == ["start"]

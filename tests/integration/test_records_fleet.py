"""Deploy records on a real SSH fleet (2 workers), read back through the playbooks: maand.core.logs (the list,
one run, the JSON form, job filters), maand.core.cat -e maand_cat=deployments (rollout states with hashes,
-e maand_active=true) and maand.core.info.

A toy bucket: `api` (an HTTP server behind a health gate, upgrades one worker at a time) and `web` (no
gate). The first deploy starts both; its record must carry the plan hash the deploy printed and, per
allocation, the tree hash each worker now holds in its own deploy record, and info the update_seq the
workers hold in worker.json. Then api's upgrade is made to fail its gate: the second record is failed,
names the gate failure, and cat deployments shows health_failed on the upgraded worker (the old hash kept,
the failed one beside it) and the other worker's upgrade as pending. The steps run in file order on one fleet.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import SERVER_MAKEFILE, SERVER_PY, add_job, fleet_bucket, write

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

PORT = 31051


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = fleet_bucket(tmp_path_factory.mktemp("records") / "bucket", fleet.state_dir)
    add_job(bucket, "api", files={"health_mode": "ok\n", "server.py": SERVER_PY},
            makefile=SERVER_MAKEFILE.format(port=PORT), max_concurrent_upgrades=1,
            resources={"ports": {"http_port": PORT}},
            health_check={"checks": [{"type": "http", "port": "http_port", "path": "/health_mode"}],
                          "timeout_seconds": 2, "wait": {"attempts": 8, "interval_seconds": 0.5}})
    add_job(bucket, "web", files={"index.html": "<h1>v1</h1>\n"})
    return deploy_env.Env(fleet, bucket)


def rows(out, header):
    """The rows (split on two spaces or more) of the table whose header line starts with `header`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    found = []
    for line in lines[start + 2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) < 3:
            break
        found.append(cells)
    return found


def test_01_a_deploy_leaves_a_record_with_the_plan_hash_and_the_workers_hashes(env):
    env.build()
    rc, out = env.deploy()
    printed = re.search(r"plan hash: ([0-9a-f]{16})", out).group(1)
    record = env.json_of("logs", "-e", "maand_run=last")
    assert record["outcome"] == "ok" and record["plan_hash"].startswith(printed), record
    assert record["user"] == "root" and record["controller"] and record["started"] <= record["finished"]
    assert record["update_seq"] == 1 and record["problems"] == []
    got = {(a["job"], a["worker"]): (a["action"], a["result"], a["hash"]) for a in record["allocations"]}
    want = {(job, h): ("start", "started", env.record(h, job)["hash"]) for job in ("api", "web") for h in env.hosts}
    assert got == want
    assert all(a["seconds"] is not None for a in record["allocations"]), record["allocations"]
    assert all(a["gate_seconds"] is not None for a in record["allocations"] if a["job"] == "api")

    rc, out = env.play("logs")
    [run] = rows(out, "RUN")
    assert run[0] == record["run_id"] and run[4] == "ok" and run[-1] == "4 started", run

    rc, out = env.play("cat", "-e", "maand_cat=deployments")
    table = {(r[0], r[1]): r for r in rows(out, "JOB")}
    for (job, host), (dummy, dummy2, digest) in want.items():
        row = table[(job, host)]
        assert row[3:8] == ["promoted", digest[:12], "-", "1.0.0", "1.0.0"] and row[8] == record["run_id"], row

    info = env.json_of("info")
    worker_seq = {json.loads((env.root(h) / "worker.json").read_text())["update_seq"] for h in env.hosts}
    assert worker_seq == {info["update_seq"]} == {1}
    assert (info["workers"], info["jobs"], info["allocations"]["active"], info["records_kept"]) == (2, 2, 4, 1)
    assert info["last_deploy"]["run_id"] == record["run_id"]


def test_02_a_failed_gate_is_recorded_and_shown_as_health_failed(env):
    before = {h: env.record(h, "api")["hash"] for h in env.hosts}
    jobs = env.bucket / "workspace" / "jobs" / "api"
    write(jobs / "health_mode", "broken\n")  # the restarted server is not started: its gate fails
    manifest = json.loads((jobs / "manifest.json").read_text())
    write(jobs / "manifest.json", json.dumps(dict(manifest, version="1.1.0")))
    env.build()
    rc, out = env.deploy(check=False)
    assert rc != 0, out

    record = env.json_of("logs", "-e", "maand_run=last", "-e", "maand_jobs=api")
    assert record["outcome"] == "failed" and any("health gate" in p for p in record["problems"]), record
    results = {a["worker"]: a for a in record["allocations"]}
    assert set(results) == set(env.hosts) and {a["job"] for a in record["allocations"]} == {"api"}
    failed = [h for h, a in results.items() if a["result"] == "gate failed"]
    assert len(failed) == 1, results  # one worker per batch: the second batch never ran
    [other] = [h for h in env.hosts if h not in failed]
    assert results[other]["result"] == "not run"

    rc, out = env.play("cat", "-e", "maand_cat=deployments", "-e", "maand_active=true", "-e", "maand_jobs=api")
    table = {r[1]: r for r in rows(out, "JOB")}
    assert set(table) == set(env.hosts)
    broken = table[failed[0]]
    assert broken[3:8] == ["health_failed", before[failed[0]][:12], results[failed[0]]["hash"][:12], "1.0.0",
                           "1.1.0"], broken
    assert table[other][3] == "pending" and table[other][5] == "-", table[other]

    rc, out = env.play("logs")
    runs = rows(out, "RUN")
    assert [(r[4], r[-1]) for r in runs] == [("ok", "4 started"), ("failed", "1 gate failed, 1 not run, 2 unchanged")]
    assert runs[1][0] == record["run_id"]
    listed = env.json_of("logs", "-e", "maand_jobs=web")  # web changed only in the first run
    assert [r["run_id"] for r in listed["runs"]] == [runs[0][0]]
    assert env.json_of("info")["last_deploy"]["outcome"] == "failed"

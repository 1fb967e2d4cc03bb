"""maand.core.logs (ops/logs.py: the deploy records as a list of runs or one run, as a table or JSON, with job and
worker filters) and maand.core.info (ops/info.py: maand info's rows from the catalog and the last record)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import record as _record, view as _view
from ansible_collections.maand.core.plugins.plugin_utils.ops import cat as _cat, info as _info, logs as _logs
from tests.unit.plugin_utils.catalog.test_kv_build import bucket

RUNS = ("20261123T110000-11", "20261123T120000-12", "20261123T130000-13")


def allocation(job, worker, action, result, **kw):
    return _record.Allocation(job=job, worker=worker, action=action, result=result, **kw)


def write_runs(root):
    """Three runs: api started on both workers; nothing changed; api's upgrade failed its gate on 10.0.0.2."""
    runs = [
        [allocation("api", h, "start", "started", hash="a" * 64, to_version="1.2.0", seconds=0.5) for h in
         ("10.0.0.1", "10.0.0.2")],
        [allocation("api", h, "skip", "unchanged", hash="a" * 64, from_version="1.2.0", to_version="1.2.0")
         for h in ("10.0.0.1", "10.0.0.2")],
        [allocation("api", "10.0.0.1", "skip", "unchanged", hash="a" * 64),
         allocation("api", "10.0.0.2", "restart", "gate failed", hash="b" * 64, from_version="1.2.0",
                    to_version="1.3.0", gate_seconds=12.25, reason="files changed: conf/a.conf")],
    ]
    rollout = {}
    for i, (run_id, allocs) in enumerate(zip(RUNS, runs)):
        rollout = _record.carry_rollout(rollout, allocs, run_id, "t%d" % i)
        failed = any(a.result == "gate failed" for a in allocs)
        _record.write(root, _record.DeployRecord(
            run_id=run_id, bucket_id="b", outcome="failed" if failed else "ok", started="2026-11-23T1%d:00:00Z" % i,
            finished="2026-11-23T1%d:00:30Z" % i, seconds=30.0, user="ops", controller="ctl%d" % i, pid=i,
            plan_hash="%016x" % (i + 1), update_seq=i + 1, previous_update_seq=i, options={"jobs": ["api"]} if i else {},
            summary=_view.count_words({a.result: 1 for a in allocs}), allocations=allocs, rollout=rollout,
            problems=["health gate of job api failed on 10.0.0.2"] if failed else []))


@pytest.fixture()
def built(tmp_path):
    root = bucket(tmp_path)
    assert _service.build(root).written
    return root


def test_the_list_of_runs_newest_last(built):
    write_runs(built)
    shown = _logs.logs(built, _logs.Request())
    assert [r["run_id"] for r in shown.data["runs"]] == list(RUNS) and shown.msg == "3 runs"
    rows = [line.split() for line in shown.lines[3:6]]
    assert [(r[0], r[3], r[4], r[5:8]) for r in rows] == [
        (RUNS[0], "ops@ctl0", "ok", ["0", "->", "1"]), (RUNS[1], "ops@ctl1", "ok", ["1", "->", "2"]),
        (RUNS[2], "ops@ctl2", "failed", ["2", "->", "3"])]
    assert "allocations" not in shown.data["runs"][0] and shown.data["keep"] == _record.KEEP
    limited = _logs.logs(built, _logs.Request(limit=2))
    assert [r["run_id"] for r in limited.data["runs"]] == list(RUNS[1:])
    assert "the newest 2 of 3 runs" in "\n".join(limited.lines)


def test_the_list_filtered_by_worker_keeps_the_runs_that_changed_it(built):
    write_runs(built)
    by_worker = _logs.logs(built, _logs.Request(workers=("10.0.0.2",)))
    assert [r["run_id"] for r in by_worker.data["runs"]] == [RUNS[0], RUNS[2]]
    with pytest.raises(_logs.LogsError, match='no kept deploy run has the worker 10.0.0.3 \\(did you mean "10.0.0.'):
        _logs.logs(built, _logs.Request(workers=("10.0.0.3",)))
    with pytest.raises(_logs.LogsError, match='no kept deploy run has the job apii \\(did you mean "api"\\?\\)'):
        _logs.logs(built, _logs.Request(jobs=("apii",)))


def test_one_run_in_full_as_a_table_and_as_json(built):
    write_runs(built)
    shown = _logs.logs(built, _logs.Request(run="last"))
    text = "\n".join(shown.lines)
    assert shown.lines[0] == "run %s of bucket b: failed" % RUNS[2]
    assert "by ops@ctl2 (pid 2); started 2026-11-23T12:00:00Z, finished 2026-11-23T12:00:30Z (30.0 s)" in text
    assert "plan hash 0000000000000003; update_seq 2 -> 3; options: jobs=api" in text
    [row] = [line.split() for line in shown.lines if line.startswith("api  10.0.0.2")]
    assert row[:9] == ["api", "10.0.0.2", "restart", "gate", "failed", "b" * 12, "1.2.0", "->", "1.3.0"]
    assert row[9:12] == ["12.2", "-", "files"]
    assert "problems:" in shown.lines and "  - health gate of job api failed on 10.0.0.2" in shown.lines
    as_json = _logs.logs(built, _logs.Request(run=RUNS[2][:11], format="json", workers=("10.0.0.2",)))
    data = json.loads("\n".join(as_json.lines))
    assert data == as_json.data and data["run_id"] == RUNS[2] and data["outcome"] == "failed"
    assert [(a["worker"], a["result"], a["hash"], a["gate_seconds"]) for a in data["allocations"]] == [
        ("10.0.0.2", "gate failed", "b" * 64, 12.25)]
    assert set(data["rollout"]) == {"api@10.0.0.2"} and data["rollout"]["api@10.0.0.2"]["state"] == "health_failed"
    with pytest.raises(_logs.LogsError, match="run 2026 is ambiguous"):
        _logs.logs(built, _logs.Request(run="2026"))


def test_no_records_and_bad_options(built):
    assert _logs.logs(built, _logs.Request()).data["runs"] == []
    with pytest.raises(_logs.LogsError, match="no deploy record is kept"):
        _logs.logs(built, _logs.Request(run="last"))
    with pytest.raises(_logs.LogsError, match='maand_format \'jsn\' is not a format \\(did you mean "json"'):
        _logs.logs(built, _logs.Request(format="jsn"))
    with pytest.raises(_logs.LogsError, match="maand_limit -1 is not a number of runs"):
        _logs.logs(built, _logs.Request(limit=-1))


def test_info_before_and_after_a_recorded_deploy(built):
    found = _info.info(built)
    assert (found.workers, found.jobs, found.allocations["total"], found.allocations["active"]) == (2, 1, 2, 2)
    assert (found.update_seq, found.update_seq_from, found.last_deploy, found.records_kept) == (
        0, "no deploy recorded", None, 0)
    assert found.state_store.startswith("files (") and len(found.bucket_id) == 36
    write_runs(built)
    found = _info.info(built)
    assert (found.update_seq, found.records_kept) == (3, 3)
    assert found.last_deploy == {"run_id": RUNS[2], "outcome": "failed", "finished": "2026-11-23T12:00:30Z",
                                 "by": "ops@ctl2", "summary": "1 gate failed, 1 unchanged"}
    lines = found.table().lines()
    assert lines[1].split() == ["DESCRIPTION", "VALUE"]
    assert "Update Sequence        3 (deploy run %s)" % RUNS[2] in lines
    assert "Number of Allocations  2 (2 active, 0 disabled, 0 removed)" in lines
    assert json.loads(json.dumps(found.to_dict()))["allocations"] == {"total": 2, "active": 2, "disabled": 0,
                                                                      "removed": 0}


def test_info_without_a_catalog_says_build_first(tmp_path):
    with pytest.raises(_cat.CatError, match="build the bucket first"):
        _info.info(str(tmp_path))

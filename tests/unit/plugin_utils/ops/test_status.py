"""maand.core.status: the worker agent's status op (against temp trees), the ops the controller sends,
and the table / JSON made of the answers (_status, pure)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.ops import status as _status
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent

MAKEFILE = "status:\n\t@if [ -f data/up ]; then echo up; else echo down; exit 3; fi\n"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "worker" / "bid"
    for job in ("api", "web", "ctl"):
        (r / "jobs" / job / "data").mkdir(parents=True)
        (r / "jobs" / job / "Makefile").write_text(MAKEFILE)
    (r / "jobs" / "api" / "data" / "up").write_text("")
    (r / "deploy").mkdir()
    (r / "deploy" / "api.json").write_text(json.dumps({"version": "1.2.0"}))
    os.utime(r / "deploy" / "api.json", (1795000000, 1795000000))
    (r / "deploy" / "web.json").write_text(json.dumps({"version": "1.0.0"}))
    (r / "deploy" / "web.pending").write_text("{}")
    return r


def ask(root, ops, slots=1):
    return _agent.run_step({"root": str(root), "timeout": 30, "tail": 5, "slots": slots, "ops": ops})["ops"]


def op(job, target="status"):
    return {"id": job, "kind": "status", "job": job, "host": "h", "target": target, "env": {}}


def test_agent_status_reports_record_and_make_status_exit_code(root):
    api, web, ctl, gone = ask(root, [op("api"), op("web"), op("ctl", None), op("gone")], slots=4)
    assert api["ok"] and api["running"] is True and api["version"] == "1.2.0" and api["deployed_at"] == 1795000000
    assert api["output_tail"] == ["up"] and not api["changed"] and not api["pending"]
    assert web["running"] is False and web["pending"] and web["version"] == "1.0.0"
    assert "down" in web["output_tail"]
    assert ctl["running"] is None and ctl["version"] is None and ctl["deployed_at"] is None  # not asked
    assert gone["running"] is None and gone["note"] == _status.NO_FOLDER
    assert sorted(os.listdir(root / "deploy")) == ["api.json", "web.json", "web.pending"]  # read-only


def test_agent_status_without_a_status_target_is_unknown_not_stopped(root):
    (root / "jobs" / "api" / "Makefile").write_text("start:\n\ttrue\n")
    out = ask(root, [op("api")])[0]
    assert out["running"] is None and "no 'status' target" in out["note"]


CATALOG = {
    "bucket_id": "b",
    "workers": [{"host": "h1", "position": 0}, {"host": "h2", "position": 1}],
    "jobs": [{"name": "api", "version": "1.2.0", "ports": {"api_port": 30000}},
             {"name": "ctl", "version": "2.0.0", "commands": {"command_ctl": {"executed_on": ["job_control"]}}},
             {"name": "old", "version": "1.0.0"}],
    "allocations": [{"job": "api", "worker": "h1", "state": "active", "alloc_id": "a1"},
                    {"job": "api", "worker": "h2", "state": "disabled", "alloc_id": "a2"},
                    {"job": "ctl", "worker": "h1", "state": "active", "alloc_id": "c1"},
                    {"job": "old", "worker": "h2", "state": "removed", "alloc_id": "o2"}],
}


def test_status_ops_one_per_allocation_with_the_deploy_environment():
    allocs = [a for a in CATALOG["allocations"] if a["worker"] == "h1"]
    ops = _status.status_ops(CATALOG, "h1", allocs)
    assert [(o["job"], o["kind"], o["target"]) for o in ops] == [("api", "status", "status"), ("ctl", "status", None)]
    assert ops[0]["env"]["API_PORT"] == "30000" and ops[0]["env"]["ALLOCATION_ID"] == "a1"
    assert [o["job"] for o in _status.status_ops(CATALOG, "h1", allocs, jobs=["ctl"])] == ["ctl"]
    marked = _status.status_ops(CATALOG, "h1", allocs, spec_op=lambda o, job: dict(o, seen=job))
    assert [o["seen"] for o in marked] == ["api", "ctl"]


ANSWERS = {
    "h1": {"answered": True, "jobs": {
        "api": {"version": "1.1.0", "deployed_at": 1795000000, "running": False, "output_tail": ["api down", "make: *** [Makefile:3: status] Error 1"]},
        "ctl": {"version": "2.0.0", "deployed_at": 1795000000, "running": None}}},
    "h2": {"unreachable": True, "msg": "Failed to connect to the host via ssh: timeout\nmore"},
}


def test_rows_join_the_catalog_and_the_answers():
    rows = _status.rows(CATALOG, ANSWERS)
    cells = [r.cells() for r in rows]
    assert cells[0] == ("api", "h1", "active", "1.2.0", "1.1.0", "no", "2026-11-18T11:06:40Z", "api down")
    assert cells[1][:6] == ("api", "h2", "disabled", "1.2.0", "-", "unreachable")
    assert cells[1][7] == "Failed to connect to the host via ssh: timeout"
    assert cells[2][5] == "n/a" and "job_control" in cells[2][7]
    assert cells[3][:6] == ("old", "h2", "removed", "1.0.0", "-", "unreachable")
    assert [r.job for r in _status.rows(CATALOG, ANSWERS, jobs=["ctl"])] == ["ctl"]
    assert {r.worker for r in _status.rows(CATALOG, {"h1": ANSWERS["h1"]})} == {"h1"}  # --limit


def test_a_failed_or_missing_answer_is_unknown_and_counted():
    answers = {"h1": {"failed": False, "msg": "status of h1: unexpected answer from the worker (rc=1)"}}
    rows = _status.rows(CATALOG, answers)
    assert {r.running for r in rows} == {"?"} and rows[0].note.startswith("status of h1")
    assert _status.failed(answers) == ["h1"] and _status.unreachable(answers) == []
    data = _status.as_json(rows, answers)
    assert data["failed"] == ["h1"]


def test_a_job_without_folder_is_not_deployed():
    answers = {"h2": {"answered": True, "jobs": {"api": {"running": None, "note": _status.NO_FOLDER},
                                                 "old": {"running": None, "note": _status.NO_FOLDER}}}}
    rows = _status.rows(CATALOG, answers)
    assert [(r.running, r.note) for r in rows] == [("-", "not deployed")] * 2
    assert _status.summary(rows, answers) == "status: 2 not deployed"


def test_table_and_summary():
    rows = _status.rows(CATALOG, ANSWERS)
    lines = _status.table_lines(rows, ANSWERS)
    assert lines[0] == "maand status"
    assert lines[1].split() == ["JOB", "WORKER", "STATE", "VERSION", "DEPLOYED", "RUNNING", "LAST", "DEPLOY", "NOTE"]
    assert lines[-1] == "status: 1 not running, 1 n/a, 2 unreachable; unreachable worker: h2"
    assert len({len(line) >= len(lines[1].rstrip()) for line in lines[2:-1]}) == 1


def test_json_for_scripts():
    rows = _status.rows(CATALOG, ANSWERS)
    data = _status.as_json(rows, ANSWERS)
    assert json.loads(json.dumps(data)) == data
    first = data["rows"][0]
    assert first == {"job": "api", "worker": "h1", "state": "active", "version": "1.2.0", "deployed_version": "1.1.0",
                     "running": False, "unreachable": False, "status": "no", "last_deploy": "2026-11-18T11:06:40Z",
                     "note": "api down"}
    assert data["rows"][1]["unreachable"] is True and data["rows"][1]["running"] is None
    assert data["rows"][2]["running"] is None and data["rows"][2]["status"] == "n/a"
    assert data["unreachable"] == ["h2"]


def test_format_and_job_names_are_checked():
    assert _status.check_format(None) == "table" and _status.check_format(" JSON ") == "json"
    with pytest.raises(_status.StatusError, match="maand_format=yaml is not known"):
        _status.check_format("yaml")
    _status.check_jobs(CATALOG, ("api", "old"))
    with pytest.raises(_status.StatusError, match="job apii is not in the catalog.*did you mean"):
        _status.check_jobs(CATALOG, ("apii",))
    assert _status.split_jobs("api, web") == ("api", "web") and _status.split_jobs(None) == ()


def test_when_is_utc_iso():
    assert _status.when(0) == "1970-01-01T00:00:00Z"
    assert _status.when(None) is None and _status.when(True) is None and _status.when("1") is None


def test_build_table_has_a_ports_column():
    catalog = {"jobs": [{"name": "api", "ports": {"b_port": 2, "a_port": 1}}, {"name": "web"}],
               "allocations": [{"job": "api", "worker": "h1", "state": "active", "zone": None, "memory_mb": 1,
                                "cpu_mhz": 2, "deployment_seq": 0},
                               {"job": "web", "worker": "h1", "state": "active", "zone": "z", "memory_mb": 1,
                                "cpu_mhz": 2, "deployment_seq": 1}]}
    lines = _service.allocation_table(catalog)
    assert lines[0].split()[-1] == "PORTS"
    assert lines[1].split()[-1] == "a_port=1,b_port=2" and lines[2].split()[-1] == "-"


def test_a_reverted_or_unpromoted_version_is_in_the_note():
    answers = {"h1": {"answered": True, "jobs": {
        "api": {"version": "1.1.0", "running": True, "reverted_from": "1.2.0"},
        "ctl": {"version": "2.0.0", "running": None, "unpromoted": "2.1.0", "rolled_back_from": "2.2.0"}}}}
    notes = {r.job: r.note for r in _status.rows(CATALOG, answers)}
    assert notes["api"] == "reverted from 1.2.0"
    assert notes["ctl"].startswith("2.1.0 not promoted (failed); rolled back from 2.2.0; job_control job")


def test_a_stopped_disabled_allocation_is_disabled_and_an_active_one_fails():
    answers = {"h1": ANSWERS["h1"],
               "h2": {"answered": True, "jobs": {"api": {"version": "1.2.0", "running": False, "output_tail": ["down"]}}}}
    rows = _status.rows(CATALOG, answers, jobs=["api"])
    assert [(r.worker, r.state, r.running) for r in rows] == [("h1", "active", "no"), ("h2", "disabled", "disabled")]
    assert [(r.job, r.worker) for r in _status.not_running(rows)] == [("api", "h1")]
    assert _status.summary(rows, answers) == "status: 1 not running, 1 disabled"
    data = _status.as_json(rows, answers)
    assert data["not_running"] == ["api@h1"]
    assert data["counts"] == {"allocations": 2, "not_running": 1, "disabled": 1, "unreachable_workers": 0}
    # the disabled one stopped: nothing fails
    assert _status.not_running([r for r in rows if r.worker == "h2"]) == []

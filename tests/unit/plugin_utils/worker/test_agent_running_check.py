"""The running check that rides the deploy's state read (worker/agent.read_statuses): a deploy's make
start/restart/reload keeps how it ran (deploy/<job>.status, 0600), and `read <root> status` asks `make status`
of each running, enabled job with a status target, side by side and bounded; real make on temp trees."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent

MAKEFILE = ("start:\n\ttouch data/pid\nstop:\n\trm -f data/pid\nrestart: stop start\n"
            "status:\n\t@test -f data/pid && test \"$$PORT\" = 8080 || { echo $(JOB) not running; exit 1; }\n")


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "worker" / "bid"
    for job in ("api", "web"):
        (r / "jobs" / job / "data").mkdir(parents=True)
        (r / "jobs" / job / "Makefile").write_text(MAKEFILE)
    (r / "jobs" / "web" / "Makefile").write_text("start:\n\ttrue\n")  # no status target
    return r


def start(root, job, record=None):
    op = {"id": "%s@h" % job, "kind": "run", "job": job, "host": "h", "target": "start", "promote_now": True,
          "env": {"PORT": "8080", "JOB": job, "CURRENT_VERSION": "1", "NEW_VERSION": "2"},
          "record": record if record is not None else {"format": 1, "job": job, "running": True}}
    answer = _agent.run_step({"root": str(root), "timeout": 30, "ops": [op]})
    assert answer["ops"][0]["ok"], answer


def test_a_deploy_start_keeps_its_environment_for_the_status_check(root):
    start(root, "api")
    kept = root / "deploy" / "api.status"
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert json.loads(kept.read_text())["env"] == {"PORT": "8080", "JOB": "api", "CURRENT_VERSION": "2",
                                                   "NEW_VERSION": "2"}
    assert "api.status" not in _agent.read_state(str(root))["deployed"]  # not a record


def test_status_says_running_then_not_running_once_the_process_is_gone(root):
    start(root, "api")
    start(root, "web")
    assert _agent.read_state(str(root), status=True)["status"]["api"]["running"] is True
    (root / "jobs" / "api" / "data" / "pid").unlink()  # killed by hand
    answer = _agent.read_state(str(root), status=True)["status"]
    assert set(answer) == {"api"}  # web has no status target: not asked
    assert (answer["api"]["running"], answer["api"]["rc"]) == (False, 2)
    assert any("api not running" in line for line in answer["api"]["tail"])
    assert "status" not in _agent.read_state(str(root))  # the plain read asks nothing


def test_only_running_enabled_jobs_a_deploy_started_are_asked(root):
    start(root, "api", record={"format": 1, "job": "api", "running": False})  # stopped (disabled) record
    assert "status" not in _agent.read_state(str(root), status=True)
    start(root, "api")
    (root / "jobs.json").write_text(json.dumps([{"job": "api", "disabled": 1}]))
    assert "status" not in _agent.read_state(str(root), status=True)
    (root / "jobs.json").write_text(json.dumps([{"job": "api", "disabled": 0}]))
    (root / "deploy" / "api.status").unlink()  # started by an older agent: nothing to ask with
    assert "status" not in _agent.read_state(str(root), status=True)


def test_a_hanging_status_is_bounded_and_counts_as_unknown(root, monkeypatch):
    monkeypatch.setattr(_agent, "STATUS_READ_TIMEOUT", 1)
    start(root, "api")
    (root / "jobs" / "api" / "Makefile").write_text("status:\n\tsleep 30\n")
    answer = _agent.read_state(str(root), status=True)["status"]["api"]
    assert answer["running"] is None and "note" in answer  # neither running nor not: the plan leaves it


def test_remove_drops_the_kept_environment(root):
    start(root, "api")
    op = {"id": "api@h", "kind": "remove", "job": "api", "host": "h", "target": "stop"}
    assert _agent.run_step({"root": str(root), "timeout": 30, "ops": [op]})["ops"][0]["ok"]
    assert not (root / "deploy" / "api.status").exists()


def test_main_read_status(root):
    start(root, "api")
    out = io.StringIO()
    assert _agent.main(["read", str(root), "status"], stdout=out) == 0
    assert json.loads(out.getvalue())["status"]["api"]["running"] is True
    out = io.StringIO()
    _agent.main(["read", str(root), "bogus"], stdout=out)
    assert "usage" in json.loads(out.getvalue())["msg"]


def test_the_kept_status_settings_never_hold_the_job_specs_environment(tmp_path):
    (tmp_path / "deploy").mkdir()
    op = {"job": "envjob", "env": {"NEW_VERSION": "1.0.0", "JOB": "envjob", "DB_PASSWORD": "s3cret-9f1c"},
          "spec_env": ["DB_PASSWORD"], "user": "nobody"}
    _agent.note_status_op(str(tmp_path), op)
    kept = (tmp_path / "deploy" / ("envjob" + _agent.STATUS_FILE)).read_bytes()
    assert b"s3cret-9f1c" not in kept and b"DB_PASSWORD" not in kept
    assert json.loads(kept) == {"env": {"NEW_VERSION": "1.0.0", "CURRENT_VERSION": "1.0.0", "JOB": "envjob"},
                                "run": {"user": "nobody"}}

"""The worker-side programs of the deploy, run locally against a temporary /opt/worker/<id> tree."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import _deploy_remote as R

MAKEFILE = "start:\n\techo started > data/s\nstop:\n\techo stopped > data/s\nrestart:\n\t@echo line1; echo boom >&2; exit 4\n"


def apply(root, op, timeout=30):
    req = json.loads(R.apply_request("bid", op, timeout=timeout, tail=5))
    req["root"] = str(root)
    proc = subprocess.run([sys.executable, "-c", R.APPLY_PROGRAM], input=json.dumps(req), capture_output=True, text=True, check=False)
    data, err = R.parse_output(proc.stdout, proc.stderr, proc.returncode, "test")
    assert err is None, err
    return data


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "worker" / "bid"
    job = r / "jobs" / "api"
    for sub in ("data", "logs", "bin", "conf"):
        (job / sub).mkdir(parents=True)
    (job / "Makefile").write_text(MAKEFILE)
    (job / "conf" / "a.conf").write_text("x")
    (job / "data" / "db").write_text("precious")
    (job / "logs" / "l").write_text("log")
    return r


def test_run_start_and_promote(root):
    rec = {"format": 1, "job": "api", "hash": "h"}
    res = apply(root, {"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "start",
                       "env": {"NEW_VERSION": "2"}, "promote_now": True, "record": rec})
    assert res["ok"] and res["changed"] and res["steps"] == ["make start", "promote"]
    assert (root / "jobs/api/data/s").read_text() == "started\n"
    assert json.loads((root / "deploy/api.json").read_text()) == rec


def test_failing_target_reports_tail_and_does_not_promote(root):
    res = apply(root, {"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "restart",
                       "promote_now": True, "record": {"x": 1}})
    assert not res["ok"] and "make restart failed (rc=2)" in res["msg"]
    assert "boom" in res["output_tail"] and "line1" in res["output_tail"]
    assert not (root / "deploy/api.json").exists()


def test_missing_target_and_missing_makefile_are_named(root):
    res = apply(root, {"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "reload"})
    assert not res["ok"] and res["reason"] == "missing_target" and "has no 'reload' target" in res["msg"]
    (root / "jobs/api/Makefile").unlink()
    res = apply(root, {"id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "start"})
    assert not res["ok"] and res["reason"] == "no_makefile"


def test_remove_keeps_data_and_logs(root):
    (root / "deploy").mkdir()
    (root / "deploy/api.json").write_text("{}")
    res = apply(root, {"id": "api@h", "kind": "remove", "job": "api", "host": "h", "target": "stop"})
    assert res["ok"] and res["steps"] == ["make stop", "remove"]
    assert sorted(p.name for p in (root / "jobs/api").iterdir()) == ["data", "logs"]
    assert (root / "jobs/api/data/db").read_text() == "precious"
    assert (root / "jobs/api/data/s").read_text() == "stopped\n"
    assert not (root / "deploy/api.json").exists()


def test_remove_with_failing_stop_deletes_nothing(root):
    (root / "jobs/api/Makefile").write_text("stop:\n\texit 1\n")
    res = apply(root, {"id": "api@h", "kind": "remove", "job": "api", "host": "h", "target": "stop"})
    assert not res["ok"]
    assert (root / "jobs/api/conf/a.conf").exists()


def test_purge_keeps_only_job_data_and_logs(root):
    (root / "worker.json").write_text("{}")
    (root / "bin").mkdir()
    (root / "jobs/empty").mkdir()
    res = apply(root, {"id": "purge@h", "kind": "purge", "job": None, "host": "h"})
    assert res["ok"] and res["changed"]
    assert sorted(p.name for p in root.iterdir()) == ["jobs"]
    assert sorted(p.name for p in (root / "jobs").iterdir()) == ["api"]
    assert sorted(p.name for p in (root / "jobs/api").iterdir()) == ["data", "logs"]


def test_meta_writes_worker_and_jobs_json(tmp_path):
    root = tmp_path / "new"
    res = apply(root, {"id": "meta@h", "kind": "meta", "job": None, "host": "h",
                       "worker_json": {"update_seq": 3}, "jobs_json": {"jobs": []}})
    assert res["ok"]
    assert json.loads((root / "worker.json").read_text()) == {"update_seq": 3}
    assert (root / "jobs").is_dir() and (root / "deploy").is_dir()


def test_read_program(root):
    (root / "worker.json").write_text('{"update_seq": 2}')
    (root / "deploy").mkdir()
    (root / "deploy/api.json").write_text('{"format": 1}')
    (root / "deploy/bad.json").write_text("{nope")
    proc = subprocess.run([sys.executable, "-c", R.READ_PROGRAM, str(root)], capture_output=True, text=True, check=False)
    data = json.loads(proc.stdout)
    assert data["worker"] == {"update_seq": 2} and data["deployed"] == {"api": {"format": 1}}
    assert data["trees"] == ["api"] and data["bad"] == [str(root / "deploy/bad.json")]
    missing = subprocess.run([sys.executable, "-c", R.READ_PROGRAM, str(root / "nope")], capture_output=True, text=True, check=False)
    assert json.loads(missing.stdout)["exists"] is False


def test_parse_output_explains_a_missing_python():
    data, err = R.parse_output("", "sh: 1: python3: not found", 127, "reading")
    assert data is None and "python3 installed" in err

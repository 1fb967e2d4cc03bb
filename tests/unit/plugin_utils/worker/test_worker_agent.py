"""The worker agent (plugins/plugin_utils/worker/agent.py, with sandbox.py and journal.py beside it), imported on the
controller against temp trees."""

from __future__ import annotations

import io
import json
import threading

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import errors as _errors
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent, journal as _journal, sandbox as _sandbox

MAKEFILE = ("start:\n\techo started >> data/s\nstop:\n\techo stopped >> data/s\n"
            "restart:\n\t@echo line1; echo boom >&2; exit 4\nslow:\n\tsleep 5\n")


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


def step(root, ops=(), promote=(), timeout=30):
    return _agent.run_step({"root": str(root), "keep": ["data", "logs"], "timeout": timeout, "tail": 5,
                            "ops": list(ops), "promote": list(promote)})


def run_op(target, promote_now=True, record=None, **kw):
    op = {"id": "api@h", "kind": "run", "job": "api", "host": "h", "action": target, "target": target,
          "env": {"NEW_VERSION": "2"}, "promote_now": promote_now, "record": record or {"format": 1, "job": "api"}}
    op.update(kw)
    return op


def test_start_promote_now_writes_record_and_clears_marker(root):
    ans = step(root, [run_op("start")])
    out = ans["ops"][0]
    assert ans["ok"] and out["ok"] and out["steps"] == ["make start", "promote"]
    assert (root / "jobs/api/data/s").read_text() == "started\n"
    assert json.loads((root / "deploy/api.json").read_text()) == {"format": 1, "job": "api"}
    assert not (root / "deploy/api.pending").exists()


def test_gated_start_leaves_marker_then_promotion_in_next_call_clears_it(root):
    step(root, [run_op("start", promote_now=False)])
    assert (root / "deploy/api.pending").exists() and not (root / "deploy/api.json").exists()
    ans = step(root, promote=[{"id": "api@h", "job": "api", "record": {"r": 1}}])
    assert ans["promotions"] == [{"id": "api@h", "ok": True}]
    assert json.loads((root / "deploy/api.json").read_text()) == {"r": 1}
    assert not (root / "deploy/api.pending").exists()


def test_unpromoted_start_is_stopped_before_retry(root):
    step(root, [run_op("start", promote_now=False)])
    ans = step(root, [run_op("start", promote_now=False)])
    assert ans["ops"][0]["steps"] == ["make stop", "make start"]
    assert (root / "jobs/api/data/s").read_text() == "started\nstopped\nstarted\n"


def test_promotions_run_before_ops(root):
    ans = step(root, [run_op("restart")], promote=[{"id": "api@h", "job": "api", "record": {"old": 1}}])
    assert ans["promotions"][0]["ok"] and not ans["ops"][0]["ok"]
    assert json.loads((root / "deploy/api.json").read_text()) == {"old": 1}


def test_failing_target_reports_tail_and_does_not_promote(root):
    out = step(root, [run_op("restart")])["ops"][0]
    assert not out["ok"] and "make restart failed (rc=2)" in out["msg"] and out["rc"] == 2
    assert "boom" in out["output_tail"] and "line1" in out["output_tail"]
    assert not (root / "deploy/api.json").exists()


def test_one_failing_op_does_not_stop_the_next(root):
    ans = step(root, [run_op("restart"), {"id": "meta@h", "kind": "meta", "host": "h", "worker_json": {"w": 1}, "jobs_json": {"j": 1}}])
    assert [o["ok"] for o in ans["ops"]] == [False, True]
    assert json.loads((root / "worker.json").read_text()) == {"w": 1}


def test_missing_target_makefile_and_folder_are_named(root):
    out = step(root, [run_op("reload")])["ops"][0]
    assert out["reason"] == "missing_target" and "has no 'reload' target" in out["msg"]
    (root / "jobs/api/Makefile").unlink()
    out = step(root, [run_op("start")])["ops"][0]
    assert out["reason"] == "no_makefile"
    out = step(root, [run_op("start", job="nope", id="nope@h")])["ops"][0]
    assert "job folder" in out["msg"] and "missing" in out["msg"]


def test_timeout(root):
    out = step(root, [run_op("slow")], timeout=0.5)["ops"][0]
    assert not out["ok"] and "timed out" in out["msg"] and out["rc"] == -1


def test_stop_op_with_record(root):
    out = step(root, [{"id": "api@h", "kind": "stop", "job": "api", "host": "h", "target": "stop",
                       "promote_now": True, "record": {"running": False}}])["ops"][0]
    assert out["ok"] and out["steps"] == ["make stop", "promote"]
    assert json.loads((root / "deploy/api.json").read_text()) == {"running": False}


def test_remove_keeps_data_and_logs(root):
    (root / "deploy").mkdir()
    (root / "deploy/api.json").write_text("{}")
    (root / "deploy/api.pending").write_text("{}")
    out = step(root, [{"id": "api@h", "kind": "remove", "job": "api", "host": "h", "target": "stop"}])["ops"][0]
    assert out["ok"] and out["steps"] == ["make stop", "remove"]
    assert sorted(p.name for p in (root / "jobs/api").iterdir()) == ["data", "logs"]
    assert (root / "jobs/api/data/db").read_text() == "precious"
    assert not (root / "deploy/api.json").exists() and not (root / "deploy/api.pending").exists()


def test_purge_keeps_data_and_logs(root):
    (root / "worker.json").write_text("{}")
    out = step(root, [{"id": "purge@h", "kind": "purge", "host": "h"}])["ops"][0]
    assert out["ok"] and out["changed"]
    assert (root / "jobs/api/data/db").read_text() == "precious" and (root / "jobs/api/logs/l").exists()
    assert not (root / "worker.json").exists() and not (root / "jobs/api/conf").exists()
    assert step(root.parent / "gone", [{"id": "purge@h", "kind": "purge", "host": "h"}])["ops"][0]["changed"] is False


def test_unknown_op(root):
    out = step(root, [{"id": "x", "kind": "zap"}])["ops"][0]
    assert not out["ok"] and "unknown deploy operation" in out["msg"]


def test_read_state(root):
    (root / "deploy").mkdir()
    (root / "deploy/api.json").write_text(json.dumps({"format": 1}))
    (root / "deploy/api.pending").write_text("{}")
    (root / "deploy/bad.json").write_text("{nope")
    (root / "worker.json").write_text(json.dumps({"bucket_id": "bid"}))
    other = root.parent / "old"
    other.mkdir()
    (other / "worker.json").write_text(json.dumps({"bucket_id": "old"}))
    (root.parent / ".maand").mkdir()
    st = _agent.read_state(str(root))
    assert st["exists"] and st["deployed"] == {"api": {"format": 1}} and st["pending"] == ["api"]
    assert st["trees"] == ["api"] and st["bad"] == [str(root / "deploy/bad.json")]
    assert st["others"] == [{"bucket_id": "old", "path": str(other)}]
    missing = _agent.read_state(str(root.parent / "nope"))
    assert not missing["exists"] and missing["deployed"] == {} and len(missing["others"]) == 2


def test_main_read_step_and_bad_requests(root):
    out = io.StringIO()
    assert _agent.main(["read", str(root)], stdout=out) == 0
    assert json.loads(out.getvalue())["trees"] == ["api"]
    out = io.StringIO()
    _agent.main([], stdin=io.StringIO(json.dumps({"root": str(root), "ops": [run_op("start")]})), stdout=out)
    assert json.loads(out.getvalue())["ops"][0]["ok"]
    for bad in ("{", "[]", "{}"):
        out = io.StringIO()
        _agent.main([], stdin=io.StringIO(bad), stdout=out)
        assert json.loads(out.getvalue())["ok"] is False and "bad agent request" in out.getvalue()
    out = io.StringIO()
    _agent.main(["zap"], stdout=out)
    assert "usage" in json.loads(out.getvalue())["msg"]


def test_remove_with_failing_stop_deletes_nothing(root):
    (root / "jobs/api/Makefile").write_text("stop:\n\texit 1\n")
    out = step(root, [{"id": "api@h", "kind": "remove", "job": "api", "host": "h", "target": "stop"}])["ops"][0]
    assert not out["ok"] and (root / "jobs/api/conf/a.conf").exists()


def test_purge_keeps_only_job_data_and_logs(root):
    (root / "worker.json").write_text("{}")
    (root / "bin").mkdir()
    (root / "jobs/empty").mkdir()
    assert step(root, [{"id": "purge@h", "kind": "purge", "job": None, "host": "h"}])["ops"][0]["ok"]
    assert sorted(p.name for p in root.iterdir()) == ["jobs"]
    assert sorted(p.name for p in (root / "jobs").iterdir()) == ["api"]


def test_meta_creates_a_new_root(tmp_path):
    root = tmp_path / "new"
    out = step(root, [{"id": "meta@h", "kind": "meta", "job": None, "host": "h",
                       "worker_json": {"update_seq": 3}, "jobs_json": {"jobs": []}}])["ops"][0]
    assert out["ok"] and (root / "jobs").is_dir() and (root / "deploy").is_dir()
    assert json.loads((root / "worker.json").read_text()) == {"update_seq": 3}


def test_job_playbook_start_leaves_no_pending_marker(root):
    op = run_op("start", promote_now=False)
    op["record"] = None
    assert step(root, [op])["ops"][0]["ok"]
    assert not (root / "deploy/api.pending").exists()


@pytest.mark.parametrize("module", [_agent, _sandbox, _errors, _journal], ids=["agent", "sandbox", "errors", "journal"])
def test_python36_syntax_of_the_agent(module):
    # the agent, its sandbox, the errors file and the journal beside them run on workers with Python >= 3.6: no f-strings
    # with =, no walrus, no dataclasses, no `from __future__ import annotations` (3.7)
    import ast
    source = open(module.__file__.replace(".pyc", ".py")).read()
    tree = ast.parse(source, feature_version=(3, 6))
    assert "annotations" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    names = {n.names[0].name for n in ast.walk(tree) if isinstance(n, ast.Import)}
    assert names <= {"contextlib", "ctypes", "fcntl", "glob", "grp", "hashlib", "importlib.util", "json", "os", "pwd", "re", "shutil",
                     "selectors", "signal", "socket", "stat", "struct", "subprocess", "sys", "tempfile", "threading", "time"}


def test_files_op_changes_nothing_on_the_worker(root):
    # the controller's rsync shipped the tree; the op (normally left out of the request) is a no-op
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    ans = step(root, [{"id": "api@h/files", "kind": "files", "job": "api", "host": "h", "of": "api@h", "sync": True}])
    assert ans["ops"] == [{"id": "api@h/files", "ok": True, "changed": False, "steps": ["files"]}]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


def test_hand_over_gives_the_jobs_user_its_runtime_folders_and_private_files_only(tmp_path):
    """Issue 21: a job running as its own user reads its 0600 files (rendered from a secret) and writes in
    data/ and logs/; the rest stays root's; links are never followed."""
    import os
    import stat
    if os.geteuid() != 0:
        import pytest
        pytest.skip("chown needs root")
    job = tmp_path / "job"
    (job / "conf").mkdir(parents=True)
    (job / "logs").mkdir()
    (job / "conf" / "db.conf").write_text("password=x")
    os.chmod(job / "conf" / "db.conf", 0o600)
    (job / "conf" / "plain.conf").write_text("plain")
    os.chmod(job / "conf" / "plain.conf", 0o644)
    outside = tmp_path / "outside"
    outside.write_text("root's")
    os.chmod(outside, 0o600)
    os.symlink(str(outside), str(job / "conf" / "link"))
    _sandbox.hand_over(str(job), 65534, 65534)
    assert os.lstat(job / "conf" / "db.conf").st_uid == 65534 and os.lstat(job / "conf" / "db.conf").st_gid == 65534
    assert os.lstat(job / "conf" / "plain.conf").st_uid == 0 and os.lstat(job / "conf").st_uid == 0
    assert os.lstat(outside).st_uid == 0  # the link was not followed
    for name in ("data", "logs"):
        assert os.lstat(job / name).st_uid == 65534 and stat.S_ISDIR(os.lstat(job / name).st_mode)
    assert os.lstat(job).st_uid == 0


def _pipe_with(data):
    import os
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def test_the_request_before_the_rsync_stream_is_read_to_its_last_byte_and_no_further():
    import os
    body = json.dumps({"root": "/opt/worker/bid", "ops": []}).encode()
    fd = _pipe_with(b"MAAND-REQUEST %d\n" % len(body) + body + b"RSYNC-STREAM")
    try:
        assert _agent.read_request(fd) == {"root": "/opt/worker/bid", "ops": []}
        assert os.read(fd, 100) == b"RSYNC-STREAM"  # left for rsync's receiver
    finally:
        os.close(fd)


@pytest.mark.parametrize("data,msg", [
    (b"\x00\x00\x00\x1frsync protocol", "no request header"),
    (b"MAAND-REQUEST 50\n{}", "cut short"),
    (b"MAAND-REQUEST 2\n{}", "object with a root"),
    (b"MAAND-REQUEST 0\n", "out of range"),
])
def test_a_missing_or_bad_request_before_the_rsync_stream_is_refused(data, msg):
    import os
    fd = _pipe_with(data)
    try:
        with pytest.raises(ValueError, match=msg):
            _agent.read_request(fd)
    finally:
        os.close(fd)


def test_sync_mode_runs_only_rsyncs_receiver():
    err = io.StringIO()
    assert _agent.sync_step(["sh", "-c", "touch /tmp/x"], err) == 2 and "expected rsync --server" in err.getvalue()


# --- the journal: a step sent again is answered, not applied again (a relaunched slice) ----------------------

def journaled(root, run_id, key, ops):
    return _agent.run_step({"root": str(root), "keep": ["data", "logs"], "timeout": 30, "tail": 5, "ops": ops,
                            "run_id": run_id, "step": key})


def test_a_step_sent_again_gets_its_first_answer_and_runs_nothing(root):
    first = journaled(root, "20261207T101010.001-1-abcdef", 2, [run_op("start")])
    assert first["ok"] and first["ops"][0]["ok"] and "replayed" not in first
    again = journaled(root, "20261207T101010.001-1-abcdef", 2, [run_op("start")])
    assert again == dict(first, replayed=True)
    assert (root / "jobs/api/data/s").read_text() == "started\n"  # make start ran once
    journal = root.parent / ".maand" / "journal" / "bid"
    assert (journal / "20261207T101010.001-1-abcdef" / "2.json").is_file()
    assert not (root / ".maand").exists()  # outside the bucket's folder: a purge never takes it


def test_another_step_or_run_is_applied_and_a_new_run_drops_the_old_journal(root):
    journaled(root, "run-a", 1, [run_op("start")])
    journaled(root, "run-a", "final", [run_op("start")])  # another step of the same run
    assert (root / "jobs/api/data/s").read_text() == "started\nstarted\n"
    journaled(root, "run-b", 1, [run_op("start")])
    assert (root / "jobs/api/data/s").read_text() == "started\n" * 3
    journal = root.parent / ".maand" / "journal" / "bid"
    assert sorted(p.name for p in journal.iterdir()) == ["run-b"]


@pytest.mark.parametrize("run_id, key", [(None, 1), ("r", None), ("../escape", 1), ("r", "../x"), (".hidden", 1),
                                         ("r", True), ("r", "a/b")])
def test_a_request_without_a_usable_run_id_and_step_is_applied_each_time(root, run_id, key):
    request = {"root": str(root), "keep": ["data", "logs"], "ops": [run_op("start")], "run_id": run_id, "step": key}
    assert _journal.entry_for(request) is None
    _agent.run_step(dict(request))
    _agent.run_step(dict(request))
    assert (root / "jobs/api/data/s").read_text() == "started\nstarted\n"
    assert not (root.parent / ".maand").exists()


def test_a_step_sent_while_the_first_still_runs_waits_for_it_and_gets_its_answer(root):
    """The first controller died, its agent did not: the relaunched request waits on the journal's lock."""
    (root / "jobs/api/Makefile").write_text("start:\n\tsleep 0.5; echo started >> data/s\n")
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(journaled(root, "run-c", 3, [run_op("start")])))
               for dummy in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert (root / "jobs/api/data/s").read_text() == "started\n"
    assert sorted(bool(a.get("replayed")) for a in answers) == [False, True]

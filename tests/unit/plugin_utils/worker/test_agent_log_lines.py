"""The worker agent keeps every line of a make target, stdout and stderr apart, for maand's bucket logs
(bucket/runlog.py): each op outcome's "commands"; `make status` keeps none (read-only)."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent, sandbox
from tests.bucket_factory import worker_root

MAKEFILE = ("start:\n\t@echo out-1; echo err-1 >&2; echo out-2\n"
            "fail:\n\t@echo bad >&2; exit 3\n"
            "many:\n\t@seq 1 25\n"
            "hang:\n\t@echo before; sleep 30\n"
            "status:\n\t@echo running\n"
            "early:\n\t@echo broken >&2; seq 1 10; exit 3\n")


@pytest.fixture
def root(tmp_path):
    return worker_root(tmp_path / "bid", {"a": MAKEFILE})


def run(root, target, kind="run", timeout=30):
    op = {"id": "a@h", "kind": kind, "job": "a", "host": "h", "target": target, "env": {}, "promote_now": False,
          "record": None}
    return _agent.run_step({"root": str(root), "timeout": timeout, "tail": 5, "slots": 1, "ops": [op]})["ops"][0]


def test_every_line_with_its_stream_and_time(root):
    out = run(root, "start")
    [cmd] = out["commands"]
    assert cmd["target"] == "start" and cmd["rc"] == 0 and cmd["seconds"] >= 0 and cmd["began"] > 1e9
    got = sorted((s, t) for dummy, s, t in cmd["lines"])
    assert got == [("stderr", "err-1"), ("stdout", "out-1"), ("stdout", "out-2")]
    assert all(when >= cmd["began"] for when, dummy, dummy2 in cmd["lines"])
    assert sorted(out["output_tail"]) == ["err-1", "out-1", "out-2"]


def test_a_failed_target_keeps_its_exit_code_and_every_line_past_the_tail(root):
    out = run(root, "fail")
    assert not out["ok"] and out["commands"][0]["rc"] == 2  # make's own exit status for a failed recipe
    got = [(s, t) for dummy, s, t in out["commands"][0]["lines"]]
    assert got[0] == ("stderr", "bad") and got[1][0] == "stderr" and "Error 3" in got[1][1], got
    many = run(root, "many")
    assert len(many["output_tail"]) == 5 and [t for dummy, dummy2, t in many["commands"][0]["lines"]] == \
        [str(i) for i in range(1, 26)]


def test_a_timeout_keeps_what_came_before(root):
    out = run(root, "hang", timeout=1)
    assert out["reason"] == "timeout" and out["commands"][0]["rc"] == -1
    assert [t for dummy, dummy2, t in out["commands"][0]["lines"]] == ["before"]


def test_status_keeps_no_lines(root):
    out = run(root, "status", kind="status")
    assert out["running"] is True and "commands" not in out


def test_the_newest_lines_are_kept_with_a_note(monkeypatch, root):
    monkeypatch.setattr(sandbox, "MAX_LOG_LINES", 10)
    lines = run(root, "many")["commands"][0]["lines"]
    assert lines[0][1:] == ["stderr", "(maand.core: the first 15 line(s) of this output were not kept)"]
    assert [t for dummy, dummy2, t in lines[1:]] == [str(i) for i in range(16, 26)]


def test_the_tail_keeps_an_error_printed_before_the_last_lines(root):
    out = run(root, "early")
    tail = out["output_tail"]
    # the two streams' relative order is the order they were read in; each stream's own order is kept
    errors = [t for t in tail if not t.isdigit()]
    printed = [t for t in tail if t.isdigit()]
    assert not out["ok"] and errors[0] == "broken" and "Error 3" in errors[-1], tail
    assert printed == [str(i) for i in range(11 - len(printed), 11)] and len(printed) >= 3, tail


@pytest.mark.parametrize("entries, n, tail", [
    ([], 3, []),
    ([("stdout", "a"), ("stderr", "b")], 0, []),
    ([("stdout", "a"), ("stderr", "b"), ("stdout", "c")], 3, ["a", "b", "c"]),
    ([("stderr", "e1")] + [("stdout", str(i)) for i in range(5)], 2, ["e1", "3", "4"]),
    ([("stderr", "e1"), ("stderr", "e2"), ("stderr", "e3")] + [("stdout", "x")], 2, ["e2", "e3", "x"]),
    ([("stderr", "e1"), ("stdout", "x"), ("stderr", "e2")], 2, ["e1", "x", "e2"]),
])
def test_tail_lines(entries, n, tail):
    assert sandbox.tail_lines(entries, n) == tail

"""maand.core.run_command's pure core (_run_command): the worker choice, the command (maand_cmd, else the
bucket's workspace/command.sh), the batches (maand_batch, maand's -c), the report of a batch and the
verdict of the health check after it (maand_health_check, maand's --health_check)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.ops import run_command as _run_command

WORKERS = {"10.0.0.1": ["worker", "web"], "10.0.0.2": ["worker", "db"], "10.0.0.3": ["worker", "web"]}
PLAY = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_run_command_choice():
    assert _run_command.select(WORKERS, PLAY, [], []) == PLAY
    assert _run_command.select(WORKERS, PLAY, [], ["WEB"]) == ["10.0.0.1", "10.0.0.3"]
    assert _run_command.select(WORKERS, PLAY, ["10.0.0.3", "10.0.0.2"], ["web"]) == ["10.0.0.3"]
    assert _run_command.select(WORKERS, ["10.0.0.2"], [], []) == ["10.0.0.2"]  # --limit
    assert _run_command.split_names(" a, b,,a ") == ["a", "b"]


def test_run_command_refuses_unknown_names_and_empty_choices():
    with pytest.raises(_run_command.RunCommandError, match=r'unknown worker 10.0.0.4 \(did you mean "10.0.0.3"\?\)'):
        _run_command.select(WORKERS, PLAY, ["10.0.0.4"], [])
    with pytest.raises(_run_command.RunCommandError, match=r'label wbe \(did you mean "web"\?\)'):
        _run_command.select(WORKERS, PLAY, [], ["wbe"])
    with pytest.raises(_run_command.RunCommandError, match="no worker is chosen"):
        _run_command.select(WORKERS, ["10.0.0.1"], ["10.0.0.2"], [])


def test_run_command_refuses_a_command_ansible_split_at_the_spaces():
    with pytest.raises(_run_command.RunCommandError, match=r"would be only 'df'; nothing was run. Fix: quote"):
        _run_command.check_split(["maand_cmd=df -h /opt"])
    _run_command.check_split(["maand_cmd='df -h /opt'", "maand_cmd=uptime maand_workers=h1", '{"maand_cmd": "a b"}',
                              "maand_cmd=uptime"])


# --- the command: maand_cmd, else workspace/command.sh ------------------------------------------------------

def test_the_command_given_wins_over_command_sh(tmp_path):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "command.sh").write_text("echo from file\n")
    got = _run_command.load_command("uptime", str(tmp_path))
    assert (got.script, got.label) == ("uptime", "`uptime`")


def test_without_a_command_workspace_command_sh_runs(tmp_path):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "command.sh").write_text("#!/bin/bash\necho one\necho two\n")
    for cmd in (None, "", "  "):
        got = _run_command.load_command(cmd, str(tmp_path))
        assert (got.script, got.label) == ("#!/bin/bash\necho one\necho two\n", "workspace/command.sh")


def test_neither_a_command_nor_command_sh_is_refused_naming_both(tmp_path):
    with pytest.raises(_run_command.RunCommandError) as exc:
        _run_command.load_command("", str(tmp_path))
    text = str(exc.value)
    assert "-e maand_cmd='uptime'" in text and str(tmp_path / "workspace" / "command.sh") in text
    assert text.endswith("nothing was run")


def test_an_empty_or_unreadable_command_sh_is_refused(tmp_path):
    (tmp_path / "workspace").mkdir()
    path = tmp_path / "workspace" / "command.sh"
    path.write_text(" \n\t\n")
    with pytest.raises(_run_command.RunCommandError, match="command.sh is empty, and no maand_cmd was given"):
        _run_command.load_command(None, str(tmp_path))
    path.unlink()
    path.mkdir()  # a folder where the file should be
    with pytest.raises(_run_command.RunCommandError, match="command.sh: cannot read it"):
        _run_command.load_command(None, str(tmp_path))
    with pytest.raises(_run_command.RunCommandError, match="must be a shell command"):
        _run_command.load_command(["ls"], str(tmp_path))


# --- batches --------------------------------------------------------------------------------------------

def test_batch_size_checks():
    assert _run_command.check_batch(None) == 0 and _run_command.check_batch("") == 0  # all in one batch
    assert _run_command.check_batch(2) == 2 and _run_command.check_batch(" 3 ") == 3
    for bad in (0, "0", -1, "-1", "two", 1.5, "1.5", True, [1]):
        with pytest.raises(_run_command.RunCommandError, match="maand_batch must be a whole number of workers"):
            _run_command.check_batch(bad)
    assert _run_command.check_delay(10) == 10 and _run_command.check_delay("0") == 0
    for bad in (-1, "soon", 0.5, True, None):
        with pytest.raises(_run_command.RunCommandError, match="maand_health_check_delay"):
            _run_command.check_delay(bad)


def test_batches_as_maand_cuts_them():
    ten = ["h%d" % i for i in range(10)]
    assert [len(b) for b in _run_command.batches(ten, 3)] == [3, 3, 3, 1]  # maand's NewBatchIterator
    assert _run_command.batches(ten, 0) == [ten] == _run_command.batches(ten, 10) == _run_command.batches(ten, 99)
    assert _run_command.batches([], 2) == []


@given(st.lists(st.integers(0, 50), unique=True, min_size=1, max_size=30), st.integers(0, 35))
def test_batches_keep_every_worker_once_in_order_and_locate_finds_each(hosts, size):
    hosts = ["h%d" % h for h in hosts]
    cut = _run_command.batches(hosts, size)
    assert [h for b in cut for h in b] == hosts
    assert all(0 < len(b) <= (size or len(hosts)) for b in cut)
    for number, batch in enumerate(cut, 1):
        where = _run_command.locate(hosts, batch, size)
        assert (where.number, where.total, list(where.hosts)) == (number, len(cut), batch)
        assert list(where.later) == hosts[hosts.index(batch[-1]) + 1:]


def test_locate_refuses_hosts_that_are_not_a_batch():
    with pytest.raises(_run_command.RunCommandError, match="is not a batch"):
        _run_command.locate(["a", "b", "c"], ["a", "c"], 2)  # a and c are in different batches


# --- a batch's report -----------------------------------------------------------------------------------

def test_run_command_report():
    outcomes = [_run_command.outcome("a", {"rc": 0, "stdout": "up 1 day", "stderr": ""}),
                _run_command.outcome("b", {"rc": 2, "stdout": "", "stderr": "no such file"}),
                _run_command.outcome("c", {"unreachable": True, "msg": "ssh: connect to host c: timed out"}),
                _run_command.outcome("d", None)]
    lines, problems = _run_command.report(outcomes, "`ls x`")
    assert lines[:5] == ["=== a (exit 0) ===", "up 1 day", "=== b (exit 2) ===", "--- stderr ---", "no such file"]
    assert lines[-1] == "run_command: ok on 1 of 4 worker(s)"
    assert problems[0] == "worker b: `ls x` exited 2"
    assert problems[1].startswith("worker c is unreachable: ssh: connect to host c: timed out; fix:")
    assert problems[2].startswith("worker d: the command did not run")
    assert len(problems) == 3


def test_a_failed_batch_names_the_workers_it_leaves_alone():
    batch = _run_command.locate(["a", "b", "c", "d"], ["a", "b"], 2)
    lines, problems = _run_command.report([_run_command.outcome("a", {"rc": 0}), _run_command.outcome("b", {"rc": 1})],
                                          "workspace/command.sh", batch)
    assert lines[-1] == "run_command: batch 1 of 2: ok on 1 of 2 worker(s)"
    assert problems == ["worker b: workspace/command.sh exited 1",
                        "stopped after batch 1 of 2 (the command failed): not run on c, d; fix what failed, then run "
                        "the rest: -e maand_workers=c,d"]
    last = _run_command.locate(["a", "b", "c", "d"], ["c", "d"], 2)
    lines, problems = _run_command.report([_run_command.outcome("c", {"rc": 0}), _run_command.outcome("d", {"rc": 0})],
                                          "`true`", last)
    assert lines[-1] == "run_command: batch 2 of 2: ok on 2 of 2 worker(s)" and problems == []


def test_run_command_outcome_of_a_host_without_a_result_is_not_run():
    assert _run_command.outcome("h", {}).status == "not run"
    assert _run_command.outcome("h", {"rc": 0, "stdout": "up"}).status == "ok"


# --- the health check after a batch -------------------------------------------------------------------------

def test_health_after_a_batch():
    first = _run_command.locate(["a", "b", "c"], ["a"], 1)
    assert _run_command.health_problem(first, {"healthy": True, "msg": "health_check: 3 ok, 0 failed"}) is None
    # the task's failed_when: false hides `failed`; `healthy` still tells
    bad = {"failed": False, "failed_when_result": False, "healthy": False, "msg": "health_check: 2 ok, 1 failed; unhealthy jobs: web",
           "checks": [{"job": "web", "worker": "b", "check": "http :8080/", "ok": False, "reason": "connection refused"},
                      {"job": "web", "worker": "a", "check": "http :8080/", "ok": True, "reason": ""}]}
    text = _run_command.health_problem(first, bad)
    assert text.splitlines() == [
        "the health check after batch 1 of 3 (a) failed: health_check: 2 ok, 1 failed; unhealthy jobs: web",
        "  web on b: http :8080/ connection refused",
        "stopped after batch 1 of 3 (unhealthy): not run on b, c; fix what failed, then run the rest: "
        "-e maand_workers=b,c"]
    last = _run_command.locate(["a", "b", "c"], ["c"], 1)
    assert "stopped after" not in _run_command.health_problem(last, bad)
    # no result at all (the task did not run), or one without a verdict (an error), is not a pass
    assert "the health check did not run" in _run_command.health_problem(last, {})
    assert "no catalog" in _run_command.health_problem(last, {"failed": False, "msg": "no catalog"})

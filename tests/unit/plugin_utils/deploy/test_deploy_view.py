"""What the maand.core.deploy callback shows (plugins/plugin_utils/deploy/view.py): the plan line,
progress lines, the verdict per allocation, its table and the final line; and one worker's --diff."""

from __future__ import annotations

import json

from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote, view as _view
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state


def row(job, worker, action, before=None, after="1.1.0", batch=None):
    return {"job": job, "worker": worker, "action": action, "from_version": before, "to_version": after,
            "batch": batch, "state": "active"}


PLAN = {
    "bucket_id": "b",
    "rows": [row("api", "h1", "restart", "1.0.0", batch="api upgrade batch 1/2"),
             row("api", "h2", "restart", "1.0.0", batch="api upgrade batch 2/2"),
             row("api", "h3", "unreachable", "1.0.0"),
             row("db", "h1", "stop", "2.0.0", "2.0.0"),
             row("old", "h2", "remove", "0.1.0", "0.1.0"),
             row("web", "h1", "skip", "1.0.0", "1.0.0"), row("web", "h2", "skip", "1.0.0", "1.0.0"),
             row("web", "h3", "skip", "1.0.0", "1.0.0")],
    "steps": [{"index": 0, "label": "reconcile", "ops": {"h1": [], "h2": []}, "gates": []},
              {"index": 1, "label": "wave 0: api upgrade batch 1/2", "ops": {"h1": []},
               "gates": [{"job": "api", "hosts": ["h1"]}]},
              {"index": 2, "label": "wave 0: api upgrade batch 2/2", "ops": {"h2": []},
               "gates": [{"job": "api", "hosts": ["h2"]}]}],
    "failures": [{"job": "api", "worker": "h3", "msg": "api@h3 not deployed: worker unreachable"}],
}


def test_plan_summary_counts_actions_and_names_gated_jobs():
    assert _view.plan_summary(PLAN) == ("plan: 2 restart, 1 stop, 1 remove, 1 unreachable, 3 unchanged; gates: api; "
                                        "1 allocation(s) cannot be deployed")
    assert _view.plan_summary({"rows": [], "steps": []}) == "plan: nothing to do"
    assert _view.plan_summary({"rows": [row("a", "h", "start")], "steps": []}) == "plan: 1 start"


def test_progress_lines():
    wait = {"kind": "gate", "state": "wait", "job": "api", "batch": "api upgrade batch 1/3", "host": "10.0.0.1",
            "check": "http :30000/health", "attempt": 4, "attempts": 30, "elapsed": 3.14}
    assert _view.progress_line(wait) == ("api upgrade batch 1/3: waiting for 10.0.0.1 http :30000/health "
                                         "(attempt 4/30, 3.1 s)")
    done = {"kind": "gate", "state": "pass", "job": "api", "batch": "api upgrade batch 1/3", "hosts": ["10.0.0.1"],
            "elapsed": 3.4, "attempts": 5}
    assert _view.progress_line(done) == "api upgrade batch 1/3: health gate passed on 10.0.0.1 (3.4 s)"
    assert "FAILED on 10.0.0.1 after 3.4 s (5 attempts)" in _view.progress_line(dict(done, state="fail"))
    assert _view.progress_line({"kind": "say", "msg": "hook: x"}) == "hook: x"
    assert _view.progress_line({"kind": "other"}) is None


def test_step_line_tells_ops_from_promotions():
    step = PLAN["steps"][2]
    assert _view.step_line(step, ["h1", "h2"]) == "wave 0: api upgrade batch 2/2: applying on h2; promoting on h1"
    assert _view.step_line(None, ["h2"]) == "final promotions: promoting on h2"
    assert _view.step_line(step, []) == "wave 0: api upgrade batch 2/2: nothing to apply"
    many = ["h%d" % i for i in range(7)]
    assert _view.step_line({"label": "x", "ops": {h: [] for h in many}}, many).endswith("h3 and 3 more")


def test_verdict_per_allocation_from_the_run_state():
    state = _run_state.RunState(run_id="r", bucket_id="b")
    state.done = [{"id": "api@h1"}, {"id": "db@h1"}, {"id": "old@h2"}, {"id": "api@h2"}]
    state.failed_ops = {"api@h2": "gate"}
    rows = _view.verdict(PLAN, state.done, state.failed_ops, {("api", "h1"): 3.42, ("api", "h2"): 15.0})
    got = {(v.job, v.worker): (v.result, v.gate_seconds, v.before, v.after) for v in rows}
    assert got[("api", "h1")] == ("restarted", 3.42, "1.0.0", "1.1.0")
    assert got[("api", "h2")] == ("gate failed", 15.0, "1.0.0", "1.1.0")
    assert got[("api", "h3")][0] == "unreachable"
    assert got[("db", "h1")][:1] == ("stopped",) and got[("db", "h1")][3] == "-"
    assert got[("old", "h2")][0] == "removed"
    assert got[("web", "h3")][0] == "unchanged"
    assert _view.done_line(rows) == "deploy done: 1 restarted, 1 stopped, 1 removed, 1 gate failed, 1 unreachable, 3 unchanged"
    assert _view.done_line(rows, problems=4).endswith("(4 problem(s), see above)")
    assert _view.worker_results(rows) == {"h1": "ok", "h2": "failed", "h3": "unreachable"}
    assert _view.workers_line(rows) == "workers: 1 ok, 1 failed (h2), 1 unreachable (h3)"


def test_ops_never_run_are_not_run_and_unreachable_ops_say_so():
    rows = _view.verdict(PLAN, [], {"api@h1": "unreachable"})
    got = {(v.job, v.worker): v.result for v in rows}
    assert got[("api", "h1")] == "unreachable"
    assert got[("api", "h2")] == "not run"
    assert _view.worker_results(rows)["h1"] == "unreachable"
    assert _view.worker_results(rows)["h2"] == "ok"  # nothing failed there: its job stopped elsewhere


def test_verdict_table_aligns_and_folds_unchanged_rows():
    rows = _view.verdict(PLAN, [{"id": "api@h1"}], {"api@h2": "failed"}, {("api", "h1"): 3.42})
    lines = _view.verdict_table(rows)
    assert lines[0].split() == ["JOB", "WORKER", "ACTION", "RESULT", "GATE", "VERSION"]
    assert lines[1].split() == ["api", "h1", "restart", "restarted", "3.4", "s", "1.0.0", "->", "1.1.0"]
    assert "failed" in lines[2] and lines[2].endswith("1.0.0 (1.1.0 not deployed)")
    assert [l.split()[:5] for l in lines if l.startswith("web")] == [["web", "(3", "workers)", "skip", "unchanged"]]
    assert len({l.index("ACTION") if "ACTION" in l else None for l in lines[:1]}) == 1
    col = lines[0].index("RESULT")
    assert all(l[col - 2:col] == "  " for l in lines[1:])
    assert _view.verdict_table([]) == []


def test_verdict_round_trips_through_a_task_result():
    rows = _view.verdict(PLAN, [{"id": "api@h1"}], {})
    assert [_view.Verdict(**v.to_dict()) for v in rows] == rows


def test_a_rollback_reads_rolled_back_and_a_revert_names_both_versions():
    plan = {"rows": [{"job": "api", "worker": "h1", "action": "rollback", "from_version": "1.2.0", "to_version": "1.1.0"},
                     {"job": "db", "worker": "h1", "action": "restart", "from_version": "1.0.0", "to_version": "1.1.0"},
                     {"job": "db", "worker": "h2", "action": "restart", "from_version": "1.0.0", "to_version": "1.1.0"}]}
    rows = _view.verdict(plan, [{"id": "api@h1"}, {"id": "db@h1"}], {"db@h1": "reverted"})
    table = _view.verdict_table(rows)
    assert table[1].split()[3:] == ["rolled", "back", "-", "1.2.0", "->", "1.1.0"]
    assert table[2].split()[3:] == ["reverted", "-", "1.0.0", "(1.1.0", "reverted)"]
    assert _view.done_line(rows) == "deploy done: 1 rolled back, 1 reverted, 1 not run"
    assert _view.worker_results(rows) == {"h1": "failed", "h2": "ok"}


# --- --diff on one worker (view.host_diff, the deploy_diff action's core) over a fake shell ----------------

class FilesShell:
    """A worker whose agent answers the files command with `answer` (or whose connection raises `error`)."""

    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.calls = answer, error, []

    def exec(self, cmd, stdin=None):
        self.calls.append((cmd, stdin))
        if self.error:
            raise self.error
        return 0, json.dumps(self.answer), ""


SPEC = {"hosts": ["h1"], "wanted": {"h1": {"api": ["a.conf"]}},
        "notes": {"h1": ["api/key.pem: secret-bearing, not shown"]},
        "after": {"h1": {"api": {"a.conf": "k1"}}}, "blobs": {"k1": {"text": "port=2\n"}},
        "promoted": {"h1": {"api": {"a.conf": "d1"}}}, "previous": {}, "live": {}}


def test_a_worker_s_diff_reads_its_promoted_copies_in_one_round_trip():
    shell = FilesShell({"files": {"api": {"a.conf": {"text": "port=1\n", "digest": "d1"}}}})
    shown = _view.host_diff(SPEC, "h1", shell, "python3", "bid")
    assert shell.calls == [(_remote.files_command("python3", "bid", {"current": {"api": ["a.conf"]}, "previous": {},
                                                                     "live": {}}), _remote.agent_source())]
    result = shown.as_result()
    assert result["changed"] and result["files"] == 1 and "warnings" not in result
    assert "-port=1\n+port=2\n" in result["diff"][0]["prepared"]
    assert result["diff"][1] == {"prepared": "api/key.pem: secret-bearing, not shown\n"}


def test_a_worker_that_cannot_be_read_is_a_warning_and_its_side_shows_as_absent():
    shown = _view.host_diff(SPEC, "h1", FilesShell(error=OSError("connection reset")), "python3", "bid")
    assert shown.warning == "--diff: cannot read the promoted files of h1: OSError: connection reset"
    assert "/dev/null" in shown.diffs[0]["prepared"] and shown.as_result()["warnings"] == [shown.warning]


def test_a_rollback_diff_sets_the_workers_copy_against_its_previous_one():
    spec = dict(SPEC, notes={}, after={}, previous={"h1": {"api": {"a.conf": "d0"}}})
    shell = FilesShell({"files": {"api": {"a.conf": {"text": "v=2\n", "digest": "d1"}}},
                        "previous": {"api": {"a.conf": {"text": "v=1\n", "digest": "d0"}}}})
    shown = _view.host_diff(spec, "h1", shell, "python3", "bid")
    assert "-v=2\n+v=1\n" in shown.diffs[0]["prepared"] and "(previous)" in shown.diffs[0]["prepared"]


def test_a_worker_with_only_notes_is_not_asked():
    shell = FilesShell()
    shown = _view.host_diff(dict(SPEC, wanted={}), "h1", shell, "python3", "bid")
    assert shell.calls == [] and shown.as_result() == {"changed": True, "files": 0, "diff": [
        {"prepared": "api/key.pem: secret-bearing, not shown\n"}]}
    assert _view.host_diff(SPEC, "h2", shell, "python3", "bid").as_result() == {"changed": False, "files": 0}


def test_step_line_from_the_ops_that_run_names_each_batch_s_hosts():
    step = {"label": "wave 0: api upgrade batch 2/2; web start batch 1/1", "ops": {}}
    ran = {"h1": [{"job": "api", "revert": False}, {"job": None, "revert": False}],
           "h2": [{"job": "web", "revert": False}], "h3": [{"job": None, "revert": False}], "h4": []}
    assert _view.step_line(step, ["h1", "h2", "h3", "h4"], ran) == (
        "wave 0: api upgrade batch 2/2: applying on h1; web start batch 1/1: applying on h2; "
        "worker metadata on h3; promoting on h4")


def test_a_revert_slot_shows_only_when_its_revert_runs():
    step = {"label": "wave 0: api revert (if canary batch 1/1 fails)", "ops": {"h1": [{"job": "api", "revert_of": 1}]}}
    # the canary passed: the slot only promotes it, and says no word of a revert
    assert _view.step_line(step, ["h1"], {"h1": []}) == "wave 0: promoting on h1"
    assert _view.step_line(step, ["h1"], {"h1": [{"job": "api", "revert": True}]}) == (
        "wave 0: api revert (auto_revert): applying on h1")

"""Rollback (issue 14 item 4): the worker keeps the previous promoted tree; the plan rolls it back."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job

HOSTS = ["h1", "h2"]
V1 = {"Makefile": "m1", "conf/a.conf": "c1"}
V2 = {"Makefile": "m1", "conf/a.conf": "c2"}


# --- worker side -----------------------------------------------------------------------------------

MAKEFILE = "start:\n\techo start $$NEW_VERSION >> logs/ev\nrestart:\n\techo restart $$CURRENT_VERSION $$NEW_VERSION >> logs/ev\n"


def _rec(version, text):
    return {"format": 1, "job": "api", "version": version, "hash": "h-" + text, "running": True,
            "files": {"Makefile": "m", "conf/a.conf": text, ".maand-env/DB": "e"}}


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "bid"
    job_dir = r / "jobs" / "api"
    for sub in ("data", "logs", "bin", "conf"):
        (job_dir / sub).mkdir(parents=True)
    (job_dir / "Makefile").write_text(MAKEFILE)
    (job_dir / "data" / "db").write_text("precious")
    (job_dir / "bin" / "tool").write_text("worker's")
    return r


def _ship(root, text, version):
    """What a deploy does: rsync the tree (here: write it), make, promote."""
    (root / "jobs/api/conf/a.conf").write_text(text)
    (root / "jobs/api/junk.pid").write_text("1")  # runtime junk outside data/: not part of the record
    ans = _agent.run_step({"root": str(root), "keep": ["data", "logs"], "ops": [{
        "id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "restart", "env": {},
        "promote_now": True, "record": _rec(version, text)}]})
    assert ans["ops"][0]["ok"], ans


def test_promotions_keep_the_current_and_one_previous_tree(root):
    _ship(root, "v1", "1.0.0")
    hist = root / "history" / "api"
    assert (hist / "current/files/conf/a.conf").read_text() == "v1"
    assert not (hist / "previous").exists()
    assert not (hist / "current/files/junk.pid").exists() and not (hist / "current/files/data").exists()
    _ship(root, "v2", "2.0.0")
    _ship(root, "v3", "3.0.0")
    assert (hist / "current/files/conf/a.conf").read_text() == "v3"
    assert (hist / "previous/files/conf/a.conf").read_text() == "v2"  # only one previous
    assert json.loads((hist / "previous/record.json").read_text())["version"] == "2.0.0"
    assert sorted(p.name for p in hist.iterdir()) == ["current", "previous"]
    state = _agent.read_state(str(root))
    assert state["previous"]["api"]["version"] == "2.0.0"


def test_history_keeps_symlinks_and_modes(root):
    import os
    tree = root / "jobs/api"
    (tree / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(tree / "run.sh", 0o755)
    os.symlink("conf", tree / "etc")
    os.symlink("run.sh", tree / "start")
    record = dict(_rec("1.0.0", "v1"), files={"run.sh": "a", "etc": "b", "start": "c", "Makefile": "d"})
    _agent.keep_history(str(root), "api", record)
    _agent.keep_history(str(root), "api", dict(record, version="2.0.0"))
    (tree / "run.sh").unlink()
    _agent.restore_previous(str(root), "api", ("data", "logs"))
    assert os.stat(tree / "run.sh").st_mode & 0o111 and os.readlink(tree / "etc") == "conf"
    assert os.readlink(tree / "start") == "run.sh" and (tree / "data/db").read_text() == "precious"


def test_same_version_promotion_only_updates_the_record(root):
    _ship(root, "v1", "1.0.0")
    _ship(root, "v2", "2.0.0")
    _agent.promote(_agent.Step({"root": str(root)}), "api", dict(_rec("2.0.0", "v2"), running=False))
    assert json.loads((root / "history/api/current/record.json").read_text())["running"] is False
    assert json.loads((root / "history/api/previous/record.json").read_text())["version"] == "1.0.0"


def test_rollback_op_restores_the_previous_tree_keeps_runtime_dirs_and_swaps_history(root):
    _ship(root, "v1", "1.0.0")
    _ship(root, "v2", "2.0.0")
    (root / "jobs/api/conf/extra.conf").write_text("only in v2")
    ans = _agent.run_step({"root": str(root), "keep": ["data", "logs"], "ops": [{
        "id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "restart", "restore": True,
        "env": {"CURRENT_VERSION": "2.0.0", "NEW_VERSION": "1.0.0"}, "promote_now": False,
        "record": dict(_rec("1.0.0", "v1"), rolled_back_from="2.0.0")}]})
    out = ans["ops"][0]
    assert out["ok"] and out["steps"] == ["restore previous tree", "make restart"], out
    tree = root / "jobs/api"
    assert (tree / "conf/a.conf").read_text() == "v1" and not (tree / "conf/extra.conf").exists()
    assert (tree / "data/db").read_text() == "precious" and (tree / "bin/tool").read_text() == "worker's"
    assert (tree / "logs/ev").read_text().splitlines()[-1] == "restart 2.0.0 1.0.0"
    assert (root / "deploy/api.rollback").exists()  # gated: not promoted yet
    assert _agent.read_state(str(root))["rollback_pending"] == ["api"]
    promotion = {"id": "api@h", "job": "api", "record": dict(_rec("1.0.0", "v1"), rolled_back_from="2.0.0")}
    _agent.run_step({"root": str(root), "promote": [promotion]})
    assert not (root / "deploy/api.rollback").exists()
    assert json.loads((root / "history/api/current/record.json").read_text())["version"] == "1.0.0"
    assert json.loads((root / "history/api/previous/record.json").read_text())["version"] == "2.0.0"
    assert (root / "history/api/previous/files/conf/a.conf").read_text() == "v2"


def test_rollback_without_a_previous_tree_fails_the_op_and_changes_nothing(root):
    _ship(root, "v1", "1.0.0")
    ans = _agent.run_step({"root": str(root), "ops": [{"id": "api@h", "kind": "run", "job": "api", "host": "h",
                                                       "target": "restart", "restore": True, "promote_now": True,
                                                       "record": _rec("0.9.0", "v0")}]})
    out = ans["ops"][0]
    assert not out["ok"] and out["reason"] == "no_previous" and "nothing to roll back to" in out["msg"]
    assert (root / "jobs/api/conf/a.conf").read_text() == "v1"
    assert json.loads((root / "deploy/api.json").read_text())["version"] == "1.0.0"


def test_remove_drops_the_history_and_read_files_prefers_the_recorded_copy(root):
    _ship(root, "v1", "1.0.0")
    (root / "jobs/api/conf/a.conf").write_text("edited by hand")
    got = _agent.read_files(str(root), {"api": ["conf/a.conf", "nope", "../../etc/passwd"]})
    files = got["files"]["api"]
    assert sorted(files) == ["conf/a.conf", "nope"] and files["nope"] == {"missing": True}
    assert files["conf/a.conf"]["text"] == "v1" and len(files["conf/a.conf"]["digest"]) == 64
    _agent.run_step({"root": str(root), "ops": [{"id": "api@h", "kind": "remove", "job": "api", "host": "h"}]})
    assert not (root / "history" / "api").exists()
    assert sorted(p.name for p in (root / "jobs/api").iterdir()) == ["data", "logs"]


def test_main_files_command(root, capsys):
    _ship(root, "v1", "1.0.0")
    _ship(root, "v2", "2.0.0")
    _agent.main(["files", str(root), json.dumps({"current": {"api": ["conf/a.conf"]}, "previous": {"api": ["conf/a.conf"]}})])
    answer = json.loads(capsys.readouterr().out)
    assert answer["files"]["api"]["conf/a.conf"]["text"] == "v2"
    assert answer["previous"]["api"]["conf/a.conf"]["text"] == "v1"  # what a rollback puts back
    (root / "jobs/api/conf/a.conf").write_text("v3 (a failed attempt)")   # the job folder, not the promoted copy
    _agent.main(["files", str(root), json.dumps({"current": {"api": ["conf/a.conf"]}, "live": {"api": ["conf/a.conf"]}})])
    answer = json.loads(capsys.readouterr().out)
    assert answer["files"]["api"]["conf/a.conf"]["text"] == "v2"                       # promoted: what goes back
    assert answer["live"]["api"]["conf/a.conf"]["text"] == "v3 (a failed attempt)"     # what it replaces
    assert "previous" not in answer
    _agent.main(["files", str(root), "[]"])
    assert "bad files request" in json.loads(capsys.readouterr().out)["msg"]
    _agent.main(["files", str(root), "{not json"])
    assert "bad files request" in json.loads(capsys.readouterr().out)["msg"]


# --- the plan --------------------------------------------------------------------------------------

def _states_with_previous(cat, hosts, previous=True):
    st = _settle(cat, content("api", "web", files=V2), hosts)
    for h in hosts:
        st[h]["deployed"]["api"]["version"] = "1.2.0"
        if previous:
            st[h]["previous"] = {"api": _plan.state_record("api", "api-%s" % h, content("api", files=V1)["api"],
                                                           "1.1.0", True, 1)}
    return st


def _cat():
    return catalog([job("api", version="1.2.0", max_concurrent_upgrades=1), job("web"), job("old", removed=True)],
                   [("api", h, "active") for h in HOSTS] + [("web", "h1", "active")], workers=HOSTS)


def test_rollback_plans_the_previous_version_through_rolling_batches():
    cat = _cat()
    plan = _plan.compute_plan(cat, content("api", "web", files=V2), _states_with_previous(cat, HOSTS), HOSTS,
                              {"rollback": "api"})
    assert not plan["errors"], plan["errors"]
    rows = {(r["job"], r["worker"]): r for r in plan["rows"]}
    assert set(rows) == {("api", "h1"), ("api", "h2")}  # only the rolled back job
    for h in HOSTS:
        assert rows[("api", h)]["action"] == "rollback"
        assert rows[("api", h)]["reason"].startswith("rollback: api 1.2.0 -> 1.1.0")
        assert "the next deploy rolls forward again" in rows[("api", h)]["reason"]
        assert rows[("api", h)]["hash"] == content("api", files=V1)["api"]["hash"]
    steps = [s for s in plan["steps"] if s["wave"] is not None]
    assert [s["label"] for s in steps] == ["wave 0: api rollback batch 1/2", "wave 0: api rollback batch 2/2"]
    meta, op = steps[0]["ops"]["h1"]
    assert meta["kind"] == "meta" and op["restore"] and not op["sync"] and op["target"] == "restart" and op["action"] == "rollback"
    assert op["env"]["CURRENT_VERSION"] == "1.2.0" and op["env"]["NEW_VERSION"] == "1.1.0"
    assert op["record"]["version"] == "1.1.0" and op["record"]["rolled_back_from"] == "1.2.0"
    assert op["record"]["update_seq"] == plan["update_seq"]
    assert any("rollback: api 1.2.0 -> 1.1.0" in line for line in plan["lines"])
    assert rows[("api", "h1")]["paths"] == ["conf/a.conf"]  # what goes back (shown by --diff)
    assert "options: jobs=api rollback=api" in plan["lines"]


def test_rollback_is_refused_when_a_worker_has_no_previous_version():
    cat = _cat()
    st = _states_with_previous(cat, HOSTS)
    del st["h2"]["previous"]
    plan = _plan.compute_plan(cat, content("api", "web", files=V2), st, HOSTS, {"rollback": ["api"]})
    assert plan["steps"] == [] and not plan["has_work"]
    assert len(plan["errors"]) == 1 and plan["errors"][0].startswith(
        "maand_rollback: api@h2 has no previous version to roll back to")


@pytest.mark.parametrize("opts,msg", [
    ({"rollback": "apii"}, "maand_rollback: unknown job(s) apii (did you mean \"api\"?)"),
    ({"rollback": "api", "force": True}, "maand_rollback cannot be combined with maand_force"),
    ({"rollback": "api", "jobs": "web"}, "maand_rollback names api but maand_jobs names web"),
    ({"rollback": "old"}, "maand_rollback: job(s) old left the workspace"),
])
def test_rollback_option_errors(opts, msg):
    cat = _cat()
    plan = _plan.compute_plan(cat, content("api", "web", files=V2), _states_with_previous(cat, HOSTS), HOSTS, opts)
    assert any(e.startswith(msg) for e in plan["errors"]), plan["errors"]


def test_after_a_rollback_the_next_deploy_rolls_forward_and_says_so():
    cat = _cat()
    st = _states_with_previous(cat, HOSTS)
    for h in HOSTS:
        st[h]["deployed"]["api"] = dict(st[h]["previous"]["api"], rolled_back_from="1.2.0")
    plan = _plan.compute_plan(cat, content("api", "web", files=V2), st, HOSTS)
    row = next(r for r in plan["rows"] if r["job"] == "api")
    assert row["action"] == "restart"
    assert "version 1.1.0 -> 1.2.0" in row["reason"] and "roll forward after the rollback from 1.2.0" in row["reason"]


def test_an_unpromoted_rollback_resyncs_the_workspace_tree():
    cat = _cat()
    st = _states_with_previous(cat, HOSTS)
    st["h1"]["rollback_pending"] = ["api"]
    plan = _plan.compute_plan(cat, content("api", "web", files=V2), st, HOSTS)
    rows = {(r["job"], r["worker"]): r for r in plan["rows"]}
    assert rows[("api", "h1")]["action"] == "restart" and rows[("api", "h2")]["action"] == "skip"
    assert rows[("api", "h1")]["reason"].startswith("a rollback was not promoted")
    op = next(o for s in plan["steps"] for o in s["ops"].get("h1", []) if o["id"] == "api@h1")
    assert op["sync"] and not op.get("restore")


def test_the_kept_tree_is_the_shipped_one_not_what_the_start_changed(root):
    """history/<job>/current is copied before make: a start that edits or deletes its own shipped
    files (a config it consumes, a one-shot script) does not change what a later rollback restores."""
    (root / "jobs/api/Makefile").write_text(
        MAKEFILE.replace("restart:\n", "restart:\n\trm -f conf/once.sh\n\techo changed > conf/a.conf\n"))
    (root / "jobs/api/conf/once.sh").write_text("one-shot\n")
    record = dict(_rec("1.0.0", "v1"), files={"Makefile": "m", "conf/a.conf": "v1", "conf/once.sh": "o"})
    (root / "jobs/api/conf/a.conf").write_text("v1")
    ans = _agent.run_step({"root": str(root), "keep": ["data", "logs"], "ops": [{
        "id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "restart", "env": {},
        "promote_now": False, "record": record}]})
    assert ans["ops"][0]["ok"], ans
    assert not (root / "jobs/api/conf/once.sh").exists()  # the start consumed it
    hist = root / "history/api"
    assert (hist / "incoming/files/conf/once.sh").read_text() == "one-shot\n"  # kept before make, until promoted
    _agent.run_step({"root": str(root), "promote": [{"id": "api@h", "job": "api", "record": record}]})
    assert sorted(p.name for p in hist.iterdir()) == ["current"]
    assert (hist / "current/files/conf/once.sh").read_text() == "one-shot\n"
    assert (hist / "current/files/conf/a.conf").read_text() == "v1"
    _ship(root, "v2", "2.0.0")
    _agent.restore_previous(str(root), "api", ("data", "logs"))
    assert (root / "jobs/api/conf/once.sh").read_text() == "one-shot\n" and (root / "jobs/api/conf/a.conf").read_text() == "v1"


def test_an_incoming_copy_of_another_version_is_not_promoted(root):
    _ship(root, "v1", "1.0.0")
    _agent.keep_incoming(str(root), "api", _rec("9.9.9", "v9"))  # a start of 9.9.9 that failed its gate
    (root / "jobs/api/conf/a.conf").write_text("v2")
    _agent.keep_history(str(root), "api", _rec("2.0.0", "v2"))  # promoted by another path: the tree as it is
    hist = root / "history/api"
    assert sorted(p.name for p in hist.iterdir()) == ["current", "previous"]
    assert (hist / "current/files/conf/a.conf").read_text() == "v2"
    assert json.loads((hist / "current/record.json").read_text())["version"] == "2.0.0"


# --- issue 22: a failed attempt, restored from the promoted copy ---------------------------------------

def _attempt(root, text, version, ok=True, makefile=None):
    """A gated upgrade whose gate fails: shipped and made, never promoted."""
    (root / "jobs/api/conf/a.conf").write_text(text)
    if makefile is not None:
        (root / "jobs/api/Makefile").write_text(makefile)
    ans = _agent.run_step({"root": str(root), "keep": ["data", "logs"], "ops": [{
        "id": "api@h", "kind": "run", "job": "api", "host": "h", "target": "restart", "env": {},
        "promote_now": False, "record": _rec(version, text)}]})
    assert ans["ops"][0]["ok"] is ok, ans


def test_a_failed_attempt_is_reported_with_its_make_outcome_and_a_restore_brings_the_promoted_tree_back(root):
    _ship(root, "v1", "1.0.0")
    _attempt(root, "v2", "2.0.0")
    state = _agent.read_state(str(root))
    assert state["attempts"]["api"]["version"] == "2.0.0" and state["kept"] == ["api"]
    assert state["attempts"]["api"]["attempt"] == {"target": "restart", "ok": True}  # make ran: the gate failed
    status = _agent.run_step({"root": str(root), "ops": [{"id": "api@h", "kind": "status", "job": "api", "host": "h"}]})
    assert status["ops"][0]["unpromoted"] == "2.0.0" and status["ops"][0]["version"] == "1.0.0"
    record = dict(_rec("1.0.0", "v1"), reverted_from="2.0.0")
    ans = _agent.run_step({"root": str(root), "keep": ["data", "logs"], "ops": [{
        "id": "api@h/revert", "kind": "run", "job": "api", "host": "h", "target": "restart", "restore": "current",
        "env": {"CURRENT_VERSION": "2.0.0", "NEW_VERSION": "1.0.0"}, "promote_now": False, "record": record}]})
    out = ans["ops"][0]
    assert out["ok"] and out["steps"] == ["restore promoted tree", "make restart"], out
    assert (root / "jobs/api/conf/a.conf").read_text() == "v1" and (root / "jobs/api/data/db").read_text() == "precious"
    _agent.run_step({"root": str(root), "promote": [{"id": "api@h/revert", "job": "api", "record": record}]})
    state = _agent.read_state(str(root))
    assert "attempts" not in state and "rollback_pending" not in state  # promoted: the attempt is over
    assert state["deployed"]["api"]["reverted_from"] == "2.0.0"
    assert not (root / "history/api/previous").exists()  # same version: current only gets the record
    status = _agent.run_step({"root": str(root), "ops": [{"id": "api@h", "kind": "status", "job": "api", "host": "h"}]})
    assert status["ops"][0]["reverted_from"] == "2.0.0" and "unpromoted" not in status["ops"][0]


def test_an_attempt_whose_make_failed_says_so(root):
    _ship(root, "v1", "1.0.0")
    _attempt(root, "v2", "2.0.0", ok=False, makefile="restart:\n\texit 3\n")
    assert _agent.read_state(str(root))["attempts"]["api"]["attempt"] == {"target": "restart", "ok": False}


def _failed_upgrade_states(kept=True):
    cat = catalog([job("api", version="2.0.0")], [("api", h, "active") for h in HOSTS + ["h3"]])
    st = _settle(cat, content("api", files=V1), HOSTS + ["h3"])
    for h in st:
        st[h]["deployed"]["api"]["version"] = "1.0.0"
        if kept:
            st[h]["kept"] = ["api"]
    st["h1"]["attempts"] = {"api": dict(_plan.state_record("api", "api-h1", content("api", files=V2)["api"], "2.0.0",
                                                           True, 2), attempt={"target": "restart", "ok": False})}
    return cat, st


def test_rollback_after_a_failed_attempt_restores_the_promoted_tree_there_and_leaves_the_others_alone():
    cat, st = _failed_upgrade_states()
    plan = _plan.compute_plan(cat, content("api", files=V2), st, HOSTS + ["h3"], {"rollback": "api"})
    assert plan["errors"] == []
    rows = {r["worker"]: r for r in plan["rows"]}
    assert rows["h1"]["action"] == "rollback" and rows["h1"]["reason"].startswith(
        "rollback: restore 1.0.0 (make restart of 2.0.0 failed)")
    assert (rows["h1"]["from_version"], rows["h1"]["to_version"]) == ("2.0.0", "1.0.0")
    assert rows["h1"]["paths"] == ["conf/a.conf"]
    for h in ("h2", "h3"):
        assert rows[h]["action"] == "skip" and rows[h]["reason"] == "rollback: left alone (runs 1.0.0; 2.0.0 never reached it)"
    ops = [o for s in plan["steps"] for os_ in s["ops"].values() for o in os_ if o["kind"] == "run"]
    assert [(o["id"], o["restore"], o["target"], o["record"]["version"], o["record"]["reverted_from"]) for o in ops] == [
        ("api@h1", "current", "restart", "1.0.0", "2.0.0")]
    assert ops[0]["env"]["CURRENT_VERSION"] == "2.0.0" and ops[0]["env"]["NEW_VERSION"] == "1.0.0"


def test_rollback_after_a_failed_attempt_needs_the_promoted_copy():
    cat, st = _failed_upgrade_states(kept=False)
    plan = _plan.compute_plan(cat, content("api", files=V2), st, HOSTS + ["h3"], {"rollback": "api"})
    assert len(plan["errors"]) == 1 and plan["errors"][0].startswith(
        "maand_rollback: api@h1: make restart of 2.0.0 failed, but the worker keeps no copy of the promoted 1.0.0 tree")


def test_the_next_deploy_after_a_revert_rolls_forward_and_says_why():
    cat, st = _failed_upgrade_states()
    st["h1"].pop("attempts")
    st["h1"]["deployed"]["api"]["reverted_from"] = "2.0.0"
    plan = _plan.compute_plan(cat, content("api", files=V2), st, HOSTS + ["h3"])
    row = next(r for r in plan["rows"] if r["worker"] == "h1")
    assert row["action"] == "restart" and row["reason"].endswith("2.0.0 was reverted here before")

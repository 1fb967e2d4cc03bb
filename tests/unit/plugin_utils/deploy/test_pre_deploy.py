"""pre_deploy hooks at each job's wave (plugins/plugin_utils/deploy/pre_deploy.py) through the real step driver
(deploy/run.py): the order against the earlier waves' gates, failures before a wave, the plan patched with
the files the hooks changed."""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.deploy import pre_deploy as _pre_deploy
from ansible_collections.maand.core.plugins.plugin_utils.deploy import records as _records
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state
from tests.unit.plugin_utils.deploy.test_deploy_run import answer_all
from tests.unit.plugin_utils.deploy.test_run_state import PLAN


def with_hooks(plan, jobs, waves, rendered=None, pinned=False, globs=None):
    """PLAN with a pre_deploy record: jobs (hook order), their waves, what the plan rendered."""
    plan = copy.deepcopy(plan)
    plan["job_waves"] = dict(plan["job_waves"], **waves)
    plan[_pre_deploy.KEY] = _pre_deploy.entry(jobs, plan["job_waves"], {j: {"allocations": {h: {"hash": x} for h, x in r.items()}}
                                                                        for j, r in (rendered or {}).items()},
                                              {}, 3, pinned, globs or {}).to_json()
    return plan


class Recorder:
    """Hooks, renders and gates of a run, in the order they happen (one list)."""

    def __init__(self, failing=(), renders=None):
        self.events, self.failing, self.renders = [], set(failing), renders or {}

    def gate(self, g):
        self.events.append("gate %s %s" % (g["job"], ",".join(g["hosts"])))
        return []

    def run_hooks(self, job):
        self.events.append("pre_deploy %s" % job)
        return ["job %s command command_x (event pre_deploy) on h1 failed: exit status 1" % job] if job in self.failing else []

    def render(self, job):
        self.events.append("render %s" % job)
        return self.renders.get(job, ({}, []))

    def after_results(self, step, ok_ops):
        return []

    def before(self, plan, state, step):
        messages, changes = _pre_deploy.run_due(plan, state, step, self.run_hooks, self.render)
        if step is not None or messages:
            self.events.append("requests %s" % (step["index"] if step else "final"))
        return messages, changes


def drive(run_dir, plan, rec):
    """Every step as the role runs them; the failures each step reported."""
    failures = []
    for seg in _run.segments(plan, 4):
        key = _run.step_key(seg["step"])
        hosts, new = _run.advance(_run.RunContext.read(run_dir), key, rec)
        failures += new
        answer_all(run_dir, key, hosts)
    plan, state, report = _run.finish(_run.RunContext.read(run_dir), rec)
    return failures, state, report


@pytest.fixture
def bucket(tmp_path):
    (tmp_path / "data").mkdir()
    return str(tmp_path)


def test_each_wave_runs_its_hooks_after_the_earlier_waves_gates_and_before_its_first_step(bucket):
    # api, db (wave 0), web (wave 1), cron (wave 2: nothing to roll out, no step of its own)
    plan = with_hooks(PLAN, ["db", "api", "web", "cron"], {"cron": 2})
    rec = Recorder()
    failures, state, report = drive(_run.new_run(bucket, plan), plan, rec)
    assert not report.failed and failures == []
    ev = rec.events
    # wave 0's hooks (in hook order) before step 1, none before the reconcile step 0
    assert ev[:4] == ["requests 0", "pre_deploy db", "pre_deploy api", "requests 1"]
    # web (wave 1) after every gate of wave 0 (api's last batch in step 2), before step 3's requests
    assert ev.index("pre_deploy web") > ev.index("gate api h2") and ev.index("pre_deploy web") < ev.index("requests 3")
    # cron (wave 2, no steps) after the last wave's step, in the final pass; every wave ran once
    assert ev.index("pre_deploy cron") > ev.index("requests 3") and ev.count("pre_deploy cron") == 1
    assert sorted(state.pre_deploy_waves) == [0, 1, 2]


def test_a_failing_hook_stops_its_job_before_its_wave_keeps_earlier_waves_and_blocks_later_ones(bucket):
    plan = with_hooks(PLAN, ["db", "web", "cron"], {"cron": 2})
    rec = Recorder(failing={"web"})
    run_dir = _run.new_run(bucket, plan)
    failures, state, report = drive(run_dir, plan, rec)
    assert report.failed
    msg = "\n".join(failures)
    assert "job web: pre_deploy failed at wave 1" in msg and "command_x (event pre_deploy) on h1" in msg
    assert "Fix:" in msg and "deploy again" in msg
    sent = [json.loads(open(os.path.join(run_dir, "requests", "3", n)).read()) for n in os.listdir(
        os.path.join(run_dir, "requests", "3"))]
    assert sent and all(r["ops"] == [] for r in sent)                      # web's step: only wave 0's promotions
    assert "pre_deploy cron" not in rec.events                             # a later wave: blocked
    done = {d["id"] for d in report.done}
    assert {"api@h1", "api@h2", "db@h2"} <= done and not {"web@h1", "web@h3"} & done   # wave 0 kept
    assert "web" in state.blocked and "cron" in state.blocked


def test_a_failing_hook_of_a_wave_zero_job_leaves_the_other_jobs_of_the_wave_going(bucket):
    plan = with_hooks(PLAN, ["db", "api"], {})
    rec = Recorder(failing={"db"})
    run_dir = _run.new_run(bucket, plan)
    failures, state, report = drive(run_dir, plan, rec)
    req = json.loads(open(os.path.join(run_dir, "requests", "1", "h1.json")).read())
    assert [o["id"] for o in req["ops"]] == ["api@h1"]
    assert not os.path.exists(os.path.join(run_dir, "requests", "1", "h2.json"))  # db@h2 never sent
    assert "pre_deploy api" in rec.events and report.failed and "web" in state.blocked


def rendered_plan(action="start", pinned=False, globs=None, skip_h2=False):
    plan = with_hooks(PLAN, ["api"], {}, rendered={"api": {"h1": "old1", "h2": "old2"}}, pinned=pinned, globs=globs)
    for step in plan["steps"]:
        for ops in step["ops"].values():
            for op in ops:
                if op["job"] == "api":
                    op.update(action=action, sync=False, record={"job": "api", "hash": "old", "files": {"a.conf": "1"}})
    if skip_h2:
        plan["steps"][2]["ops"] = {}
    plan["rows"] = [{"job": "api", "worker": h, "action": action, "hash": "old", "paths": ["Makefile"]}
                    for h in ("h1", "h2")]
    return plan


NEW = {"h1": {"hash": "new1", "files": {"a.conf": "2"}}, "h2": {"hash": "old2", "files": {"a.conf": "1"}}}


def test_changed_files_ship_with_the_planned_rollout():
    plan = rendered_plan()
    problems, ops = _pre_deploy.apply(plan, "api", NEW)
    assert problems == [] and [o.op_id for o in ops] == ["api@h1"]          # h2 rendered as planned: untouched
    plan = _plan.rerendered(plan, ops)                                       # the run's new plan
    op = plan["steps"][1]["ops"]["h1"][0]
    assert op["sync"] and op["record"] == {"job": "api", "hash": "new1", "files": {"a.conf": "2"}}
    assert plan["rows"][0]["hash"] == "new1" and plan["rows"][0]["paths"] == ["Makefile", "a.conf"]
    assert plan["rows"][1]["hash"] == "old" and plan["steps"][2]["ops"]["h2"][0]["sync"] is False
    assert _pre_deploy.apply(plan, "api", NEW) == ([], [])                           # now the plan's content


@pytest.mark.parametrize("kind, expect", [
    ("skip", "where this run's plan rolls nothing out"),
    ("pinned", "the plan is pinned (-e maand_plan)"),
    ("reload", "need a restart (restart_globs)"),
])
def test_changed_files_the_plan_cannot_carry_fail_the_job_and_patch_nothing(kind, expect):
    plan = rendered_plan(action="reload" if kind == "reload" else "start", pinned=kind == "pinned",
                         globs={"api": ["*.conf"]} if kind == "reload" else None)
    new = dict(NEW, h2={"hash": "new2", "files": {"a.conf": "3"}}) if kind == "skip" else NEW
    if kind == "skip":
        plan["steps"][2]["ops"] = {}
    before = copy.deepcopy(plan)
    problems, ops = _pre_deploy.apply(plan, "api", new)
    assert ops == [] and len(problems) == 1 and expect in problems[0] and problems[0].startswith("job api: ")
    assert plan == before


def test_a_render_error_after_the_hooks_fails_the_job():
    problems, ops = _pre_deploy.apply(rendered_plan(), "api", {"h1": {"error": "job api, file a.conf.tpl: key x not found"}})
    assert ops == [] and problems == ["job api: h1: job api, file a.conf.tpl: key x not found"]


def test_waves_due():
    plan = with_hooks(PLAN, ["db", "web", "cron"], {"cron": 2})
    state = _run_state.new_state("r", plan)
    assert _pre_deploy.due(plan, state, plan["steps"][0]) == []                       # reconcile: none
    assert _pre_deploy.due(plan, state, plan["steps"][1]) == [0]
    assert _pre_deploy.due(plan, state, plan["steps"][3]) == [0, 1]
    state.pre_deploy_waves = [0]
    assert _pre_deploy.due(plan, state, None) == [1, 2]
    assert _pre_deploy.due(copy.deepcopy(PLAN), state, None) == []                    # no hooks: nothing due


def test_plan_lines_say_when_hooks_run_and_that_check_mode_did_not_run_them():
    plan = with_hooks(PLAN, ["db", "web"], {})
    info = _records.PreDeploy.from_json(plan[_pre_deploy.KEY])
    real = _pre_deploy.lines(info, False, {})
    assert real[0].startswith("pre_deploy hooks run at the start of each job's wave") and "wave 0: db; wave 1: web" in real[0]
    check = _pre_deploy.lines(info, True, {"db": [("secrets/job/db", "pw"), ("secrets/job/db", "pw")]})
    assert check[0].startswith("pre_deploy hooks NOT run (check mode)")
    assert check[-1] == '  job db reads KV keys that do not exist yet (rendered as "" in this plan): secrets/job/db pw'
    assert _pre_deploy.lines(_records.PreDeploy.from_json(PLAN.get(_pre_deploy.KEY)), True, {}) == []

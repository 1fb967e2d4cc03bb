"""Drain before a stop (issue 30 item 1, plugins/plugin_utils/deploy/drain.py): which batches of a step run the
job's before_allocation_stopped commands and with which batch variables, one wait of the longest shutdown_delay
per step, the plan's note, and the run driver leaving a batch whose command failed untouched (no request of the
job in that step, no revert) with the job failed naming the command's failure; shutdown_delay checked by build."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import drain as _drain
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run
from tests.bucket_factory import make_bucket
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job, states
from tests.unit.plugin_utils.deploy.test_deploy_run import Callbacks, answer_all
from tests.unit.plugin_utils.deploy.test_run_state import ok_answer

HOSTS = ["h1", "h2", "h3"]
DRAIN = {"command_drain": {"executed_on": ["before_allocation_stopped"], "demands": {"job": "", "command": ""}}}


def upgrade_plan(jobs, allocs=None, hosts=None):
    """The plan of an upgrade of every job (its files changed) after a first deploy settled."""
    hosts = list(HOSTS if hosts is None else hosts)
    cat = catalog(jobs, allocs or [(j["name"], h, "active") for j in jobs for h in hosts])
    names = [j["name"] for j in jobs]
    st = _settle(cat, content(*names), hosts)
    return cat, _plan.compute_plan(cat, content(*names, files={"Makefile": "m2"}), st, hosts)


def wave_steps(plan):
    return [s for s in plan["steps"] if s["wave"] is not None]


def test_each_upgrade_batch_drains_with_the_batch_variables_and_the_plan_says_so():
    cat, plan = upgrade_plan([job("web", commands=DRAIN, shutdown_delay=2)])
    drains = [_drain.due(cat, plan, [], s) for s in wave_steps(plan)]
    assert [[(d.job, d.hosts, d.label, d.delay, d.hooked) for d in ds] for ds in drains] == [
        [("web", (h,), "web upgrade batch %d/3" % (i + 1), 2.0, True)] for i, h in enumerate(HOSTS)]
    env = drains[1][0].env
    batch = (env["BATCH_ALLOCATIONS"], env["BATCH_INDEX"], env["BATCH_COUNT"], env["DEPLOY_PHASE"])
    assert batch == ("h2", "1", "3", "update")
    assert (env["ROLLOUT_ORDER"], env["ROLLOUT_ORDER_SOURCE"], env["JOB"]) == ("h1,h2,h3", "default", "web")
    assert ("note: job web: before each of its restart, reload or stop batches (3 allocation(s) in this plan): "
            "before_allocation_stopped (command_drain) then shutdown_delay 2 s") in plan["lines"]


def test_starts_are_not_drained_and_a_job_without_either_knob_is_untouched():
    cat = catalog([job("web", commands=DRAIN, shutdown_delay=2)], [("web", h, "active") for h in HOSTS])
    plan = _plan.compute_plan(cat, content("web"), states(HOSTS), HOSTS)  # a first deploy: starts only
    assert [_drain.due(cat, plan, [], s) for s in plan["steps"]] == [[] for _s in plan["steps"]]
    assert not any("before_allocation_stopped" in line for line in plan["lines"])
    cat, plan = upgrade_plan([job("api")])
    assert [_drain.due(cat, plan, [], s) for s in plan["steps"]] == [[] for _s in plan["steps"]]
    # a blocked job is not drained (its ops do not run)
    cat, plan = upgrade_plan([job("web", commands=DRAIN)])
    assert _drain.due(cat, plan, ["web"], wave_steps(plan)[0]) == []


def test_a_stop_of_a_disabled_allocation_drains_it_alone_with_phase_stop():
    cat = catalog([job("web", commands=DRAIN)], [("web", h, "active") for h in HOSTS])
    st = _settle(cat, content("web"), HOSTS)
    cat = catalog([job("web", commands=DRAIN)], [("web", "h1", "active"), ("web", "h2", "disabled"),
                                                 ("web", "h3", "active")])
    plan = _plan.compute_plan(cat, content("web"), st, HOSTS)
    step0 = plan["steps"][0]
    assert step0["wave"] is None
    (d,) = _drain.due(cat, plan, [], step0)
    assert (d.job, d.hosts, d.label, d.env["DEPLOY_PHASE"], d.env["BATCH_ALLOCATIONS"]) == (
        "web", ("h2",), "web stop", "stop", "h2")
    assert d.alloc_ids == {"h2": "web-h2"}


def test_one_wait_of_the_longest_delay_per_step_and_only_for_batches_that_go_on():
    cat, plan = upgrade_plan([job("a", shutdown_delay=1), job("b", commands=DRAIN, shutdown_delay=3),
                              job("c", commands=DRAIN, shutdown_delay=5)])
    first = wave_steps(plan)[0]
    drains = _drain.due(cat, plan, [], first)
    assert [(d.job, d.hooked) for d in drains] == [("a", False), ("b", True), ("c", True)]
    ran, lines, waits = [], [], []

    def hook(d):
        ran.append(d.job)
        return ["job c command command_drain (event before_allocation_stopped) on h1 failed: exit status 1"] \
            if d.job == "c" else []

    failed = _drain.run(drains, hook, lines.append, waits.append)
    assert ran == ["b", "c"]  # a has no command: only its delay
    assert waits == [3.0]  # one wait, the longest of the batches that go on (c failed: its 5 s is not waited)
    assert failed == [("c", "job c: before_allocation_stopped failed before c upgrade batch 1/3; the batch was not "
                            "touched (nothing stopped or restarted on h1): job c command command_drain (event "
                            "before_allocation_stopped) on h1 failed: exit status 1")]
    assert lines == ["drained: b upgrade batch 1/3 on h1 (before_allocation_stopped passed)",
                     "shutdown_delay: waiting 3 s before the stop or restart of a upgrade batch 1/3 on h1; "
                     "b upgrade batch 1/3 on h1"]
    cat, plan = upgrade_plan([job("d", commands=DRAIN)])
    assert _drain.run(_drain.due(cat, plan, [], wave_steps(plan)[0]), lambda d: [], lines.append, waits.append) == []
    assert waits == [3.0]  # no shutdown_delay: no wait
    cat, plan = upgrade_plan([job("e", shutdown_delay=0.25)])
    assert _drain.run(_drain.due(cat, plan, [], wave_steps(plan)[0]), lambda d: ["not called"], lines.append,
                      waits.append) == []  # a delay alone runs no command
    assert waits == [3.0, 0.25] and lines[-1] == ("shutdown_delay: waiting 0.25 s before the stop or restart of e "
                                                  "upgrade batch 1/3 on h1")


class Draining(Callbacks):
    """Callbacks whose before_stops fails the job's batch at one step (as StepCallbacks does when the command
    fails), recording what it was asked."""

    def __init__(self, fail_at):
        super().__init__()
        self.fail_at, self.asked = fail_at, []

    def before_stops(self, state, step):
        self.asked.append(step["index"])
        if step["index"] == self.fail_at:
            return [("web", "job web: before_allocation_stopped failed before web upgrade batch 2/3; the batch was "
                     "not touched: job web command command_drain (event before_allocation_stopped) on h2 failed")]
        return []


@pytest.mark.parametrize("auto_revert", [False, True])
def test_a_failed_drain_leaves_its_batch_untouched_and_fails_the_job(tmp_path, auto_revert):
    (tmp_path / "data").mkdir()
    cat, plan = upgrade_plan([job("web", commands=DRAIN, auto_revert=auto_revert)])
    run_dir = _run.new_run(str(tmp_path), plan)
    steps = wave_steps(plan)
    callbacks = Draining(steps[1]["index"])
    for seg in _run.segments(plan, 4):
        key = _run.step_key(seg["step"])
        hosts, dummy = _run.advance(_run.RunContext.read(run_dir), key, callbacks)
        answer_all(run_dir, key, hosts, ok_answer)
    dummy, state, report = _run.finish(_run.RunContext.read(run_dir), callbacks)
    ops = {}
    for step in plan["steps"]:
        folder = os.path.join(run_dir, "requests", str(step["index"]))
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            request = json.loads(open(os.path.join(folder, name)).read())
            ops[step["index"]] = ops.get(step["index"], []) + [o["id"] for o in request["ops"] if o.get("job")]
    assert ops.get(steps[0]["index"]) == ["web@h1"]
    assert not ops.get(steps[1]["index"]) and not ops.get(steps[2]["index"])  # h2 untouched, h3 never reached
    assert [d["id"] for d in state.done if d["job"]] == ["web@h1"]  # no revert ran (nothing of the failed batch did)
    assert report.failed and any("command_drain (event before_allocation_stopped) on h2" in p for p in report.problems)
    assert state.failed_by_job["web"][0].startswith("job web: before_allocation_stopped failed before web upgrade")
    assert "web" not in state.failed_at and "web" in state.blocked
    # the first batch passed its gate and was promoted; the batch that was not touched is the one failed
    assert state.failed_ops == {"web@h2": "failed"} and not any(state.pending.values())


@pytest.mark.parametrize("value, said", [(-1, "-1 (negative)"), ("5", "'5' (a string)"), (True, "True (a boolean)")])
def test_build_refuses_a_bad_shutdown_delay_naming_file_field_and_fix(tmp_path, value, said):
    make_bucket(tmp_path, [{"host": "10.0.0.1", "labels": ["worker"]}], {"api": {"shutdown_delay": value}})
    result = _service.compute(str(tmp_path))
    (problem,) = [p for p in result.report.errors if p.field == "shutdown_delay"]
    assert (problem.kind, problem.file) == ("ErrInvalidManifest", "workspace/jobs/api/manifest.json")
    assert "job api shutdown_delay must be a number of seconds >= 0, got %s" % said in str(problem), str(problem)
    assert 'set "shutdown_delay" to a number of seconds' in str(problem)


def test_shutdown_delay_reaches_the_catalog_only_when_set(tmp_path):
    make_bucket(tmp_path, [{"host": "10.0.0.1", "labels": ["worker"]}], {"api": {"shutdown_delay": 1.5}, "web": {}})
    result = _service.compute(str(tmp_path))
    assert result.report.ok, [str(p) for p in result.report.errors]
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert jobs["api"]["shutdown_delay"] == 1.5 and "shutdown_delay" not in jobs["web"]


def test_the_command_runs_with_the_batch_variables_and_a_failure_names_job_command_worker_and_tail(tmp_path):
    """hooks/points.before_stops over a built bucket and a real session (the runtime API, the staged job): the
    command sees the batch variables; a failure names job, command, event, worker and its output tail."""
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _build
    from ansible_collections.maand.core.plugins.plugin_utils.hooks import commands as _commands, points
    from tests.maand_init import init_bucket, job as write_job, ws
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in ("10.0.0.1", "10.0.0.2")])
    write_job(root, "web", {"version": "1.0.0", "selectors": ["worker"], "shutdown_delay": 0.5,
                            "commands": {"command_drain": {"executed_on": ["before_allocation_stopped"]}}})
    ws(root, "jobs/web/_modules/command_drain.py",
       "import os, sys\nkeys = ('EVENT', 'BATCH_ALLOCATIONS', 'BATCH_INDEX', 'DEPLOY_PHASE', 'ALLOCATION_IP')\n"
       "print(' '.join(os.environ[k] for k in keys))\n"
       "sys.exit('haproxy: no server be/' + os.environ['ALLOCATION_IP'] if os.environ['ALLOCATION_IP'] == '10.0.0.2' "
       "else 0)\n")
    assert _build.build(root).report.ok
    catalog = _catalog.read_catalog(root)
    env = _commands.batch_env("web", ["10.0.0.1"], 0, 2, "update", ["10.0.0.1", "10.0.0.2"], "default")
    with points.session(root, catalog) as ctx:
        assert points.before_stops(ctx, "web", ["10.0.0.1"], env) == []
        env = _commands.batch_env("web", ["10.0.0.2"], 1, 2, "update", ["10.0.0.1", "10.0.0.2"], "default")
        (failure,) = points.before_stops(ctx, "web", ["10.0.0.2"], env)
    assert failure.startswith("job web command command_drain (event before_allocation_stopped) on 10.0.0.2 failed: "
                              "exit status 1\n--- last lines of output ---\n"), failure
    assert "before_allocation_stopped 10.0.0.2 1 update 10.0.0.2" in failure and "haproxy: no server be/10.0.0.2" in failure

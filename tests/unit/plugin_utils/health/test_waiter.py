"""The one wait loop (health/waiter.py) and what waits in it: the deploy's health gates (deploy/gate.run_gate)
with fail fast on `make status` (health/watch.StatusWatch), and the status predicate through the real worker
agent (health/probes.status_probe, run in-process against a job folder in tmp_path, `make` for real). A stepped
clock: no timing."""

from __future__ import annotations

import io
import json
import subprocess
import threading
import time

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket.job_checks import DEFAULT_HEALTH
from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import gate as _gate
from ansible_collections.maand.core.plugins.plugin_utils.deploy import progress as _progress
from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state
from ansible_collections.maand.core.plugins.plugin_utils.health import Budget, Pending, Waiter
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
from tests.bucket_factory import worker_root
from tests.unit.plugin_utils.ops.test_health_check import Clock  # the fake clock the verb's tests drive


GATE = {"job": "api", "hosts": ["h1", "h2"], "attempts": 30, "interval_seconds": 0.5, "timeout_seconds": 1,
        "checks": [{"type": "tcp", "port": 30000}]}


# --- Budget and Waiter --------------------------------------------------------------------------------

def test_budget_defaults_come_from_the_one_place():
    assert Budget() == Budget(DEFAULT_HEALTH["attempts"], DEFAULT_HEALTH["interval_seconds"], DEFAULT_HEALTH["timeout_seconds"])
    assert Budget.of({}) == Budget()
    assert Budget.of({"attempts": 4, "interval_seconds": 0, "timeout_seconds": 2}) == Budget(4, 0.0, 2.0)
    b = Budget(3, 1.0)
    assert [b.allows(t, 99.0) for t in (1, 2, 3)] == [True, True, False]           # counts tries, not time
    assert [b.within(5).allows(99, e) for e in (4.9, 5.0)] == [True, False]         # a deadline instead
    assert not b.once().allows(1, 0.0)


def test_waiter_retries_what_is_pending_until_it_passes():
    clock = Clock()
    left = {"a": 2, "b": 0}  # a fails twice, b passes at once
    seen = []

    def attempt(n):
        out = []
        for key in sorted(left):
            if left[key]:
                left[key] -= 1
                out.append(Pending(key, Budget(5, 2.0), "not yet"))
        return out
    waited = Waiter(clock.sleep, clock).wait(attempt, lambda n, e, p, r: seen.append((n, e, [x.key for x in p], r)))
    assert (waited.passed, waited.rounds, waited.elapsed) == (True, 3, 4.0)
    assert clock.sleeps == [2.0, 2.0]
    assert seen == [(1, 0.0, ["a"], True), (2, 2.0, ["a"], True)]


def test_waiter_gives_up_when_no_pending_item_has_budget_left_and_sleeps_the_shortest_interval():
    clock = Clock()
    budgets = {"slow": Budget(2, 3.0), "fast": Budget(4, 1.0)}
    retrying = []
    waited = Waiter(clock.sleep, clock).wait(lambda n: [Pending(k, b, "down") for k, b in sorted(budgets.items())],
                                             lambda n, e, p, r: retrying.append(r))
    assert not waited.passed and waited.rounds == 4 and not waited.stopped_early
    assert clock.sleeps == [1.0, 1.0, 1.0]        # min over the items still allowed
    assert retrying == [True, True, True, False]
    assert sorted(p.key for p in waited.pending) == ["fast", "slow"]


def test_a_fatal_item_ends_the_wait_at_once():
    clock = Clock()
    waited = Waiter(clock.sleep, clock).wait(
        lambda n: [Pending("h1", Budget(30, 1.0), "refused", fatal=n == 2), Pending("h2", Budget(30, 1.0), "refused")])
    assert not waited.passed and waited.rounds == 2 and [p.key for p in waited.fatal] == ["h1"]
    assert clock.sleeps == [1.0]


def test_a_fatal_item_with_a_scope_ends_only_its_scope():
    """The verb: a job found not running on one worker stops waiting there; the others wait out their budgets."""
    clock = Clock()
    tried = []

    def attempt(n):
        tried.append(n)
        return [Pending("a@h1", Budget(30, 1.0), "down", fatal=n >= 2, scope=("a", "h1")),
                Pending("a@h2", Budget(4, 1.0), "down", scope=("a", "h2"))]
    waited = Waiter(clock.sleep, clock).wait(attempt)
    assert not waited.passed and waited.rounds == 4 and [p.key for p in waited.fatal] == ["a@h1"]
    assert clock.sleeps == [1.0, 1.0, 1.0]  # a@h2's 4 attempts, not a@h1's 30 nor an end at round 2
    waited = Waiter(clock.sleep, clock).wait(lambda n: [Pending("x", Budget(30, 1.0), "down", fatal=n == 2, scope="x")])
    assert waited.rounds == 2  # nothing else to wait for


# --- fail fast in a gate ------------------------------------------------------------------------------

def call(fn):
    """submit for run_gate: the status check right away (the gate's default runs it in a thread)."""
    fn()


def statuses(answers, calls):
    """status(job, host) answering from a list per host (the last answer repeats)."""
    def status(job, host):
        calls.append((job, host))
        seq = answers[host]
        return seq.pop(0) if len(seq) > 1 else seq[0]
    return status


def test_a_job_not_running_twice_in_a_row_fails_its_gate_at_once():
    clock = Clock()
    calls = []
    status = statuses({"h1": [(False, "api not running")], "h2": [(True, "")]}, calls)
    ended = []

    class Watch:
        def waiting(self, *a):
            pass

        def ended(self, passed, elapsed, attempts):
            ended.append((passed, elapsed, attempts))
    problems = _gate.run_gate(GATE, {}, sleep=clock.sleep, clock=clock, status=status, watch=Watch(), submit=call,
                              probe_fn=lambda a, c, t: "tcp %s:30000: [Errno 111] Connection refused" % a)
    # rounds at 0, 0.5, 1.0: status asked at 0 and 1.0 (at most once a second per host), not at 0.5
    assert ended == [(False, 1.0, 3)]
    assert sorted(calls) == [("api", "h1"), ("api", "h1"), ("api", "h2"), ("api", "h2")]  # the hosts side by side
    assert problems[:2] == ["h1: tcp h1:30000: [Errno 111] Connection refused", "h2: tcp h2:30000: [Errno 111] Connection refused"]
    assert problems[2] == ("h1: job api is not running: `make status` said so 2 times in a row, 1.0 s apart "
                           "(api not running)")
    assert len(problems) == 3  # h2 runs (its probe fails): it is named, not declared dead


def test_without_a_status_answer_the_gate_keeps_its_whole_budget():
    clock = Clock()
    calls = []
    status = statuses({"h1": [(None, "no status target")], "h2": [(None, "")]}, calls)
    gate = dict(GATE, attempts=6)
    problems = _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, status=status, submit=call,
                              probe_fn=lambda a, c, t: "refused")
    assert problems == ["h1: refused", "h2: refused"]
    assert len(clock.sleeps) == 5
    assert sorted(calls) == [("api", "h1"), ("api", "h2")]  # asked once: a job without a status target is not asked again


def test_not_running_then_running_resets_the_count():
    clock = Clock()
    status = statuses({"h1": [(False, ""), (True, ""), (False, ""), (True, "")], "h2": [(True, "")]}, [])
    gate = dict(GATE, attempts=10, interval_seconds=1.0)
    problems = _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, status=status, submit=call,
                              probe_fn=lambda a, c, t: "refused")
    assert len(clock.sleeps) == 9 and not any(health.NOT_RUNNING in p for p in problems)


def test_a_slow_status_check_does_not_hold_up_the_probes():
    """The default: status checks in background threads; the probe rounds go on while one is out, and
    its answer counts when it came."""
    release = threading.Event()
    rounds = []

    def status(job, host):
        release.wait(10)
        return False, "down"

    def probe(address, check, timeout):
        rounds.append(address)
        if len(rounds) == 5:
            release.set()   # the first check answers only now
        if len(rounds) > 5:
            time.sleep(0.01)  # real time for the thread's answer
        return "refused"
    gate = dict(GATE, hosts=["h1"], attempts=500, interval_seconds=0)
    problems = _gate.run_gate(gate, {}, sleep=lambda s: None, status=status, probe_fn=probe)
    assert len(rounds) > 5 and len(rounds) < 500       # rounds went on while the check was out; then it failed fast
    assert problems[-1].startswith("h1: job api is not running")


def test_a_passing_gate_asks_status_once_per_host_and_never_while_probing():
    calls = []
    tries = {"h1": 3, "h2": 0}  # h1's probe fails twice: no status call for it then (its probes decide first)

    def probe(address, check, timeout):
        tries[address] -= 1
        return None if tries[address] <= 0 else "refused"
    status = statuses({"h1": [(True, "")], "h2": [(True, "")]}, calls)
    assert _gate.run_gate(GATE, {}, sleep=lambda s: None, status=status, probe_fn=probe, submit=lambda fn: None) == []
    assert sorted(calls) == [("api", "h1"), ("api", "h2")]  # issue 30: one call per allocation and gate pass


def test_gate_runner_says_it_stopped_early_with_the_elapsed_time_and_the_tail(tmp_path):
    clock = Clock()
    status = statuses({"h1": [(False, "")], "h2": [(False, "")]}, [])

    def run(gate, watch):
        return _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, watch=watch, status=status, submit=call,
                              probe_fn=lambda a, c, t: "refused")
    plan = {"bucket_id": "b", "rows": [{"job": "api", "worker": h, "action": "start", "batch": "api start batch 1/1"}
                                       for h in ("h1", "h2")]}
    go = _gate.GateRunner(run, _progress.Writer(str(tmp_path), clock=clock), plan, diagnose=lambda job, hosts: {
        h: ["--- logs/api.log:", "api: cannot open config"] for h in hosts}, clock=clock)
    problems = go(GATE)
    assert "stopped waiting after 1.0 s (3 of 30 attempt(s), 0.5 s apart): `make status` says the job is not running" in problems
    assert "h1: last lines of job api:\n    --- logs/api.log:\n    api: cannot open config" in problems
    assert _progress.read_all(str(tmp_path))[-1]["attempts"] == 3


def test_failure_notes_without_an_attempt_count_in_the_budget():
    """The health_check verb with maand_wait_seconds: a budget in seconds, so no "of N"."""
    problems = ["h1: job api " + health.NOT_RUNNING + ": `make status` said so 2 times in a row, 1.0 s apart"]
    notes = health.failure_notes({"job": "api", "attempts": None, "interval_seconds": 1.0}, 2.5, 3, problems, {}, "")
    assert notes == ["stopped waiting after 2.5 s (3 attempt(s), 1.0 s apart): `make status` says the job is not running"]


# --- the status predicate: the worker agent's status op, for real ----------------------------------

MAKEFILE = ".PHONY: status\nstatus:\n\t@if [ -f running ]; then echo up; else echo 'api not running'; exit 1; fi\n"


def agent_over_ssh(calls):
    """An ssh runner that runs the agent in this process on the request it gets on stdin (what the
    worker's `python3 agent-<sha>.py` would do); the argv is recorded."""
    def run(argv, input=None, **kw):
        calls.append(argv)
        out = io.StringIO()
        _agent.main([], io.StringIO(input), out)
        return subprocess.CompletedProcess(argv, 0, out.getvalue(), "")
    return run


@pytest.fixture
def worker(tmp_path):
    return worker_root(tmp_path / "worker", {"api": MAKEFILE})


def request(root, env=None, target="status"):
    return json.dumps({"root": str(root), "ops": [{"id": "api", "kind": "status", "job": "api", "host": "h1",
                                                   "target": target, "env": env or {}}], "timeout": 10, "tail": 10})


def test_status_probe_reads_the_agents_answer(worker):
    calls = []
    conn = {"address": "10.0.0.1", "user": "agent", "sudo": True, "options": ["-o", "StrictHostKeyChecking=no"]}
    assert health.status_probe(conn, "python3 agent.py", request(worker), run=agent_over_ssh(calls),
                               agent=_remote) == (False, "api not running")
    (worker / "jobs" / "api" / "running").write_text("")
    assert health.status_probe(conn, "python3 agent.py", request(worker), run=agent_over_ssh(calls),
                               agent=_remote) == (True, "up")
    argv = calls[0]
    assert argv[1:3] == ["-o", "StrictHostKeyChecking=no"] and "agent@10.0.0.1" in argv  # the run's connection
    assert argv[-1] == "sudo -n sh -c 'python3 agent.py'"


def test_status_probe_cannot_tell_without_a_status_target_or_an_answer(worker):
    (worker / "jobs" / "api" / "Makefile").write_text("start:\n\ttrue\n")
    running, detail = health.status_probe({"address": "h"}, "x", request(worker), run=agent_over_ssh([]), agent=_remote)
    assert running is None and "no 'status' target" in detail

    def unreachable(argv, **kw):
        return subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host h port 22: No route to host")
    running, detail = health.status_probe({"address": "h"}, "x", request(worker), run=unreachable, agent=_remote)
    assert running is None and "No route to host" in detail


def test_status_request_takes_the_run_ops_environment_and_run_fields(tmp_path):
    run_dir = tmp_path / "run"
    plan = {"bucket_id": "b1", "rows": []}
    state = _run_state.new_state("r1", plan)
    state.in_flight = 2
    _run.save_state(str(run_dir), state)
    ops = [{"id": "api@h1", "kind": "run", "job": "api", "host": "h1", "target": "start", "env": {"NEW_VERSION": "2"},
            "spec": {"working_directory": "bin", "user": "svc", "environment": [{"vars": {"MODE": "prod"}}]}},
           {"id": "ctl@h1", "kind": "run", "job": "ctl", "host": "h1", "target": None, "env": {}}]
    _run._write_json(_run.request_path(str(run_dir), 2, "h1"), {"host": "h1", "ops": ops, "promote": []})
    run = _run.RunContext(str(run_dir), str(tmp_path), plan, _run.load_state(str(run_dir)))  # as the step read it
    req = json.loads(_gate.status_request(run, "api", "h1"))
    assert req["root"] == _remote.worker_root("b1") and req["timeout"] == health.STATUS_TIMEOUT
    assert req["ops"] == [{"id": "api", "kind": "status", "job": "api", "host": "h1", "target": "status",
                           "env": {"MODE": "prod", "NEW_VERSION": "2"}, "cwd": "bin", "user": "svc"}]
    assert _gate.status_request(run, "ctl", "h1") is None   # job_control: no make target
    assert _gate.status_request(run, "api", "h9") is None   # no request for that host

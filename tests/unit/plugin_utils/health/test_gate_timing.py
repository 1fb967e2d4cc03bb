"""Issue 30 in the one wait loop (health/waiter.py) and the deploy's gates (deploy/gate.run_gate): a gate passes
only where `make status` agrees with the probes (StatusConfirm), min_healthy_time keeps probing after the pass
(a flap fails the gate), and a budget's limit (progress_deadline) stops the wait naming what it waited for. A
stepped clock: no timing."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import gate as _gate
from ansible_collections.maand.core.plugins.plugin_utils.health import Budget, Pending, Waiter
from tests.unit.plugin_utils.ops.test_health_check import Clock

GATE = {"job": "api", "hosts": ["h1", "h2"], "attempts": 30, "interval_seconds": 1.0, "timeout_seconds": 1,
        "checks": [{"type": "tcp", "port": 30000}]}


def statuses(answers, calls):
    def status(job, host):
        calls.append(host)
        seq = answers[host]
        return seq.pop(0) if len(seq) > 1 else seq[0]
    return status


def no_submit(fn):
    """Fail fast's background checks never answer: only StatusConfirm asks."""


# --- the waiter: hold and limit ------------------------------------------------------------------------

def test_a_hold_rechecks_every_interval_until_its_seconds_went_by():
    clock = Clock()
    rechecks = []
    waited = Waiter(clock.sleep, clock).wait(lambda n: [], None, Budget(30, 2.0, seconds=5.0),
                                             lambda n: rechecks.append(n) or [])
    assert waited.passed and waited.held == 5.0 and not waited.flapped
    assert clock.sleeps == [2.0, 2.0, 1.0] and rechecks == [2, 3, 4]  # the last nap ends with the window


def test_a_failure_inside_the_hold_is_a_flap_and_the_wait_fails_at_once():
    clock = Clock()
    waited = Waiter(clock.sleep, clock).wait(lambda n: [], None, Budget(30, 1.0, seconds=10.0),
                                             lambda n: [Pending("h1", Budget(), "refused", True)] if n == 4 else [])
    assert (waited.passed, waited.flapped, waited.held, waited.rounds) == (False, True, 3.0, 4)
    assert [p.key for p in waited.pending] == ["h1"]


def test_a_limit_stops_the_retries_whatever_the_count_allows_and_says_so():
    clock = Clock()
    waited = Waiter(clock.sleep, clock).wait(lambda n: [Pending("h1", Budget(100, 1.0).capped(3.5), "down")])
    assert (waited.passed, waited.deadline, waited.rounds) == (False, True, 5)
    assert clock.sleeps == [1.0, 1.0, 1.0, 0.5]  # never sleeps past the limit
    counted = Waiter(clock.sleep, clock).wait(lambda n: [Pending("h1", Budget(2, 1.0).capped(99), "down")])
    assert not counted.passed and not counted.deadline  # the count ended it, not the limit


def test_the_limit_also_ends_a_hold():
    clock = Clock()
    waited = Waiter(clock.sleep, clock).wait(lambda n: [], None, Budget(30, 1.0, seconds=10.0, limit=4.0),
                                             lambda n: [])
    assert (waited.passed, waited.deadline, waited.flapped) == (False, True, False) and waited.held == 4.0


# --- gates that tell the truth -------------------------------------------------------------------------

def test_probes_that_pass_where_the_job_is_not_running_fail_the_gate_naming_status():
    """The orphan: the probe is answered by another process while the job itself died."""
    clock, calls = Clock(), []
    status = statuses({"h1": [(False, "api not running")], "h2": [(True, "api running")]}, calls)
    problems = _gate.run_gate(GATE, {}, sleep=clock.sleep, clock=clock, status=status, submit=no_submit,
                              probe_fn=lambda a, c, t: None)
    assert problems == ["h1: status: its probes pass, but job api is not running there: `make status` said so 2 "
                        "time(s) in a row (api not running)"]
    assert sorted(calls) == ["h1", "h1", "h2"]  # h2 confirmed once; h1 asked again before it fails
    assert clock.sleeps == [1.0]
    notes = health.failure_notes(GATE, 1.0, 2, problems, {}, "")
    assert "`make status` says the job is not running" in notes[0]


def test_a_status_that_says_running_on_the_second_ask_passes_and_none_means_probes_alone():
    clock, calls = Clock(), []
    status = statuses({"h1": [(False, "starting"), (True, "")], "h2": [(None, "no 'status' target")]}, calls)
    assert _gate.run_gate(GATE, {}, sleep=clock.sleep, clock=clock, status=status, submit=no_submit,
                          probe_fn=lambda a, c, t: None) == []
    assert sorted(calls) == ["h1", "h1", "h2"]


def test_a_failing_probe_is_named_as_a_probe_and_status_is_not_asked_for_it():
    clock, calls = Clock(), []
    status = statuses({"h1": [(True, "")], "h2": [(True, "")]}, calls)
    problems = _gate.run_gate(dict(GATE, attempts=3), {}, sleep=clock.sleep, clock=clock, status=status,
                              submit=no_submit, probe_fn=lambda a, c, t: "tcp %s:30000: refused" % a if a == "h2" else None)
    assert problems == ["h2: tcp h2:30000: refused"] and calls == ["h1"]


# --- min_healthy_time ----------------------------------------------------------------------------------

def flapping(after):
    """A probe that passes, then fails on h2 from its after-th call on."""
    seen = {"h1": 0, "h2": 0}

    def probe(address, check, timeout):
        seen[address] += 1
        return "tcp %s:30000: [Errno 111] Connection refused" % address if address == "h2" and seen[address] >= after else None
    return probe


def test_min_healthy_time_keeps_probing_and_a_flap_inside_it_fails_the_gate():
    clock = Clock()
    problems = _gate.run_gate(dict(GATE, min_healthy_time=10), {}, sleep=clock.sleep, clock=clock,
                              probe_fn=flapping(4))
    assert problems == ["h2: tcp h2:30000: [Errno 111] Connection refused (3.0 s into min_healthy_time 10 s: the "
                        "gate had passed, then this probe failed)"]


def test_min_healthy_time_passes_when_every_probe_stays_up_that_long():
    clock, probes = Clock(), []
    assert _gate.run_gate(dict(GATE, min_healthy_time=3), {}, sleep=clock.sleep, clock=clock,
                          probe_fn=lambda a, c, t: probes.append(a)) == []
    assert clock.now == 3.0 and len(probes) == 2 * 4  # the pass, then 3 rechecks of both hosts


# --- progress_deadline ---------------------------------------------------------------------------------

def test_the_deadline_stops_the_gate_and_names_the_probe_and_worker_it_waited_for():
    clock = Clock()
    gate = dict(GATE, attempts=600, progress_deadline=20, deadline_at=1000.0 + 8.0)  # 12 s went in the step
    problems = _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, wall=lambda: 1000.0 + clock.now,
                              probe_fn=lambda a, c, t: "[Errno 111] Connection refused" if a == "h2" else None)
    assert problems[0] == ("progress_deadline 20 s passed: job api made no progress for 20.0 s; it was waiting for "
                           "h2 tcp :30000 ([Errno 111] Connection refused)")
    assert problems[1:] == ["h2: [Errno 111] Connection refused"]
    assert clock.now == 8.0


def test_a_deadline_already_gone_when_the_gate_begins_fails_it_without_a_probe():
    probes = []
    gate = dict(GATE, progress_deadline=20, deadline_at=990.0)
    problems = _gate.run_gate(gate, {}, wall=lambda: 1000.0, probe_fn=lambda a, c, t: probes.append(a))
    assert problems == ["progress_deadline 20 s passed: job api made no progress for 30.0 s; it was waiting for "
                        "its batch's make targets (they took the whole deadline)"] and probes == []


def test_the_deadline_inside_min_healthy_time_names_the_window():
    clock = Clock()
    gate = dict(GATE, min_healthy_time=10, progress_deadline=12, deadline_at=1004.0)
    problems = _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, wall=lambda: 1000.0 + clock.now,
                              probe_fn=lambda a, c, t: None)
    assert problems == ["progress_deadline 12 s passed: job api made no progress for 12.0 s; it was waiting for "
                        "min_healthy_time 10 s on h1, h2 (healthy for 4.0 s)"]


def test_the_status_of_a_host_started_in_an_earlier_step_comes_from_that_steps_request(tmp_path):
    """The gate after a job's last start batch covers hosts started in earlier steps: StatusConfirm asks them too."""
    import json
    from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run, run_state as _run_state
    run_dir = tmp_path / "run"
    state = _run_state.new_state("r1", {"bucket_id": "b1"})
    state.steps_completed, state.in_flight = [0, 1], 2
    for key, host in ((0, "h1"), (2, "h3")):
        _run._write_json(_run.request_path(str(run_dir), key, host), {"host": host, "promote": [], "ops": [
            {"id": "api@%s" % host, "kind": "run", "job": "api", "host": host, "target": "start", "env": {"S": str(key)}}]})
    run = _run.RunContext(str(run_dir), str(tmp_path), {"bucket_id": "b1"}, state)
    assert json.loads(_gate.status_request(run, "api", "h1"))["ops"][0]["env"] == {"S": "0"}
    assert json.loads(_gate.status_request(run, "api", "h3"))["ops"][0]["env"] == {"S": "2"}
    assert _gate.status_request(run, "api", "h2") is None

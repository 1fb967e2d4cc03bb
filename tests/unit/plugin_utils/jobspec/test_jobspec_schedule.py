"""Scheduling order (seed 004): Maelstrom's QueuedJob order, broker dispatch and test-runner estimates.

tests/data/maelstrom/schedule.json transcribes maelstrom-software/maelstrom
crates/maelstrom-util/src/duration.rs tests::cmp1 and crates/maelstrom-broker/src/scheduler_task/
scheduler.rs tests (queued_job_ordering, priority_and_estimated_duration_have_priority,
requests_go_to_workers_based_on_subscription_percentage, receive_jobs_ready_from_artifact_gatherer_batches,
receive_worker_connected). Hypothesis checks the ordering invariants and the LPT plan.
"""

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.jobspec.environment import SpecError
from ansible_collections.maand.core.plugins.plugin_utils.jobspec.schedule import (
    BrokerModel, HistoryHint, PlannedJob, QueuedJob, duration_cmp, format_plan, history_hint, history_lookup,
    history_record, lpt_plan, makespan, plan_worker, makespan_lower_bound, queued_cmp, record_timing, schedule_order,
)

SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
TABLE = json.loads((Path(__file__).resolve().parents[3] / "data" / "maelstrom" / "schedule.json").read_text())


def _job(d):
    return QueuedJob(d["name"], d["priority"], d["estimated_duration"])


@pytest.mark.parametrize("lhs, rhs, want", TABLE["duration_cmp"]["cases"])
def test_maelstrom_duration_cmp(lhs, rhs, want):
    assert duration_cmp(lhs, rhs) == want


@pytest.mark.parametrize("case", TABLE["queued_job_ordering"]["cases"])
def test_maelstrom_queued_job_ordering(case):
    first, second = QueuedJob("1", *case["lhs"]), QueuedJob("2", *case["rhs"])
    assert queued_cmp(first, second) == case["cmp"]
    assert queued_cmp(second, first) == -case["cmp"]


@pytest.mark.parametrize("case", TABLE["broker"], ids=[c["test"] for c in TABLE["broker"]])
def test_maelstrom_broker(case):
    broker = BrokerModel()
    got = []
    for event in case["events"]:
        if "worker_connected" in event:
            sent = broker.worker_connected(*event["worker_connected"])
        elif "job" in event:
            sent = broker.job_ready(_job(event["job"]))
        elif "jobs" in event:
            sent = broker.jobs_ready([_job(j) for j in event["jobs"]])
        else:
            sent = broker.job_completed(*event["complete"])
        got.append([list(s) for s in sent])
    assert got == case["expected"]


def test_priority_case_is_schedule_order():
    # The nine specs of priority_and_estimated_duration_have_priority, in Maelstrom's start order.
    case = next(c for c in TABLE["broker"] if c["test"] == "priority_and_estimated_duration_have_priority")
    jobs = [_job(e["job"]) for e in case["events"] if "job" in e]
    assert [j.name for j in schedule_order(jobs)] == ["7", "9", "8", "4", "6", "5", "1", "3", "2"]


def test_history_as_test_runner():
    # maelstrom-test-runner app/main_app.rs: never run -> (1, None); success (0, mean); failure (1, mean)
    assert history_hint(None, False) == HistoryHint(1, None)
    assert history_hint([1.0, 2.0, 6.0], False) == HistoryHint(0, 3.0)
    assert history_hint([4.0], True) == HistoryHint(1, 4.0)
    # test_db.rs update_case keeps the last MAX_TIMINGS_PER_CASE = 3
    assert record_timing(record_timing([1, 2, 3], 4), 5) == [3.0, 4.0, 5.0]


def test_lpt_plan_example():
    jobs = [QueuedJob(str(s), 0, float(s)) for s in range(1, 9)]
    runs = lpt_plan(jobs, 2)
    assert [(r.name, r.slot, r.start) for r in runs[:4]] == [("8", 0, 0), ("7", 1, 0), ("6", 1, 7), ("5", 0, 8)]
    assert makespan(runs) == 18 == makespan_lower_bound([float(s) for s in range(1, 9)], 2)


def test_lpt_rejects_zero_slots():
    with pytest.raises(SpecError, match="slots must be at least 1"):
        lpt_plan([], 0)


_est = st.one_of(st.none(), st.integers(0, 20).map(float))
_jobs = st.lists(st.builds(QueuedJob, st.text("abc", min_size=1, max_size=3), st.integers(-2, 2), _est),
                 max_size=25)


@SLOW_OK
@given(_jobs)
def test_order_invariants(jobs):
    out = schedule_order(jobs)
    assert sorted(map(id, out)) == sorted(map(id, jobs))
    for a, b in zip(out, out[1:]):
        assert queued_cmp(a, b) >= 0  # never a job Maelstrom would pop later before one it pops earlier
        if a.priority == b.priority and a.estimated_duration is not None:
            assert b.estimated_duration is not None and b.estimated_duration <= a.estimated_duration
    assert schedule_order(out) == out


@SLOW_OK
@given(_jobs)
def test_order_is_stable(jobs):
    jobs = [QueuedJob(str(i), j.priority, j.estimated_duration) for i, j in enumerate(jobs)]
    out = schedule_order(jobs)
    for a, b in zip(out, out[1:]):
        if queued_cmp(a, b) == 0:
            assert int(a.name) < int(b.name)


@SLOW_OK
@given(_jobs)
def test_broker_with_one_worker_pops_in_schedule_order(jobs):
    broker = BrokerModel()
    broker.jobs_ready(jobs)
    sent = broker.worker_connected(1, len(jobs) + 1)
    assert [pair[1] for pair in sent] == [j.name for j in schedule_order(jobs)]


_durations = st.lists(st.integers(1, 12).map(float), min_size=1, max_size=7)


@SLOW_OK
@given(_durations, st.integers(1, 3))
def test_lpt_plan_is_a_valid_list_schedule(durations, slots):
    jobs = [QueuedJob(f"j{i}", 0, d) for i, d in enumerate(durations)]
    runs = lpt_plan(jobs, slots)
    assert [r.name for r in runs] == [j.name for j in schedule_order(jobs)]
    for slot in range(slots):
        mine = [r for r in runs if r.slot == slot]
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))  # no gap, no overlap
    assert [r.start for r in runs] == sorted(r.start for r in runs)
    bound = makespan_lower_bound(durations, slots)
    # Graham's bound for any list schedule
    assert bound <= makespan(runs) <= sum(durations) / slots + (1 - 1 / slots) * max(durations) + 1e-9


def _optimum(durations, slots):
    best = float("inf")
    for assign in itertools.product(range(slots), repeat=len(durations)):
        loads = [0.0] * slots
        for d, s in zip(durations, assign):
            loads[s] += d
        best = min(best, max(loads))
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_durations, st.integers(2, 3))
def test_lpt_within_graham_4_3_of_optimum(durations, slots):
    # Longest-processing-time first is within (4/3 - 1/(3k)) of the optimum (Graham 1969).
    runs = lpt_plan([QueuedJob(f"j{i}", 0, d) for i, d in enumerate(durations)], slots)
    assert makespan(runs) <= (4 / 3 - 1 / (3 * slots)) * _optimum(durations, slots) + 1e-9


def test_history_record_and_lookup():
    doc = None
    for seconds in (1, 2, 3, 10):
        doc = history_record(doc, "web", "start", seconds, failed=False, worker="w1")
    assert doc == {"version": 2, "targets": {"web/start@w1": {"timings": [2.0, 3.0, 10.0], "failed": False}}}
    assert history_lookup(doc, "web", "start", "w1") == HistoryHint(0, 5.0)
    assert history_lookup(doc, "web", "stop", "w1") == HistoryHint(1, None)
    assert history_lookup(doc, "web", "start", "w2") == HistoryHint(1, 5.0)  # never ran there: job's mean
    failed = history_record(doc, "web", "start", 4, failed=True, worker="w1")
    assert history_lookup(failed, "web", "start", "w1") == HistoryHint(1, 17 / 3)
    assert doc["targets"]["web/start@w1"]["timings"] == [2.0, 3.0, 10.0]  # input untouched


def test_history_is_per_allocation_one_worker_fails_the_other_succeeds():
    """w1 fails, w2 succeeds (and writes last): only w1's allocation is bumped, and each worker's
    estimate is its own mean, not the pool of both."""
    doc = None
    for seconds in (10, 10, 10):
        doc = history_record(doc, "db", "start", seconds, failed=False, worker="w1")
    for seconds in (2, 2):
        doc = history_record(doc, "db", "start", seconds, failed=False, worker="w2")
    doc = history_record(doc, "db", "start", 12, failed=True, worker="w1")
    doc = history_record(doc, "db", "start", 2, failed=False, worker="w2")
    w1, w2, w3 = (history_lookup(doc, "db", "start", w) for w in ("w1", "w2", "w3"))
    assert (w1.priority_bump, w1.estimated_duration) == (1, pytest.approx(32 / 3))
    assert w2 == HistoryHint(0, 2.0)
    assert (w3.priority_bump, w3.estimated_duration) == (1, pytest.approx((32 / 3 + 2.0) / 2))  # mean over workers
    jobs = [PlannedJob("db"), PlannedJob("web", estimated_duration=5)]
    doc = history_record(doc, "web", "start", 5, failed=False, worker="w1")
    doc = history_record(doc, "web", "start", 5, failed=False, worker="w2")
    assert [r.name for r in plan_worker(jobs, "start", 1, doc, "w1")] == ["db", "web"]  # failed here: +1
    assert [r.name for r in plan_worker(jobs, "start", 1, doc, "w2")] == ["web", "db"]  # 5 s before 2 s


def test_history_reads_version_1_documents():
    """A version-1 file (pooled "<job>/<target>" keys) stands for every allocation until the job is
    measured again; then its entry is dropped and the allocation entries take over."""
    old = {"targets": {"web/start": {"timings": [3.0, 6.0], "failed": True}}}
    assert history_lookup(old, "web", "start", "w1") == HistoryHint(1, 4.5)
    assert history_lookup(old, "web", "start") == HistoryHint(1, 4.5)
    new = history_record(old, "web", "start", 1, failed=False, worker="w1")
    assert new == {"version": 2, "targets": {"web/start@w1": {"timings": [1.0], "failed": False}}}
    assert history_lookup(new, "web", "start", "w1") == HistoryHint(0, 1.0)
    assert history_lookup(new, "web", "start", "w2") == HistoryHint(1, 1.0)
    assert history_lookup({"targets": {"web/start@w1": {"timings": ["x", -1, True]}}}, "web", "start", "w1") \
        == HistoryHint(1, None)  # junk timings: never ran


def test_plan_worker_uses_manifest_then_history():
    history = None
    for name, seconds, failed in (("a", 5, False), ("b", 1, False), ("c", 2, True)):
        history = history_record(history, name, "start", seconds, failed, worker="w1")
    jobs = [PlannedJob("a"), PlannedJob("b", estimated_duration=9), PlannedJob("c"), PlannedJob("d")]
    runs = plan_worker(jobs, "start", 2, history, "w1")
    # c failed last time and d never ran: priority 1 (d first: no estimate); then b (manifest 9) before a (5)
    assert [r.name for r in runs] == ["d", "c", "b", "a"]
    assert format_plan("w1", runs) == [
        "w1: 4 job(s) on 2 slot(s)", "  d: slot 0, estimate unknown", "  c: slot 0, estimate 2 s",
        "  b: slot 1, estimate 9 s", "  a: slot 0, estimate 5 s"]


def test_plan_worker_clamps_priority():
    runs = plan_worker([PlannedJob("x", 127)], "start", 1, None)
    assert runs[0].name == "x"

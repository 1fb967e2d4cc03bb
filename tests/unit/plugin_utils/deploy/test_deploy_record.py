"""Deploy records (plugins/plugin_utils/deploy/record.py): the deploy's finish keeps one record per run in the
state store (who, when, plan hash, update_seq, per allocation action, result, hash, versions, timings), the
rollout states carried from record to record, the bounded history, and a store that fails named as a
warning without keeping the deploy lock."""

from __future__ import annotations

import json
import os
import random
import re
import time

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
from ansible_collections.maand.core.plugins.plugin_utils.deploy import record as R
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run, service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run_state as _run_state
from tests.unit.plugin_utils.deploy.test_service import HOSTS, Screen, bucket, request  # noqa: F401  # pylint: disable=unused-import

RUN_IDS = ("20260101T000001-1", "20260101T000002-1", "20260101T000003-1")


@pytest.fixture
def run_ids(monkeypatch):
    """Each new run gets the next of RUN_IDS (runs of one test are made within the same second)."""
    ids = iter(RUN_IDS)
    original = _run.new_run
    monkeypatch.setattr(_run, "new_run", lambda bucket, plan, run_id=None, record=True: original(
        bucket, plan, run_id or next(ids), record))
    return RUN_IDS


def timed_answer(req):
    """Every op and promotion ok; every op measured at 1.5 s."""
    return {"ok": True, "promotions": [{"id": p["id"], "ok": True} for p in req.promote],
            "ops": [{"id": o["id"], "ok": True, "seconds": 1.5} for o in req.ops]}


def run_deploy(root, ctl=None, answer=timed_answer, **kw):
    assert _service.lock(root, os.getpid()).as_result()["taken"]
    prepared = _service.prepare(request(root, **kw), ctl or Screen().ctl)
    assert not prepared.failed, prepared.msg
    for seg in prepared.segments:
        stepped = _service.step(prepared.run_dir, seg["step"], ctl)
        assert not stepped.error, stepped.error
        for host in stepped.hosts:
            req = _run.read_request(prepared.run_dir, stepped.key, host)
            _run.write_result(prepared.run_dir, stepped.key, host,
                              answer(_run_state.AgentRequest(host=host, ops=req["ops"], promote=req["promote"])))
    finished = _service.finish(_service.FinishRequest(root, prepared.plan, run_dir=prepared.run_dir, run_pid=os.getpid()), ctl)
    return prepared, finished


def test_a_deploy_keeps_its_record_with_hashes_results_and_timings(bucket, run_ids):
    prepared, finished = run_deploy(bucket)
    assert finished.problems == []
    [record] = R.read_all(bucket)[0]
    assert os.path.isfile(os.path.join(bucket, "data", "deploys", run_ids[0] + ".json"))
    assert (record.run_id, record.outcome, record.pid) == (run_ids[0], "ok", os.getpid())
    assert record.plan_hash == prepared.plan_hash and record.bucket_id == prepared.plan["bucket_id"]
    assert (record.previous_update_seq, record.update_seq) == (0, 1)
    assert record.user == R.who() and record.controller and record.started <= record.finished
    assert record.summary == "4 started" and record.counts == {"started": 4} and record.problems == []
    hashes = {(r["job"], r["worker"]): r["hash"] for r in prepared.plan["rows"]}
    got = {(a.job, a.worker): (a.action, a.result, a.hash, a.to_version, a.seconds) for a in record.allocations}
    assert got == {(j, h): ("start", "started", hashes[(j, h)], "1.0.0" if j == "api" else "2.0.0", 1.5)
                   for j in ("api", "web") for h in HOSTS}
    assert {k: (r.state, r.hash, r.version, r.result, r.run_id) for k, r in record.rollout.items()} == {
        "%s@%s" % k: ("promoted", hashes[k], "1.0.0" if k[0] == "api" else "2.0.0", "started", run_ids[0])
        for k in hashes}


def test_a_deploy_limited_to_one_job_carries_the_others_rollout_forward(bucket, run_ids):
    run_deploy(bucket)
    run_deploy(bucket, jobs="web")  # fresh worker states: web starts again, api is out of scope
    first, second = R.read_all(bucket)[0]
    assert {a.job for a in second.allocations} == {"web"}
    assert {k: r.run_id for k, r in second.rollout.items()} == {
        "api@10.0.0.1": run_ids[0], "api@10.0.0.2": run_ids[0], "web@10.0.0.1": run_ids[1],
        "web@10.0.0.2": run_ids[1]}
    assert second.rollout["api@10.0.0.1"] == first.rollout["api@10.0.0.1"]
    assert second.options["jobs"] == ["web"]


def test_a_corrupt_result_file_is_left_out_of_the_record_and_refused_by_the_deploy(tmp_path):
    run_dir = str(tmp_path / "20260101T000001-1")

    def answer(*ops):
        return {"ok": True, "ops": [{"id": op, "ok": True, "seconds": s} for op, s in ops]}
    _run.write_result(run_dir, 1, "h1", answer(("api@h1/start", 1.25), ("api@h1/files", 0.5)))
    _run.write_result(run_dir, _run.FINAL, "h1", answer(("api@h1/revert", 0.25)))
    _run.write_result(run_dir, 1, "h2", answer(("api@h2/start", 2.0)))
    with open(_run.result_path(run_dir, 1, "h2"), "w", encoding="utf-8") as handle:
        handle.write('{"answer": {"ops": [')  # cut off mid-write
    rows = [{"job": "api", "worker": h, "action": "start"} for h in ("h1", "h2")]
    record = R.build("20260101T000001-1", {"rows": rows}, None, [], run_dir, None, 1, 0.0)
    assert {a.key: a.seconds for a in record.allocations} == {"api@h1": 2.0, "api@h2": None}
    assert {(step, host) for step, host, dummy in _run.iter_results(run_dir)} == {("1", "h1"), ("final", "h1")}
    with pytest.raises(_run.RunError, match="h2.json: cannot read"):
        _run.read_results(run_dir, 1, ["h1", "h2"])


def test_a_failed_run_is_recorded_failed_with_its_problems(bucket, run_ids):
    assert _service.lock(bucket, os.getpid()).as_result()["taken"]
    prepared = _service.prepare(request(bucket))
    first = _service.step(prepared.run_dir, prepared.segments[0]["step"])
    assert not first.error and first.hosts  # no worker ever answers
    finished = _service.finish(_service.FinishRequest(bucket, prepared.plan, run_dir=prepared.run_dir, run_pid=1))
    [record] = R.read_all(bucket)[0]
    assert record.outcome == "failed" and record.problems == finished.problems and record.problems
    results = {a.key: a.result for a in record.allocations}
    assert set(results.values()) <= {"failed", "unreachable", "not run"} and len(results) == 4, results
    for key, entry in record.rollout.items():  # nothing was promoted: the hashes tried are kept as failed ones
        assert entry.hash is None and entry.state in ("failed", "unreachable", "pending"), (key, entry)
    assert os.path.isdir(prepared.run_dir)  # a failed run keeps its folder beside its record


def test_check_mode_keeps_no_record(bucket):
    out = _service.prepare(request(bucket, check_mode=True))
    _service.finish(_service.FinishRequest(bucket, out.plan, run_dir="", check_mode=True))
    assert R.read_all(bucket) == ([], [])


def test_a_store_that_fails_is_a_warning_and_the_lock_is_still_released(bucket, run_ids, monkeypatch):
    def broken(self, run_id, text, keep=R.KEEP):
        raise _storage.StateStoreError("state store down")
    monkeypatch.setattr(_storage.FileStore, "write_record", broken)
    screen = Screen()
    dummy, finished = run_deploy(bucket, screen.ctl)
    assert finished.problems == [] and _locks.read_lock(bucket) is None
    assert screen.warnings == ["the deploy record of run %s was not kept (maand.core.logs will not list it): "
                               "StateStoreError: state store down" % run_ids[0]]


def alloc(job, result, hash_, before="1.0.0", after="2.0.0", worker="h1", action="restart"):
    return R.Allocation(job=job, worker=worker, action=action, result=result, hash=hash_, from_version=before,
                        to_version=after)


def test_rollout_rules_promoted_failed_gate_and_gone():
    start = R.carry_rollout({}, [alloc("api", "started", "aaa", "-", "1.0.0"),
                                 alloc("web", "started", "www", "-", "1.0.0")], "r1", "t1")
    assert (start["api@h1"].state, start["api@h1"].hash, start["api@h1"].version) == ("promoted", "aaa", "1.0.0")
    # the upgrade of api fails its gate: the worker keeps 1.0.0 (aaa); bbb is the failed attempt; web untouched
    gate = R.carry_rollout(start, [alloc("api", "gate failed", "bbb", "1.0.0", "2.0.0")], "r2", "t2")
    assert (gate["api@h1"].state, gate["api@h1"].hash, gate["api@h1"].version) == ("health_failed", "aaa", "1.0.0")
    assert (gate["api@h1"].failed_hash, gate["api@h1"].failed_version, gate["api@h1"].run_id) == ("bbb", "2.0.0", "r2")
    assert gate["web@h1"] == start["web@h1"]
    # not run (an earlier wave failed) keeps the failed attempt in view; the next success clears it
    pending = R.carry_rollout(gate, [alloc("api", "not run", "bbb")], "r3", "t3")
    assert (pending["api@h1"].state, pending["api@h1"].failed_hash) == ("pending", "bbb")
    fixed = R.carry_rollout(pending, [alloc("api", "restarted", "bbb")], "r4", "t4")
    assert (fixed["api@h1"].state, fixed["api@h1"].hash, fixed["api@h1"].failed_hash) == ("promoted", "bbb", None)
    # a removed allocation leaves; a purged worker takes its allocations with it
    removed = R.carry_rollout(fixed, [alloc("web", "removed", None, action="remove")], "r5", "t5")
    assert set(removed) == {"api@h1"}
    purged = R.carry_rollout(fixed, [R.Allocation(job="*", worker="h1", action="purge", result="purged")], "r6", "t6")
    assert purged == {}


def test_a_disabled_allocation_left_stopped_keeps_its_promoted_hash():
    start = R.carry_rollout({}, [alloc("api", "started", "aaa", "-", "1.0.0")], "r1", "t1")
    skipped = R.Allocation(job="api", worker="h1", action="skip", result="unchanged", state="disabled",
                           from_version="1.0.0", to_version="1.0.0")
    after = R.carry_rollout(start, [skipped], "r2", "t2")["api@h1"]
    assert (after.state, after.hash, after.version, after.run_id) == ("stopped", "aaa", "1.0.0", "r2")


@pytest.mark.parametrize("result, state", [("reverted", "reverted"), ("failed", "failed"), ("held", "held"),
                                           ("rolled back", "rolled_back"), ("stopped", "stopped"),
                                           ("unreachable", "unreachable"), ("not promoted", "failed")])
def test_rollout_state_of_each_result(result, state):
    assert R.carry_rollout({}, [alloc("api", result, "h")], "r", "t")["api@h1"].state == state


def test_the_file_store_keeps_the_newest_records_only(tmp_path):
    store = _storage.FileStore(str(tmp_path))
    for i in range(7):
        store.write_record("2026010%dT000000-1" % i, json.dumps({"i": i}), keep=5)
    kept = store.records()
    assert [json.loads(text)["i"] for dummy, text in kept] == [2, 3, 4, 5, 6]
    assert [r for r, dummy in store.records(limit=2)] == ["20260105T000000-1", "20260106T000000-1"]
    assert oct(os.stat(store.records_dir()).st_mode & 0o777) == "0o700"
    with pytest.raises(_storage.StateStoreError, match="cannot name a deploy record"):
        store.write_record("../escape", "{}")


def test_unreadable_records_are_named_and_left_out(tmp_path):
    store = _storage.FileStore(str(tmp_path))
    store.write_record("20260101T000000-1", "{not json")
    store.write_record("20260102T000000-1", json.dumps({"format": 99}))
    records, bad = R.read_all(str(tmp_path))
    assert records == [] and len(bad) == 2 and "20260101T000000-1 cannot be read" in bad[0]
    assert R.latest(str(tmp_path)) is None


def test_run_ids_are_unique_in_one_millisecond_and_sort_by_start_beside_the_old_form(tmp_path):
    now = 1795000000.25
    assert len({_run.new_run_id(now, pid=7) for dummy in range(64)}) == 64  # one controller, one millisecond
    assert re.fullmatch(r"20261118T110640\.250-7-[0-9a-f]{6}", _run.new_run_id(now, pid=7))

    def old_form(at, pid):
        return "%s-%d" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime(at)), pid)
    by_start = [old_form(now - 1, 99999), old_form(now, 12), _run.new_run_id(now, pid=99999),
                _run.new_run_id(now + 0.001, pid=1), _run.new_run_id(now + 1, pid=1)]
    shuffled = random.Random(3).sample(by_start, len(by_start))
    assert sorted(shuffled) == by_start
    store = _storage.FileStore(str(tmp_path))
    for run_id in shuffled:
        store.write_record(run_id, json.dumps(_record(run_id).to_dict()), keep=4)
    records, bad = R.read_all(str(tmp_path))
    assert [r.run_id for r in records] == by_start[1:] and bad == []
    assert R.find(records, "last").run_id == by_start[-1]
    assert R.find(records, by_start[1]).run_id == by_start[1]  # an old id still names its record
    assert R.find(records, by_start[2][:19]).run_id == by_start[2]  # and so does a new id's start


def _record(run_id):
    return R.DeployRecord(run_id=run_id, bucket_id="b", outcome="ok", started="", finished="", seconds=0,
                          user="u", controller="c", pid=1)


def test_find_by_id_prefix_or_last():
    records = [R.DeployRecord(run_id=r, bucket_id="b", outcome="ok", started="", finished="", seconds=0, user="u",
                              controller="c", pid=1) for r in ("20260101T000001-1", "20260101T000002-1")]
    assert R.find(records, "last").run_id == "20260101T000002-1"
    assert R.find(records, "20260101T000001").run_id == "20260101T000001-1"
    with pytest.raises(R.RecordError, match="ambiguous"):
        R.find(records, "2026")
    with pytest.raises(R.RecordError, match="no deploy record for run nope; the kept runs are 20260101T000001-1"):
        R.find(records, "nope")
    with pytest.raises(R.RecordError, match="no deploy record is kept"):
        R.find([], "last")

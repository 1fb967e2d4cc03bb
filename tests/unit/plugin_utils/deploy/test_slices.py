"""Sliced deploys (deploy/slices.py, issue 33), without Ansible: the service's prepare, step and finish driven for a
planner and its hands, each slice its own bucket folder (its own checkout) over one shared state store (the
planner's bucket folder as the store every slice reaches), each slice in a thread, the agents answering ok.

The fleet-wide properties are checked under randomized slice timings (hypothesis): whatever the order the slices
act in, every step's requests reach each worker once, no request of a step is taken before the planner
wrote it, the planner folds a step only with every hand's results, and every slice ends with the run's verdict.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils import bucket as _bucket_door
from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _build
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run, service as S, slices as SL
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.deploy.test_deploy_run import answer_all

HOSTS = ["10.0.0.%d" % i for i in range(1, 7)]
KEYS = itertools.count(100)
MAKEFILE = "start:\n\ttrue\nstop:\n\ttrue\nrestart:\n\ttrue\n"


def awx_slices(hosts, n):
    """AWX's rule: hosts sorted by name, slice k holds hosts[k-1::n]."""
    ordered = sorted(hosts)
    return [ordered[k::n] for k in range(n)]


@pytest.fixture
def fleet_bucket(tmp_path, monkeypatch):
    """A built bucket (the planner's checkout, whose data/ is the shared store) with two jobs on six workers,
    db (batches of 2) and web (batches of 1)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    root = init_bucket(tmp_path / "planner")
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in HOSTS])
    job(root, "db", {"version": "1.0.0", "selectors": ["worker"], "max_concurrent_upgrades": 2}, makefile=MAKEFILE)
    job(root, "web", {"version": "1.0.0", "selectors": ["worker"], "max_concurrent_upgrades": 1}, makefile=MAKEFILE)
    ws(root, "jobs/db/app.conf", "v1\n")
    assert _build.build(root).report.ok
    shared = _storage.FileStore(root)
    # the door first: its lazy lookup of store caches what storage.store is then, and monkeypatch restores that
    # (patched second, the door kept this test's store after it: test_board_pg then ran on a stale FileStore)
    monkeypatch.setattr(_bucket_door, "store", lambda bucket_dir: shared)
    monkeypatch.setattr(_storage, "store", lambda bucket_dir: shared)
    return root


def checkout(root, name):
    """Another slice's checkout of the same commit: the bucket without its data/ (it reads the store)."""
    clone = os.path.join(os.path.dirname(root), name)
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns("data"))
    return clone


def fresh_states(hosts):
    """Workers with nothing deployed yet."""
    return {h: {"reachable": True, "worker": None, "jobs": None, "deployed": {}, "trees": []} for h in hosts}


class Run:
    """One sliced run: the slices' threads, what each did, in order."""

    def __init__(self, root, n, delays=None, wait=20.0, key="awx-workflow-1"):
        self.root, self.n, self.wait, self.key = root, n, wait, key
        self.parts = awx_slices(HOSTS, n)
        self.buckets = [root] + [checkout(root, "slice%d" % k) for k in range(1, n)]
        self.delays = delays or (lambda who: 0.0)
        self.log = []  # (who, event, step, hosts)
        self.results = [None] * n
        self.errors = []
        self.lock = threading.Lock()

    def note(self, *event):
        with self.lock:
            self.log.append(event)

    def slice(self, k):
        slc = SL.Slice(self.key, "awx-job-%d" % k, self.wait)
        brd = SL.board(self.buckets[k], slc, sleep=lambda s: time.sleep(0.002))
        if k == 0:
            taken, dummy = _locks_acquire(self.root)
            assert taken
        else:
            time.sleep(0.05)  # the planner's run entry first, as a hand that found the lock held waits for it
        return SL.join(brd, slc, k == 0, os.getpid())

    def drive(self, k):
        try:
            slc = self.slice(k)
            req = S.PlanRequest(self.buckets[k], self.parts[k], fresh_states(self.parts[k]), run_pid=os.getpid(),
                                slice=slc.to_json())
            prepared = S.prepare(req)
            assert not prepared.failed, prepared.msg
            for seg in prepared.segments:
                time.sleep(self.delays(k))
                stepped = S.step(prepared.run_dir, seg["step"])
                assert not stepped.error, stepped.error
                self.note(k, "step", stepped.key, tuple(stepped.hosts))
                answer_all(prepared.run_dir, stepped.key, stepped.hosts)
                for host in stepped.hosts:
                    self.note(k, "answered", stepped.key, (host,))
                    if slc.role == "hand":  # deploy/agent_step.done does this after the agent's answer
                        data = _run._read_json(_run.result_path(prepared.run_dir, stepped.key, host))
                        SL.put_result(prepared.run_dir, stepped.key, host, data)
            self.results[k] = S.finish(S.FinishRequest(self.buckets[k], prepared.plan, run_dir=prepared.run_dir,
                                                       run_pid=os.getpid()))
        except BaseException as exc:  # pylint: disable=broad-exception-caught
            self.errors.append((k, exc))

    def go(self):
        threads = [threading.Thread(target=self.drive, args=(k,)) for k in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not self.errors, self.errors
        return self.results


def _locks_acquire(root):
    from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks  # pylint: disable=import-outside-toplevel
    return locks.acquire(root, os.getpid())


def check_run(run):
    """Each acting worker of each step answered once, by the slice that holds it, and a step's answers came before
    any slice took the next step; every slice ends with the whole run's verdict."""
    answered = [(e[0], e[2], e[3][0]) for e in run.log if e[1] == "answered"]
    assert len(answered) == len(set((s, h) for dummy, s, h in answered)), answered  # once each
    for who, dummy, host in answered:
        assert host in run.parts[who]  # only its own workers
    steps = [e[2] for e in run.log if e[1] == "step" and e[0] == 0]
    for prev, nxt in zip(steps, steps[1:]):
        last_answer = max(i for i, e in enumerate(run.log) if e[1] == "answered" and e[2] == prev) \
            if any(e[1] == "answered" and e[2] == prev for e in run.log) else -1
        first_take = min(i for i, e in enumerate(run.log) if e[1] == "step" and e[2] == nxt)
        assert last_answer < first_take, (prev, nxt, run.log)
    for result in run.results:
        out = result.as_result()
        assert not out.get("failed"), out
        assert sorted((v["job"], v["worker"]) for v in out["verdict"]) == sorted(
            (j, h) for j in ("db", "web") for h in HOSTS)
        assert {v["result"] for v in out["verdict"]} == {"started"}, out["verdict"]


def test_two_slices_one_plan_every_worker_started_once(fleet_bucket):
    run = Run(fleet_bucket, 2)
    run.go()
    check_run(run)
    assert SL.Board(_storage.store(fleet_bucket), "awx-workflow-1").get("run")["phase"] == "ended"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(min_value=2, max_value=4), seed=st.integers(min_value=0, max_value=10 ** 6))
def test_randomized_slice_timings_keep_the_fleet_wide_order(fleet_bucket, n, seed):
    rnd = random.Random(seed)
    for k in range(1, 5):  # the checkouts of an earlier example
        shutil.rmtree(os.path.join(os.path.dirname(fleet_bucket), "slice%d" % k), ignore_errors=True)
    delays = {k: [rnd.uniform(0, 0.03) for dummy in range(64)] for k in range(n)}
    run = Run(fleet_bucket, n, delays=lambda who: delays[who].pop() if delays[who] else 0.0,
              key="awx-workflow-%d" % next(KEYS))  # a new workflow job per example
    run.go()
    check_run(run)


def test_a_workflow_job_is_a_slice_only_when_its_inventory_lacks_workers():
    """Every job of an AWX workflow has awx_workflow_job_id: only a job handed part of the fleet is a slice."""
    implicit = SL.slice_of(workflow_id="118", job_id="7")
    explicit = SL.slice_of(run_key="night", job_id="7")
    assert implicit.from_workflow and not explicit.from_workflow
    assert implicit.run_key == "awx-workflow-118" and implicit.member == "awx-job-7"
    assert SL.Slice.from_json(implicit.to_json()) == implicit
    assert SL.whole_fleet(implicit, HOSTS + ["localhost"], HOSTS)  # the whole inventory: no slice
    assert not SL.whole_fleet(implicit, HOSTS[::2], HOSTS)  # AWX's slice 1 of 2
    assert not SL.whole_fleet(explicit, HOSTS, HOSTS)  # maand_run_key asks for a sliced run
    assert not SL.whole_fleet(implicit, None, HOSTS)  # not told: keyed runs are slices
    assert SL.slice_of() is None


def test_lock_of_a_whole_fleet_workflow_job_is_an_unsliced_lock(fleet_bucket):
    slc = SL.slice_of(workflow_id="9", job_id="1")
    whole = S.lock(fleet_bucket, os.getpid(), slc=slc, inventory_hosts=HOSTS)
    assert whole.taken and whole.slice is None, whole.msg
    S.unlock(fleet_bucket, os.getpid())
    part = S.lock(fleet_bucket, os.getpid(), slc=slc, inventory_hosts=HOSTS[:3])
    assert part.taken and part.slice["role"] == "planner", part.msg
    S.unlock(fleet_bucket, os.getpid())


def test_a_hand_in_the_planners_own_checkout_is_refused(fleet_bucket):
    """Two slices in one bucket folder would share one run folder (each would take the other's slice.json): the
    hand is refused naming the fix, before it claims anything."""
    brd = SL.board(fleet_bucket, SL.Slice("shared-1", "awx-job-1"))
    assert SL.join(brd, SL.Slice("shared-1", "awx-job-1"), True, os.getpid(), checkout=fleet_bucket).role == "planner"
    with pytest.raises(SL.SharedCheckout, match="checkout of its own.*ansible-inventory -i <its checkout>"):
        SL.join(brd, SL.Slice("shared-1", "awx-job-2"), False, os.getpid(), checkout=fleet_bucket)
    assert "member/awx-job-2" not in brd.items("member/")
    other = checkout(fleet_bucket, "own")
    hand = SL.join(SL.board(other, SL.Slice("shared-1", "awx-job-3")), SL.Slice("shared-1", "awx-job-3"), False,
                   os.getpid(), checkout=other)
    assert hand.role == "hand"


def test_a_planner_keeps_the_newest_run_keys_on_the_board(fleet_bucket):
    store = _storage.store(fleet_bucket)
    for n in range(SL.KEYS_KEPT + 3):
        store.board_put("old-%02d" % n, "run", '{"phase": "ended"}')
        time.sleep(0.01)  # board_keys orders by the first write
    slc = SL.Slice("new-1", "awx-job-1")
    SL.join(SL.board(fleet_bucket, slc), slc, True, os.getpid())
    keys = store.board_keys()
    assert "new-1" in keys and len(keys) == SL.KEYS_KEPT, keys
    assert sorted(k for k in keys if k != "new-1") == ["old-%02d" % n for n in range(4, SL.KEYS_KEPT + 3)]


def test_a_planner_is_alive_before_its_run_entry_is_written(fleet_bucket, monkeypatch):
    """A hand that finds the run entry probes the planner's token: one not yet taken would read as a planner gone
    (the CI's PostgreSQL run: the hand gave up while the planner's holder was still starting)."""
    store = _storage.store(fleet_bucket)
    seen, put = [], store.board_put

    def recording_put(key, name, text):
        if name == "run":
            seen.append(store.board_alive(key, "awx-job-1"))
        return put(key, name, text)
    monkeypatch.setattr(store, "board_put", recording_put)
    slc = SL.Slice("alive-1", "awx-job-1")
    assert SL.join(SL.board(fleet_bucket, slc), slc, True, os.getpid()).role == "planner"
    assert seen == [True]


def test_a_hand_refused_before_the_plan_leaves_at_once(fleet_bucket):
    """A hand whose workers the plan left out (it joined after maand_slice_wait) is refused: it says it left, so the
    planner gives up its workers at once rather than waiting for answers that never come."""
    planner = SL.Slice("late-1", "awx-job-0")
    brd = SL.board(fleet_bucket, planner)
    SL.join(brd, planner, True, os.getpid())
    brd.put("plan/r1", {"plan": {}, "render": {}, "absent": {HOSTS[5]: "late"}, "hosts": HOSTS[:5]})
    brd.put("run", dict(brd.get("run"), phase="running", run_id="r1"))
    other = checkout(fleet_bucket, "late")
    hand = SL.join(SL.board(other, SL.Slice("late-1", "awx-job-1")), SL.Slice("late-1", "awx-job-1"), False,
                   os.getpid())
    prepared = S.prepare(S.PlanRequest(other, HOSTS[5:], fresh_states(HOSTS[5:]), run_pid=os.getpid(),
                                       slice=hand.to_json()))
    assert prepared.failed and "planned without this slice's workers" in prepared.msg, prepared.msg
    assert brd.items("left/") == {"awx-job-1": {"hosts": HOSTS[5:]}} and not brd.alive("awx-job-1")

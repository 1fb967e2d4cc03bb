"""One run context per step (issue 29 item 4): a deploy step task reads plan.json, state.json and the catalog
once (deploy/run.RunContext) and writes state.json once; the make targets its agents timed reach
data/job_history.json in one write, from the fold (deploy/run.fold_in_flight), never per host. Counted with
wrappers around open() and bucket/storage.atomic_write over a real bucket, as house-review-4 section 3 measured
(it found plan.json read twice and state.json written two or three times per step)."""

from __future__ import annotations

import builtins
import collections
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils import jobspec as _jobspec
from ansible_collections.maand.core.plugins.plugin_utils.deploy import agent_step as _agent_step, run as _run, service as S
from tests.maand_init import job
from tests.unit.plugin_utils.deploy.test_service import HOSTS, MAKEFILE, bucket, request  # noqa: F401 (fixtures); pylint: disable=unused-import


class Counter:
    """Opens and atomic writes by file name: ("read" | "open-write" | "write", basename) -> count."""

    def __init__(self, monkeypatch):
        self.counts = collections.Counter()
        real_open, real_write = builtins.open, storage.atomic_write

        def counting_open(path, mode="r", *args, **kwargs):
            if isinstance(path, (str, os.PathLike)):
                kind = "open-write" if any(m in mode for m in "wax+") else "read"
                self.counts[(kind, os.path.basename(os.fspath(path)))] += 1
            return real_open(path, mode, *args, **kwargs)

        def counting_write(path, data, *args, **kwargs):
            self.counts[("write", os.path.basename(path))] += 1
            return real_write(path, data, *args, **kwargs)
        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(storage, "atomic_write", counting_write)

    def take(self):
        out, self.counts = self.counts, collections.Counter()
        return out


def timed(request):
    """The agent's answer to a request, every op timed (what the agent reports after its make targets)."""
    return {"ok": True, "promotions": [{"id": p["id"], "ok": True} for p in request["promote"]],
            "ops": [{"id": o["id"], "ok": True, "seconds": 0.25} for o in request["ops"]]}


@pytest.fixture
def rolling(bucket):  # noqa: F811
    """The bucket with web rolling one worker at a time behind a health gate: steps 0, 1 (gated) and the final pass."""
    job(bucket, "web", {"version": "2.0.0", "selectors": ["worker"], "deploy_parallel_count": 1,
                        "resources": {"ports": {"web_port": {}}},
                        "health_check": {"checks": [{"type": "tcp", "port": "web_port"}],
                                         "wait": {"attempts": 1, "interval_seconds": 0}}}, makefile=MAKEFILE)
    assert _service.build(bucket).report.ok
    return bucket


def test_each_step_reads_its_run_once_and_writes_state_and_history_once(rolling, monkeypatch):
    assert S.lock(rolling, os.getpid()).taken
    prepared = S.prepare(request(rolling))
    assert not prepared.failed, prepared.msg
    assert [s["step"] for s in prepared.segments] == [0, 1, _run.FINAL]
    # the gate dials 127.0.0.1 (refused at once: the gate fails, which is not what is counted here)
    ctl = S.Controller(addresses=lambda: {h: "127.0.0.1" for h in HOSTS})
    counter = Counter(monkeypatch)
    timed_steps = set()
    for seg in prepared.segments:
        stepped = S.step(prepared.run_dir, seg["step"], ctl)
        assert not stepped.error, stepped.error
        counts = counter.take()
        assert counts[("read", "plan.json")] == 1 and counts[("read", "state.json")] == 1, counts
        assert counts[("read", "catalog.json")] == 1, counts
        assert counts[("write", "state.json")] == 1 and counts[("write", "plan.json")] == 0, counts
        # the step in flight's timings: one write for all its hosts, none when its agents timed nothing
        assert counts[("write", _jobspec.HISTORY_FILE)] == (1 if timed_steps else 0), counts
        timed_steps = set()
        for host in stepped.hosts:
            req = _run.read_request(prepared.run_dir, stepped.key, host)
            _agent_step.done(prepared.run_dir, stepped.key, host, timed(req), None)
            if req["ops"]:
                timed_steps.add(host)
        counts = counter.take()
        assert counts[("write", _jobspec.HISTORY_FILE)] == 0, counts  # never per host
        assert counts[("write", "state.json")] == 0, counts
    finished = S.finish(S.FinishRequest(rolling, prepared.plan, run_dir=prepared.run_dir, run_pid=os.getpid()), ctl)
    counts = counter.take()
    assert counts[("read", "plan.json")] == 1 and counts[("read", "state.json")] == 1, counts
    assert counts[("write", "state.json")] == 1, counts
    assert counts[("write", _jobspec.HISTORY_FILE)] == (1 if timed_steps else 0), counts
    assert any("health gate of job web failed" in p for p in finished.problems), finished.problems
    targets = _jobspec.load_history(rolling)["targets"]
    # every allocation's start timed once: api and web on both workers
    assert sorted(targets) == sorted("%s/start@%s" % (j, h) for j in ("api", "web") for h in HOSTS), targets
    assert all(t["timings"] == [0.25] for t in targets.values()), targets


def test_a_step_that_fails_after_its_fold_keeps_the_fold(tmp_path, monkeypatch):
    """One write per step, yet a step that breaks after folding the step in flight keeps that fold on disk."""
    from tests.unit.plugin_utils.deploy.test_deploy_run import Callbacks, answer_all
    from tests.unit.plugin_utils.deploy.test_run_state import PLAN

    (tmp_path / "data").mkdir()
    run_dir = _run.new_run(str(tmp_path), PLAN)
    _run.advance(_run.RunContext.read(run_dir), 0, Callbacks())
    answer_all(run_dir, 0, ["h1"])

    def broken(plan, state, step):
        state.errors.append("half done")  # what a hook that then crashes left behind is not kept
        raise RuntimeError("a hook crashed")
    with pytest.raises(RuntimeError):
        _run.advance(_run.RunContext.read(run_dir), 1, Callbacks(before=broken))
    state = _run.load_state(run_dir)
    assert state.in_flight is None and state.steps_completed == [0] and "half done" not in state.errors
    counter = Counter(monkeypatch)
    hosts, dummy = _run.advance(_run.RunContext.read(run_dir), 1, Callbacks())
    assert counter.take()[("write", "state.json")] == 1 and _run.load_state(run_dir).in_flight == 1 and hosts

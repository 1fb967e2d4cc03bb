"""deploy/service.py, the deploy's front door, driven without Ansible against a temp bucket: lock, prepare
(catalog checks, plan, pin, run folder), step, finish (fold, prune, KV, stage, unlock)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog, kv_build as _kv_build, service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks
from ansible_collections.maand.core.plugins.plugin_utils.deploy import run as _run, service as S
from ansible_collections.maand.core.plugins.plugin_utils.deploy import rsync as _rsync, stage as _stage
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.maand_init import init_bucket, job, ws
from tests.unit.plugin_utils.deploy.test_deploy_run import answer_all

HOSTS = ["10.0.0.1", "10.0.0.2"]
WORKERS = [{"host": h, "labels": ["worker"]} for h in HOSTS]
MAKEFILE = "start:\n\ttrue\nstop:\n\ttrue\n"


class Screen:
    """A Controller whose screen and warnings are recorded."""

    def __init__(self, watched=False):
        self.lines, self.warnings = [], []
        self.ctl = S.Controller(show=lambda msg, color=None, stderr=False: self.lines.append(msg),
                                warn=self.warnings.append, watched=watched)


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """A built bucket with two jobs on two workers; the temp folder the deploy reads (tempfile.gettempdir: the
    --check plan summaries in maand-plans-<uid>, the run's ssh ControlPath folder) is the test's own, never the
    machine's shared one."""
    os.mkdir(tmp_path / "tmp", 0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    root = init_bucket(tmp_path)
    ws(root, "workers.json", WORKERS)
    job(root, "api", {"version": "1.0.0", "selectors": ["worker"]}, makefile=MAKEFILE)
    job(root, "web", {"version": "2.0.0", "selectors": ["worker"]}, makefile=MAKEFILE)
    ws(root, "jobs/api/conf/a.conf", "port=1\n")
    assert _service.build(root).report.ok
    return root


def fresh_states(hosts=tuple(HOSTS)):
    return {h: {"reachable": True, "worker": None, "jobs": None, "deployed": {}, "trees": []} for h in hosts}


def request(root, **kw):
    return S.PlanRequest(root, list(HOSTS), kw.pop("states", fresh_states()), run_pid=os.getpid(), **kw)


def deploy(root, prepared, ctl=None):
    """Every step of the run, each worker answering ok; the finish."""
    for seg in prepared.segments:
        stepped = S.step(prepared.run_dir, seg["step"], ctl)
        assert not stepped.error, stepped.error
        answer_all(prepared.run_dir, stepped.key, stepped.hosts)
    return S.finish(S.FinishRequest(root, prepared.plan, run_dir=prepared.run_dir, run_pid=os.getpid()), ctl)


def test_prepare_refuses_a_bucket_without_catalog_and_releases_the_lock(tmp_path):
    root = init_bucket(tmp_path)
    assert S.lock(root, os.getpid()).as_result()["taken"]
    out = S.prepare(request(root))
    assert out.failed and "data/catalog.json does not exist" in out.msg and "maand.core.build" in out.msg
    assert out.as_result() == {"failed": True, "changed": False, "msg": out.msg}
    assert _locks.read_lock(root) is None


def test_prepare_refuses_a_stale_catalog_and_changes_nothing(bucket):
    ws(bucket, "jobs/api/conf/a.conf", "port=2\n")
    out = S.prepare(request(bucket))
    assert out.failed and out.msg.startswith("ErrStaleCatalog: ") and "nothing was changed" in out.msg, out.msg
    assert not os.path.exists(_run.runs_root(bucket)) and not os.path.exists(_stage.stage_root(bucket))


def test_prepare_refuses_an_unknown_job_in_the_filter(bucket):
    out = S.prepare(request(bucket, jobs="apii"))
    assert out.failed and "apii" in out.msg and '"api"' in out.msg, out.msg


def test_check_mode_plans_and_shows_without_writing_the_bucket(bucket):
    screen = Screen()
    out = S.prepare(request(bucket, check_mode=True), screen.ctl)
    assert not out.failed and out.changed and out.run_dir == "" and out.segments == []
    starts = sorted((r["job"], r["worker"]) for r in out.plan["rows"] if r["action"] == "start")
    assert starts == [(j, h) for j in ("api", "web") for h in HOSTS]
    assert screen.lines == out.plan["lines"] + [out.summary]
    assert not os.path.exists(_run.runs_root(bucket)) and not os.path.exists(_stage.stage_root(bucket))
    kept = os.path.join(S.pin.pins_dir(out.plan["bucket_id"]), out.plan_hash + ".json")
    assert kept.startswith(os.path.join(bucket, "tmp") + os.sep)  # the test's own temp folder (the fixture)
    assert json.load(open(kept, encoding="utf-8")) == json.loads(json.dumps(S.pin.plan_summary(out.plan)))
    result = out.as_result()
    assert result["segment_groups"] == [] and result["content_diff"] == {"hosts": []} and "diff" not in result


def test_a_watched_run_prints_nothing_and_diff_mode_returns_the_plan_as_a_diff(bucket):
    screen = Screen(watched=True)
    assert not S.prepare(request(bucket, check_mode=True), screen.ctl).failed and screen.lines == []
    out = S.prepare(request(bucket, check_mode=True, diff=True), Screen().ctl)
    assert out.diff == {"prepared": "\n".join(out.plan["lines"] + [out.summary]) + "\n"}
    assert set(out.content_diff) >= {"hosts", "wanted", "after", "blobs"}


def test_a_pinned_plan_hash_that_differs_refuses_and_names_the_change(bucket):
    checked = S.prepare(request(bucket, check_mode=True))
    assert ("plan hash matches the pinned plan %s" % checked.plan_hash[:16]
            in S.prepare(request(bucket, check_mode=True, plan_hash=checked.plan_hash[:16])).plan["lines"])
    assert S.lock(bucket, os.getpid()).as_result()["taken"]
    out = S.prepare(request(bucket, plan_hash=checked.plan_hash[:16], force=True))
    assert out.failed and "not the pinned plan %s" % checked.plan_hash[:16] in out.msg, out.msg
    assert out.plan is not None and out.as_result()["plan"] is out.plan
    assert _locks.read_lock(bucket) is None  # a refused deploy does not keep the bucket locked


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_check_mode_refuses_a_pins_folder_someone_else_made_and_a_deploy_never_reads_it(bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(S.pin.tempfile, "tempdir", str(tmp_path / "shared"))
    os.mkdir(tmp_path / "shared")
    planted = tmp_path / "shared" / ("maand-plans-%d" % os.getuid())
    planted.mkdir(0o700)
    os.chown(planted, 54321, 54321)
    out = S.prepare(request(bucket, check_mode=True))
    assert out.failed and out.plan is not None and os.listdir(planted) == [], out.msg
    assert "cannot be kept: %s belongs to uid 54321" % planted in out.msg and "rm -rf %s" % planted in out.msg, out.msg
    # a summary someone else left there is not read: the refusal says only that the hash differs
    os.rmdir(planted)
    checked = S.prepare(request(bucket, check_mode=True))
    kept = os.path.join(S.pin.pins_dir(checked.plan["bucket_id"]), checked.plan_hash + ".json")
    assert not checked.failed and os.path.isfile(kept)
    given = checked.plan_hash[:12] + "0000"
    os.rename(kept, os.path.join(os.path.dirname(kept), given + ".json"))
    assert S.pin.pinned_summary(checked.plan["bucket_id"], given) is not None
    os.chmod(planted, 0o770)
    assert S.pin.pinned_summary(checked.plan["bucket_id"], given) is None
    out = S.prepare(request(bucket, plan_hash=given, force=True))
    assert out.failed and "summary is not on this controller" in out.msg, out.msg


def test_prepare_step_finish_deploys_and_cleans_up(bucket):
    assert S.lock(bucket, os.getpid()).as_result()["taken"]
    screen = Screen()
    prepared = S.prepare(request(bucket), screen.ctl)
    assert not prepared.failed, prepared.msg
    assert os.path.isfile(os.path.join(prepared.run_dir, "plan.json")) and prepared.segments
    assert os.path.isdir(_stage.stage_root(bucket))  # the trees that sync are staged
    control_dir = _rsync.control_dir(prepared.run_dir)
    _rsync.mux_options(control_dir)  # the run's own ssh ControlPath folder, as its ssh calls make it
    finished = deploy(bucket, prepared, screen.ctl)
    result = finished.as_result()
    assert not result.get("failed") and finished.problems == [], finished.problems
    assert result["msg"] == "deploy done: start 4" and result["verdict_line"] == "deploy done: 4 started"
    assert screen.lines[-1] == "deploy done: 4 started"
    assert not os.path.exists(prepared.run_dir) and not os.path.exists(_stage.stage_root(bucket))
    assert not os.path.exists(control_dir)
    assert _locks.read_lock(bucket) is None


def test_finish_prunes_cleaned_removed_jobs_and_drops_their_kv(bucket):
    store = _store.KVStore.load(bucket)
    store.put("vars/job/web", "kept_until_cleaned", "yes")
    store.save()
    shutil.rmtree(os.path.join(bucket, "workspace", "jobs", "web"))
    assert _service.build(bucket).report.ok
    states = fresh_states()
    for host in HOSTS:  # web runs on both workers: the deploy stops and removes it
        states[host].update(trees=["web"], deployed={"web": {"job": "web", "version": "2.0.0", "hash": "x",
                                                             "running": True, "alloc_id": "web-" + host}})
    screen = Screen()
    prepared = S.prepare(request(bucket, states=states, jobs="web"), screen.ctl)
    assert not prepared.failed, prepared.msg
    assert {r["action"] for r in prepared.plan["rows"]} == {"remove"}
    finished = deploy(bucket, prepared, screen.ctl)
    assert finished.problems == [] and finished.changed, finished.problems
    assert finished.pruned == ["web@10.0.0.1", "web@10.0.0.2"]
    assert "web" not in [j["name"] for j in _catalog.read_catalog(bucket)["jobs"]]
    assert "vars/job/web" not in _kv_build.read_kv(bucket)
    assert any(line.startswith("KV: ") and "web" in line for line in screen.lines)


def test_finish_of_a_run_whose_workers_never_answered_fails_keeps_the_folder_and_unlocks(bucket):
    assert S.lock(bucket, os.getpid()).as_result()["taken"]
    prepared = S.prepare(request(bucket))
    first = S.step(prepared.run_dir, prepared.segments[0]["step"])
    assert not first.error and first.hosts
    _rsync.mux_options(_rsync.control_dir(prepared.run_dir))
    finished = S.finish(S.FinishRequest(bucket, prepared.plan, run_dir=prepared.run_dir, run_pid=os.getpid()))
    result = finished.as_result()
    assert result["failed"] and result["msg"].startswith("deploy finished with 6 problem(s) (start 4):"), result
    assert "api@10.0.0.1: start failed: no result from the worker" in result["msg"]
    assert os.path.isdir(prepared.run_dir) and _locks.read_lock(bucket) is None
    assert not os.path.exists(_rsync.control_dir(prepared.run_dir))  # its ssh folder goes all the same


def test_a_step_of_a_missing_run_folder_is_an_error_of_the_step(tmp_path):
    stepped = S.step(str(tmp_path / "gone"), 0)
    assert stepped.error.startswith("deploy step 0: ") and "plan.json is missing" in stepped.error
    assert stepped.as_result() == {"failed": True, "changed": False, "msg": stepped.error}


def test_lock_is_refused_while_another_live_run_holds_it(bucket):
    assert S.lock(bucket, os.getppid()).as_result()["taken"]  # a live process that is not this one
    refused = S.lock(bucket, os.getpid()).as_result()
    assert refused["failed"] and refused["msg"].startswith("deploy refused: ")
    assert S.unlock(bucket, os.getpid()).as_result()["released"] is False
    assert S.unlock(bucket, os.getppid()).as_result()["released"] is True
    assert S.unlock(bucket, os.getppid(), check_mode=True).as_result()["msg"] == "check mode: lock untouched"


def test_lock_and_unlock_are_records_whose_result_is_the_task_s(bucket, tmp_path):
    missing = str(tmp_path / "missing")
    for locking in (S.lock(missing, 1), S.unlock(missing, 1)):
        assert locking.failed and locking.as_result() == {
            "failed": True, "msg": "bucket folder %s does not exist (maand_bucket_dir)" % missing}
    taken = S.lock(bucket, os.getpid())
    assert taken.as_result() == {"changed": False, "pid": os.getpid(), "lock": _locks.lock_path(bucket), "taken": True,
                                 "msg": taken.msg}
    released = S.unlock(bucket, os.getpid())
    assert released.as_result() == {"changed": False, "pid": os.getpid(), "lock": _locks.lock_path(bucket),
                                    "released": True, "msg": "deploy lock released"}


def connections_of(conns):
    """connections(hosts=None) over a fixed {host: connection settings}: a Controller's connections in tests."""
    def connections(hosts=None):
        return dict(conns) if hosts is None else {h: conns[h] for h in hosts if h in conns}
    return connections


def test_a_controller_s_connections_over_fixed_settings():
    ctl = S.Controller(connections=connections_of({"h1": {"address": "10.0.0.1"}, "h2": {"address": "10.0.0.2"}}))
    assert ctl.connections(["h2", "h3"]) == {"h2": {"address": "10.0.0.2"}}
    assert sorted(ctl.connections()) == ["h1", "h2"]


def test_a_step_s_gates_and_hooks_read_the_plan_and_the_catalog_once(bucket, monkeypatch):
    """callbacks (one per deploy_step task) reads plan.json and catalog.json once for the gate runner and the
    hook callbacks both (they were read twice each): counting readers over the real ones."""
    assert S.lock(bucket, os.getpid()).as_result()["taken"]
    prepared = S.prepare(request(bucket), Screen().ctl)
    assert not prepared.failed, prepared.msg
    reads = {"plan": 0, "catalog": 0}
    load_plan, read_catalog = _run.load_plan, _catalog.read_catalog

    def counting_plan(run_dir):
        reads["plan"] += 1
        return load_plan(run_dir)

    def counting_catalog(bucket_dir):
        reads["catalog"] += 1
        return read_catalog(bucket_dir)
    monkeypatch.setattr(_run, "load_plan", counting_plan)
    monkeypatch.setattr(_catalog, "read_catalog", counting_catalog)
    with S.callbacks(prepared.run_dir, Screen().ctl) as cbs:
        assert callable(cbs.gate) and cbs.run.plan["bucket_id"] == prepared.plan["bucket_id"]
    assert reads == {"plan": 1, "catalog": 1}
    for seg in prepared.segments:  # the whole run, for real: each step reads the plan and the catalog once
        before_step = dict(reads)
        stepped = S.step(prepared.run_dir, seg["step"])
        assert not stepped.error, stepped.error
        assert reads["catalog"] - before_step["catalog"] == 1 and reads["plan"] - before_step["plan"] == 1
        answer_all(prepared.run_dir, stepped.key, stepped.hosts)
    finished = S.finish(S.FinishRequest(bucket, prepared.plan, run_dir=prepared.run_dir, run_pid=os.getpid()))
    assert not finished.as_result().get("failed"), finished.problems

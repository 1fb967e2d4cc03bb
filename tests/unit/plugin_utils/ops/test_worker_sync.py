"""Job verbs refuse a worker whose worker.json is out of sync with the catalog (ops/worker_sync, maand's
data/validate.go ValidateBucketUpdateSeq): every way a worker can be stale, named with maand's words, on
states shaped as the worker agent's `read` returns them (worker/agent.read_state on real folders).

maand's data/validate_test.go: TestValidateBucketUpdateSeq (a worker in sync passes) is
test_workers_a_deploy_wrote_are_in_sync; TestWorkerSyncError (each reason, with the worker and the deploy
fix) is test_an_older_update_seq_is_maands_update_seq_mismatch, test_bucket_and_worker_id_mismatch_and_a_missing_worker_json
and test_targets_and_the_refusal; TestValidateBucketUpdateSeqWorkerFailure (worker id mismatch) is
test_bucket_and_worker_id_mismatch_and_a_missing_worker_json."""

from __future__ import annotations

import json

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions
from ansible_collections.maand.core.plugins.plugin_utils.ops import worker_sync as _worker_sync
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent

BUCKET = "0f2736e5-c303-4a3d-ad5b-4a78b488dbc0"
HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
CATALOG = {"bucket_id": BUCKET,
           "workers": [{"host": h} for h in HOSTS[:2]] + [{"host": HOSTS[2], "worker_id": "maand-id-3"}],
           "allocations": [{"job": "api", "worker": h, "state": "active"} for h in HOSTS]
           + [{"job": "db", "worker": HOSTS[0], "state": "disabled"}]}


def deployed(tmp_path, host, seq, jobs=({"job": "api", "disabled": 0},), **override):
    """The worker's state as the agent reads it from a real /opt/worker/<bucket_id> folder a deploy wrote."""
    root = tmp_path / host / BUCKET
    root.mkdir(parents=True)
    meta = {"bucket_id": BUCKET, "worker": host, "worker_ip": host, "labels": ["worker"], "update_seq": seq,
            "worker_id": "maand-id-3" if host == HOSTS[2] else _functions.stable_uuid(host)}
    meta.update(override)
    (root / "worker.json").write_text(json.dumps(meta))
    (root / "jobs.json").write_text(json.dumps(list(jobs)))
    return dict(_agent.read_state(str(root)), reachable=True)


def test_workers_a_deploy_wrote_are_in_sync(tmp_path):
    states = {h: deployed(tmp_path, h, 4) for h in HOSTS}
    assert _worker_sync.stale(CATALOG, BUCKET, states, HOSTS, "api") == []
    assert _plan.worker_id({"worker_id": "x"}, "h") == "x" and _plan.worker_id(None, "h") == _functions.stable_uuid("h")


def test_an_older_update_seq_is_maands_update_seq_mismatch(tmp_path):
    states = {HOSTS[0]: deployed(tmp_path, HOSTS[0], 5), HOSTS[1]: deployed(tmp_path, HOSTS[1], 4),
              HOSTS[2]: deployed(tmp_path, HOSTS[2], 5)}
    found = _worker_sync.stale(CATALOG, BUCKET, states, HOSTS, "api")
    assert [s.text() for s in found] == [
        "worker 10.0.0.2: update_seq mismatch (its worker.json has update_seq 4, the bucket's last deploy wrote 5)"]
    # the bucket's update_seq is the highest any worker read reports, at least the catalog's floor
    floor = dict(CATALOG, update_seq_floor=7)
    assert [s.host for s in _worker_sync.stale(floor, BUCKET, states, HOSTS, "api")] == HOSTS
    # only the workers the verb runs on are judged: the stale one left out is no reason to refuse
    assert _worker_sync.stale(CATALOG, BUCKET, states, [HOSTS[0]], "api") == []


def test_bucket_and_worker_id_mismatch_and_a_missing_worker_json(tmp_path):
    states = {HOSTS[0]: deployed(tmp_path, HOSTS[0], 2, bucket_id="another-bucket"),
              HOSTS[1]: deployed(tmp_path, HOSTS[1], 2, worker_id="someone-else"),
              HOSTS[2]: dict(_agent.read_state(str(tmp_path / "never")), reachable=True)}
    found = {s.host: s.reason for s in _worker_sync.stale(CATALOG, BUCKET, states, HOSTS, "api")}
    assert found[HOSTS[0]] == "bucket id mismatch (its worker.json names bucket another-bucket, the catalog %s)" % BUCKET
    assert found[HOSTS[1]] == ("worker id mismatch (its worker.json has worker_id someone-else, the catalog %s)"
                               % _functions.stable_uuid(HOSTS[1]))
    assert found[HOSTS[2]] == "no worker.json in /opt/worker/%s: the bucket was never deployed on this worker" % BUCKET


def test_a_job_the_worker_does_not_hold_enabled_is_stale(tmp_path):
    states = {HOSTS[0]: deployed(tmp_path, HOSTS[0], 3, jobs=[{"job": "db", "disabled": 0}]),
              HOSTS[1]: deployed(tmp_path, HOSTS[1], 3, jobs=[{"job": "api", "disabled": 1}])}
    found = {s.host: s.reason for s in _worker_sync.stale(CATALOG, BUCKET, states, HOSTS[:2], "api")}
    assert "job api is not deployed on it: its jobs.json does not list the job" in found[HOSTS[0]]
    assert "job api is disabled in its jobs.json" in found[HOSTS[1]]
    assert _worker_sync.stale(CATALOG, BUCKET, states, HOSTS[:2], None) == []  # no job: worker.json only


def test_unreachable_or_unread_workers_are_refused_with_the_reason():
    answers = {HOSTS[0]: {"state": {"reachable": False, "error": "ssh: connect to host 10.0.0.1 port 22: refused"}},
               HOSTS[1]: {"unreachable": True, "msg": "timed out"}}
    found = _worker_sync.stale(CATALOG, BUCKET, _worker_sync.states(answers), HOSTS, "api")
    assert [s.text() for s in found] == [
        "worker 10.0.0.1: cannot read its worker.json: ssh: connect to host 10.0.0.1 port 22: refused",
        "worker 10.0.0.2: cannot read its worker.json: timed out",
        "worker 10.0.0.3: its deploy state was not read (the task did not run on it)"]


def test_targets_and_the_refusal():
    assert _worker_sync.targets(CATALOG, "api", HOSTS[::-1]) == HOSTS[::-1]
    assert _worker_sync.targets(CATALOG, "api", HOSTS, [HOSTS[1]]) == [HOSTS[1]]
    assert _worker_sync.targets(CATALOG, "db", HOSTS) == []  # disabled: a verb does not run there
    text = _worker_sync.refusal([_worker_sync.Stale("10.0.0.2", "update_seq mismatch (x)")], "maand.core.job")
    assert text.splitlines() == [
        "maand.core.job: 1 worker(s) out of sync with the catalog; nothing was run:",
        "  worker 10.0.0.2: update_seq mismatch (x)",
        "Fix: deploy first (ansible-playbook -i <bucket>/maand.yml maand.core.deploy; maand: run maand deploy), "
        "then run the job verb again"]

"""Explanations: every rule that rejects a worker, the one-line summary, the build output and the playbook."""

import pytest


from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.placement import explain as _explain
from tests.bucket_factory import make_bucket

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'

# 10 workers: 1-3 have everything; 4-7 lack the prod label; 8-9 have only 2 GB; 10 is disabled
FLEET = [{"host": "10.0.0.%d" % i, "labels": ["worker"] + ([] if 4 <= i <= 7 else ["prod"]),
          "memory": "2 gb" if i in (8, 9) else "8 gb", "cpu": "8000 mhz", "tags": {"zone": "z%d" % (i % 2)}}
         for i in range(1, 11)]
DISABLED = {"workers": ["10.0.0.10"]}


def compute(tmp_path, jobs, workers=None, disabled=None, conf=""):
    workers = FLEET if workers is None else workers
    disabled = DISABLED if disabled is None else disabled
    make_bucket(tmp_path, workers, jobs, maand_conf=CONF + conf, disabled=disabled)
    return _service.compute(str(tmp_path))


def why(result, job, host):
    worker = next(w for w in result.bucket.workers if w.host == host)
    return _explain.explain_worker(result.bucket, result.placement, job, worker.index)


def test_summary_line_in_the_issue_style(tmp_path):
    result = compute(tmp_path, {"api": {"selectors": ["prod"], "hardware": "mem=3G"}})
    assert _explain.summary(result.bucket, result.placement, "api") == \
        "api: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled"


def test_every_rejecting_rule_is_listed_not_only_the_first(tmp_path):
    jobs = {
        "db": {"selectors": ["worker"], "placement": {"count": 1}},
        "api": {"selectors": ["prod", "big"], "hardware": "mem=3G cores=2",
                "constraints": {"and": [{"properties": ["^zone=z0"]}, {"hostlist": ["10.0.0.[1-3]"]}]},
                "placement": {"avoid": ["db"]}},
    }
    result = compute(tmp_path, jobs)
    # 10.0.0.8: 2 GB, zone z0, no big label, outside the hostlist, and db is there (least-waste: smallest)
    assert [a.worker for a in result.placement.allocations if a.job == "db"] == ["10.0.0.8"]
    status, reasons = why(result, "api", "10.0.0.8")
    assert status == "not placed"
    assert reasons == [
        "missing label big (selectors)",
        "$.constraints.and[0].properties[0]: property zone=z0 present but excluded (^zone=z0)",
        "$.constraints.and[1].hostlist: host 10.0.0.8 not in hostlist 10.0.0.[1-3]",
        "hardware: mem 2048 MB < 3072 MB",
        "hardware: cores unknown (workers.json has no cores)",
        "avoid db: db is placed on this worker",
    ]
    summary = _explain.summary(result.bucket, result.placement, "api")
    assert summary.startswith("api: 0/10 workers: 10 cores unknown, 10 missing label big, 7 not in hostlist")
    assert "1 avoids db" in summary and "2 mem < 3G" in summary and "5 has excluded property zone=z0" in summary


def test_count_explanations_name_the_winner_and_capacity_numbers(tmp_path):
    jobs = {"api": {"selectors": ["prod"], "placement": {"count": 1},
                    "resources": {"memory": {"max": "4 gb"}}}}
    result = compute(tmp_path, jobs)
    assert result.report.ok
    status, reasons = why(result, "api", "10.0.0.1")
    assert status == "placed" and reasons[0].startswith("chosen by least-waste (spare after: mem 4096 MB")
    status, reasons = why(result, "api", "10.0.0.2")
    assert status == "not placed"
    assert reasons == ["not chosen by count 1 (least-waste): chosen 10.0.0.1 (spare after: mem 4096 MB, "
                       "cpu 8000 MHz, storage unknown); here spare after: mem 4096 MB, cpu 8000 MHz, storage unknown"]
    assert why(result, "api", "10.0.0.8")[1] == ["capacity exhausted: mem 2048 MB free < 4096 MB reserved"]
    assert why(result, "api", "10.0.0.10")[1] == [
        "worker 10.0.0.10 is disabled in disabled.json: no new allocations there"]
    assert _explain.summary(result.bucket, result.placement, "api") == \
        "api: 1/10 workers (count 1): 4 missing label prod, 2 capacity exhausted, 2 not chosen (count 1), 1 disabled"


def test_with_scale_with_and_disabled_placed_workers(tmp_path):
    jobs = {"db": {"selectors": ["prod"], "placement": {"count": 2, "strategy": "spread"}},
            "agent": {"placement": {"scale_with": "db"}}, "web": {"selectors": ["prod"]}}
    result = compute(tmp_path, jobs)
    assert "scale_with db: db is not active on this worker" in why(result, "agent", "10.0.0.5")[1]
    status, reasons = why(result, "web", "10.0.0.10")
    assert status == "placed, disabled" and "worker 10.0.0.10 is disabled in disabled.json" in reasons[0]
    assert _explain.summary(result.bucket, result.placement, "agent") == "agent: 2/10 workers: 8 db not here"


def test_group_failure_is_explained_with_both_paths(tmp_path):
    conf = '\n[constraint_groups]\nfast = {hostlist = ["10.0.0.[1-2]"]}\n'
    result = compute(tmp_path, {"api": {"selectors": ["worker"], "constraints": {"group": ["fast"]}}}, conf=conf)
    assert why(result, "api", "10.0.0.3")[1] == [
        "$.constraints.group[0]: group fast not matched ($.constraint_groups.fast.hostlist: host 10.0.0.3 "
        "not in hostlist 10.0.0.[1-2])"]
    assert _explain.summary(result.bucket, result.placement, "api") == "api: 2/10 workers: 8 not in group fast"


def test_explain_matches_placement_for_every_worker(tmp_path):
    # placed exactly when no rule rejects (masks vs per-worker explanation agree)
    jobs = {"api": {"selectors": ["worker"], "hardware": "mem=3G",
                    "constraints": {"or": [{"properties": ["zone=z1"]}, {"ranks": ["0-2"]}]}}}
    result = compute(tmp_path, jobs, disabled=None)
    placed = {a.worker for a in result.placement.allocations}
    for worker in result.bucket.workers:
        status, reasons = why(result, "api", worker.host)
        assert (status == "placed") == (worker.host in placed)
        assert bool(reasons) == (worker.host not in placed)


def test_capacity_exceeded_is_explained_on_an_invalid_bucket(tmp_path):
    jobs = {"a": {"selectors": ["prod"], "resources": {"memory": {"max": "6 gb"}}},
            "b": {"selectors": ["prod"], "resources": {"memory": {"max": "6 gb"}}}}
    result = compute(tmp_path, jobs, disabled=None)
    assert not result.report.ok
    status, reasons = why(result, "a", "10.0.0.1")
    assert status == "placed"
    assert reasons == ["capacity exceeded: active reservations need 12288 MB memory, the worker has 8192 MB"]


def test_explain_lines_filters_and_limit(tmp_path):
    result = compute(tmp_path, {"api": {"selectors": ["prod"]}})
    lines = _explain.explain_lines(result.bucket, result.placement, "api", show="rejected", limit=2)
    assert lines[0] == "api: 5/10 workers: 4 missing label prod, 1 disabled"
    assert lines[1] == "  rules: selectors prod"
    assert lines[2] == "  10.0.0.4 (position 3): not placed" and lines[3] == "      - missing label prod (selectors)"
    assert lines[-1].startswith("  ... 2 more workers")
    lines = _explain.explain_lines(result.bucket, result.placement, "api", hosts=["10.0.0.2"])
    assert lines[2:] == ["  10.0.0.2 (position 1): placed"]
    with pytest.raises(KeyError):
        _explain.explain_lines(result.bucket, result.placement, "nope")


def test_build_explains_only_jobs_short_of_what_they_asked_for(tmp_path):
    jobs = {"ok": {"selectors": ["prod"]}, "short": {"selectors": ["prod"], "min_allocations_count": 9},
            "counted": {"selectors": ["prod"], "placement": {"count": 8}}}
    make_bucket(tmp_path, FLEET, jobs, maand_conf=CONF, disabled=DISABLED)
    outcome = _service.build(str(tmp_path))
    assert not outcome.written
    explanations = _service.explain_short_jobs(outcome)
    assert sorted(explanations) == ["counted", "short"]
    assert explanations["short"][0] == "short: 5/10 workers: 4 missing label prod, 1 disabled"
    assert explanations["counted"][0].startswith("counted: 5/10 workers (count 8)")


def test_no_explanations_computed_for_a_healthy_build(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(_explain, "explain_worker", lambda *a, **k: calls.append(a))
    result = compute(tmp_path, {"api": {"selectors": ["prod"], "placement": {"count": 2}}})
    assert result.report.ok and _service.explain_short_jobs(result) == {} and calls == []


def test_explain_action_names_unknown_jobs_and_workers_with_did_you_mean(tmp_path):
    from types import SimpleNamespace
    from unittest import mock

    from ansible_collections.maand.core.plugins.action import explain as explain_action
    compute(tmp_path, {"api": {"selectors": ["worker"]}})
    bucket = str(tmp_path)

    def run(**args):
        task = SimpleNamespace(args=dict(bucket=bucket, **args), async_val=0, check_mode=False, diff=False,
                               action="x", resolved_action="maand.core.explain", environment=[], no_log=False,
                               delegate_to=None)
        connection = mock.MagicMock()
        connection._shell.tmpdir = None
        act = explain_action.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(),
                                          mock.MagicMock())
        return act.run(task_vars={})
    res = run(job="apii")
    assert res["failed"] and 'unknown job \'apii\' (did you mean "api"?)' in res["msg"], res
    res = run(job="api", workers=["10.0.0.100"])  # not a worker; 10.0.0.10 is
    assert res["failed"] and "unknown workers: 10.0.0.100 (did you mean" in res["msg"], res

"""Build resolves each job's health_check into the gate spec deploy runs (catalog job "health_gate": port names
to the assigned numbers, defaults filled in), so deploy does not re-validate it (issue 9 item 1). Catalogs
without the key (older builds) are resolved and checked at deploy; a probe deploy cannot run fails only its job."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.deploy import reconcile as _reconcile
from ansible_collections.maand.core.plugins.plugin_utils.bucket.job_checks import resolve_health
from tests.bucket_factory import make_bucket
from tests.unit.plugin_utils.deploy.test_deploy_plan import catalog, content, job, states

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
HC = {"checks": [{"type": "tcp", "port": "http_port"}, {"type": "http", "port": "admin", "path": "/ok"}],
      "timeout_seconds": 3, "wait": {"attempts": 4}}


def built(tmp_path, jobs):
    make_bucket(tmp_path, [{"host": "10.0.0.1", "labels": ["web"], "memory": "4 gb"}], jobs, maand_conf=CONF)
    result = _service.build(str(tmp_path))
    assert result.report.ok, result.report.error_text()
    return {j["name"]: j for j in json.loads((tmp_path / "data" / "catalog.json").read_text())["jobs"]}


def test_build_stores_the_resolved_gate(tmp_path):
    jobs = built(tmp_path, {
        "api": {"selectors": ["web"], "resources": {"ports": {"http_port": {}, "admin": 31999}}, "health_check": HC},
        "plain": {"selectors": ["web"]},
    })
    api = jobs["api"]
    assert api["health_gate"] == {
        "job": "api", "timeout_seconds": 3.0, "attempts": 4, "interval_seconds": 1.0,
        "checks": [{"type": "tcp", "port": api["ports"]["http_port"]},
                   {"type": "http", "port": 31999, "path": "/ok", "scheme": "http", "expect_status": 200}]}
    assert isinstance(api["ports"]["http_port"], int)
    assert jobs["plain"]["health_gate"] is None  # resolved: no gate
    assert api["health_gate"] == resolve_health(api)[0]  # what deploy computed from the same record


def test_an_ssh_probe_is_resolved_into_the_gate(tmp_path):
    jobs = built(tmp_path, {"api": {"selectors": ["web"], "health_check": {
        "checks": [{"type": "ssh", "command": "test -f /tmp/ok"}]}}})
    assert jobs["api"]["health_gate"]["checks"] == [{"type": "ssh", "command": "test -f /tmp/ok"}]
    cat = catalog([dict(job("api"), health_gate=jobs["api"]["health_gate"])], [("api", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"])
    assert not plan["errors"] and not plan["failures"]


def test_an_unresolvable_probe_of_an_older_catalog_fails_only_its_job():
    cat = catalog([job("api", health_check={"checks": [{"type": "grpc", "port": 1}]}), job("db")],
                  [("api", "h1", "active"), ("db", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api", "db"), states(["h1"]), ["h1"])
    assert not plan["errors"]
    assert [f["job"] for f in plan["failures"]] == ["api"] and "not supported by maand.core" in plan["failures"][0]["msg"]
    assert any(s["jobs"] == ["db"] for s in plan["steps"] if s.get("jobs"))


def test_deploy_uses_the_stored_gate_without_resolving_again():
    gate = {"job": "api", "checks": [{"type": "tcp", "port": 30001}], "timeout_seconds": 1.0, "attempts": 2,
            "interval_seconds": 0.5}
    cat = catalog([job("api", health_check={"checks": "broken, but build resolved it"}, health_gate=gate)],
                  [("api", "h1", "active")])
    with mock.patch.object(_reconcile, "resolve_health", side_effect=AssertionError("deploy re-validated")):
        plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"])
    assert not plan["errors"]
    gates = [g for s in plan["steps"] for g in s["gates"]]
    assert gates and gates[0]["checks"] == gate["checks"] and gates[0]["hosts"] == ["h1"]


@pytest.mark.parametrize("stored", [None, "absent"])
def test_no_gate_or_an_older_catalog(stored):
    rec = job("api") if stored == "absent" else job("api", health_gate=None)
    plan = _plan.compute_plan(catalog([rec], [("api", "h1", "active")]), content("api"), states(["h1"]), ["h1"])
    assert not plan["errors"] and not [g for s in plan["steps"] for g in s["gates"]]

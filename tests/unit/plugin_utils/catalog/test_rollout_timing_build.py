"""Build reads min_healthy_time, progress_deadline and auto_promote (issue 30, items 2, 3 and 5): they reach the
catalog only for the jobs that set them, and a bad value is refused naming the manifest, the field and the fix."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from tests.bucket_factory import make_bucket

W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
CHECKS = {"checks": [{"type": "tcp", "port": "http_port"}]}
PORTS = {"ports": {"http_port": {}}}
MANIFEST = "workspace/jobs/api/manifest.json"


def build(tmp_path, api):
    make_bucket(tmp_path, [W1], {"api": dict({"health_check": CHECKS, "resources": PORTS}, **api), "web": {}})
    return _service.compute(str(tmp_path))


def test_the_rollout_timing_reaches_the_catalog_only_where_set(tmp_path):
    result = build(tmp_path, {"min_healthy_time": 10, "progress_deadline": 60.5, "canary": 1, "auto_promote": True})
    assert result.report.ok, [str(p) for p in result.report.errors]
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert (jobs["api"]["min_healthy_time"], jobs["api"]["progress_deadline"], jobs["api"]["auto_promote"]) == (
        10, 60.5, True)
    assert not {"min_healthy_time", "progress_deadline", "auto_promote"} & set(jobs["web"])


@pytest.mark.parametrize("api, field, words, fix", [
    ({"min_healthy_time": -1}, "min_healthy_time", "must be a number of seconds >= 0, got -1",
     '"min_healthy_time": <seconds every allocation'),
    ({"min_healthy_time": "10s"}, "min_healthy_time", 'must be a number of seconds >= 0, got "10s"', "e.g. 10"),
    ({"progress_deadline": 0}, "progress_deadline", "must be a number of seconds > 0, got 0", "e.g. 600"),
    ({"progress_deadline": True}, "progress_deadline", "must be a number of seconds > 0, got true", "e.g. 600"),
    ({"min_healthy_time": 30, "progress_deadline": 30}, "progress_deadline",
     "progress_deadline (30 s) must be longer than min_healthy_time (30 s)", "raise progress_deadline above 30"),
    ({"auto_promote": True}, "auto_promote", "auto_promote promotes a canary rollout, but the job has no canary",
     'add "canary": 1'),
    ({"canary": 1, "auto_promote": "yes"}, "auto_promote", 'must be true or false, got "yes"', '"auto_promote": true'),
    ({"health_check": {}, "min_healthy_time": 5}, "min_healthy_time", "has no health_check.checks",
     "add health_check.checks"),
    ({"health_check": {}, "progress_deadline": 5}, "progress_deadline", "has no health_check.checks",
     "or remove progress_deadline"),
])
def test_a_bad_value_names_the_manifest_the_field_and_the_fix(tmp_path, api, field, words, fix):
    result = build(tmp_path, api)
    problems = [(p.kind, p.file, p.field) for p in result.report.errors]
    assert problems == [("ErrInvalidManifest", MANIFEST, field)], [str(p) for p in result.report.errors]
    problem = result.report.errors[0]
    assert words in problem.message and fix in problem.fix, (problem.message, problem.fix)

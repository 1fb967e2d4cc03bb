"""A build that removes every allocation of a job that had some fails unless maand_allow_remove_all (issue 31 item 3):
a selector typo built with rc 0 and the next deploy removed the job from every worker."""

from __future__ import annotations

import json
import shutil

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service
from tests.maand_init import init_bucket, job, ws


def _built(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", json.dumps([{"host": "10.0.0.1", "labels": ["web"]}, {"host": "10.0.0.2", "labels": ["web"]}]))
    job(root, "web", json.dumps({"selectors": ["web"]}))
    job(root, "db", json.dumps({}))
    assert service.build(root).written
    return root


def _states(root, name):
    return sorted(a["state"] for a in _catalog.read_catalog(root)["allocations"] if a["job"] == name)


def test_a_selector_typo_that_removes_every_allocation_is_refused(tmp_path):
    root = _built(tmp_path)
    job(root, "web", json.dumps({"selectors": ["wbe"]}))
    result = service.build(root)
    assert not result.written
    texts = [str(p) for p in result.report.errors]
    assert texts == ["ErrRemoveAll: workspace/jobs/web/manifest.json: selectors: job web had 2 allocations (10.0.0.1, "
                     "10.0.0.2) and this build places it on no worker (selectors: wbe): every one would be removed "
                     "(fix: check the selectors and the workers' labels (ansible-playbook maand.core.explain -e job=web); "
                     "to remove them all, build with -e maand_allow_remove_all=true; to retire the job, delete "
                     "workspace/jobs/web)"], texts
    assert _states(root, "web") == ["active", "active"]


def test_allowed_it_is_a_warning_and_the_build_writes(tmp_path):
    root = _built(tmp_path)
    job(root, "web", json.dumps({"selectors": ["wbe"]}))
    result = service.build(root, allow_remove_all=True)
    assert result.written and result.report.ok
    assert any(w.kind == "ErrRemoveAll" and "maand_allow_remove_all=true" in w.message for w in result.report.warnings)
    assert _states(root, "web") == ["removed", "removed"]


def test_retiring_a_job_or_keeping_one_allocation_needs_no_option(tmp_path):
    root = _built(tmp_path)
    ws(root, "workers.json", json.dumps([{"host": "10.0.0.1", "labels": ["web"]}, {"host": "10.0.0.2"}]))
    assert service.build(root).report.ok  # web keeps 10.0.0.1
    shutil.rmtree(root + "/workspace/jobs/web")
    result = service.build(root)
    assert result.report.ok and result.written, [str(p) for p in result.report.errors]


def test_workers_gone_count_too_and_check_mode_says_it(tmp_path):
    root = _built(tmp_path)
    ws(root, "workers.json", json.dumps([]))
    result = service.build(root, check_mode=True)
    # db (no selectors: maand's default selector is the job's name) never had an allocation
    assert [p.message.split(" had ")[0] for p in result.report.errors if p.kind == "ErrRemoveAll"] == ["job web"]

"""The build's warnings are kept with the catalog and the deploy plan repeats them (issue 31 item 3)."""

from __future__ import annotations

import json

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service
from ansible_collections.maand.core.plugins.plugin_utils.deploy import service as deploy_service
from tests.maand_init import init_bucket, job, ws


def test_warnings_are_kept_and_repeated_and_a_clean_build_keeps_none(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", json.dumps([{"host": "10.0.0.1"}]))
    job(root, "a", json.dumps({"selectors": ["worker"], "owner": "me"}))
    assert service.build(root).written
    catalog = _catalog.read_catalog(root)
    assert any("unknown key 'owner' is ignored" in w for w in catalog["build_warnings"]), catalog["build_warnings"]
    lines = deploy_service.build_warning_lines(catalog)
    assert lines and all(line.startswith("build warning: ") for line in lines)
    job(root, "a", json.dumps({"selectors": ["worker"]}))
    assert service.build(root).written
    assert "build_warnings" not in _catalog.read_catalog(root)
    assert deploy_service.build_warning_lines(_catalog.read_catalog(root)) == []


def test_many_warnings_are_cut_with_a_count():
    class Report:
        warnings = ["w%d" % i for i in range(service.MAX_KEPT_WARNINGS + 3)]
    catalog = {}
    service.keep_warnings(catalog, Report())
    assert len(catalog["build_warnings"]) == service.MAX_KEPT_WARNINGS + 1
    assert catalog["build_warnings"][-1] == "and 3 more (run maand.core.build)"

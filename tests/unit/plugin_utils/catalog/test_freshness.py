"""Which verbs run on the last built catalog after an unbuilt edit (issue 31 item 2): the policy table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.catalog import freshness
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service

PLAYBOOKS = Path(__file__).resolve().parents[4] / "playbooks"


def test_every_playbook_has_a_policy():
    assert set(freshness.POLICY) == {"maand.core." + p.stem for p in PLAYBOOKS.glob("*.yml")}


@pytest.mark.parametrize("verb", ["status", "health_check", "cat", "info", "logs", "job", "run_command"])
def test_read_only_and_emergency_verbs_run_on_the_last_built_catalog(verb):
    assert freshness.policy("maand.core." + verb) == freshness.WARN
    assert freshness.allows_stale(["maand.core." + verb])


@pytest.mark.parametrize("verbs", [["maand.core.deploy"], ["maand.core.gc"], ["maand.core.job_command"],
                                   ["site.yml"], [], ["maand.core.status", "maand.core.deploy"],
                                   ["maand.core.build"], ["maand.core.explain"]])
def test_deploy_gc_a_users_playbook_no_playbook_and_build_get_the_failure(verbs):
    assert not freshness.allows_stale(verbs)


def test_the_warning_names_what_changed_and_the_build():
    changes = ["workspace/jobs/j%d/ changed" % i for i in range(12)]
    text = freshness.stale_warning("/b", changes)
    assert text.startswith("ErrStaleCatalog: /b/data/catalog.json: the workspace changed since the last build "
                           "(workspace/jobs/j0/ changed; ")
    assert "j9/ changed; and 2 more)" in text and "j10" not in text
    assert "ansible-playbook maand.core.build -e maand_bucket=/b" in text


def _bucket(tmp_path):
    (tmp_path / "maand.conf").write_text('ssh_user = "agent"\n')
    jobs = tmp_path / "workspace" / "jobs" / "api"
    jobs.mkdir(parents=True)
    (tmp_path / "workspace" / "workers.json").write_text(json.dumps([{"host": "10.0.0.1"}]))
    (jobs / "manifest.json").write_text(json.dumps({"version": "1.0.0"}))
    (jobs / "Makefile").write_text("start:\n\ttrue\nstop:\n\ttrue\nrestart:\n\ttrue\n")
    result = service.build(str(tmp_path))
    assert result.report.ok, [str(p) for p in result.report.errors]
    return tmp_path


def test_read_built_refuses_a_stale_catalog_unless_allowed(tmp_path):
    bucket = _bucket(tmp_path)
    assert _catalog.stale_note(str(bucket)) == ""
    manifest = bucket / "workspace" / "jobs" / "api" / "manifest.json"
    manifest.write_text(json.dumps({"version": "1.1.0"}))
    with pytest.raises(_catalog.CatalogError, match="ErrStaleCatalog"):
        _catalog.read_built(str(bucket))
    assert _catalog.read_built(str(bucket), allow_stale=True)["jobs"][0]["version"] == "1.0.0"
    note = _catalog.stale_note(str(bucket))
    assert "workspace/jobs/api/ changed" in note and note.startswith("ErrStaleCatalog: ")

"""ops/report.py: a verb's report, its JSON document and its custom stats; maand_format from -e."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.ops import report as _report


def test_the_document_carries_data_outcome_summary_counts_and_errors():
    found = _report.Report("status", outcome="failed", summary="status: 1 not running", lines=["T"],
                           counts={"not_running": 1}, data={"rows": [1]}, problems=["api@h1 not running"])
    doc = found.document()
    assert doc == {"rows": [1], "verb": "status", "outcome": "failed", "summary": "status: 1 not running",
                   "counts": {"not_running": 1}, "errors": ["api@h1 not running"]}
    assert found.stats() == {"maand_status": doc}
    assert _report.Report.from_json(json.loads(json.dumps(found.to_json()))) == found


def test_the_screen_is_the_lines_or_the_json_document_alone():
    table = _report.Report("info", lines=["a", "b"], data={"x": 1})
    assert table.screen() == ["a", "b"]
    doc = _report.Report("info", lines=["a"], data={"x": 1}, format="json").screen()
    assert len(doc) == 1 and json.loads(doc[0])["x"] == 1


def test_a_verb_s_own_keys_win_over_the_defaults():
    doc = _report.Report("logs", outcome="ok", summary="3 runs", data={"summary": "mine", "outcome": "kept"}).document()
    assert doc["summary"] == "mine" and doc["outcome"] == "kept"


@pytest.mark.parametrize("extra, expected", [
    ([], "table"), (["maand_format=json"], "json"), (["maand_jobs=api maand_format=json"], "json"),
    (['{"maand_format": "json"}'], "json"), (["maand_format=table"], "table"), (["@vars.yml"], "table"),
    (["maand_format=JSON"], "json"), (["maand_format=json", "maand_format=table"], "table"), (["{bad"], "table"),
])
def test_the_format_from_the_command_line(extra, expected):
    assert _report.format_from_extra_vars(extra) == expected


def test_check_format_names_the_choices():
    assert _report.check_format(None) == "table" and _report.check_format(" JSON ") == "json"
    with pytest.raises(ValueError, match="maand_format=yaml is not known; use -e maand_format=table or"):
        _report.check_format("yaml")


def test_a_run_that_failed_before_any_report():
    doc = _report.failure_document("status", ["maand_jobs: job nope is not in the catalog"])
    assert doc == {"verb": "status", "outcome": "failed", "summary": "maand_jobs: job nope is not in the catalog",
                   "errors": ["maand_jobs: job nope is not in the catalog"], "counts": {"errors": 1}}
    assert _report.counted(["ok", "ok", "failed"]) == {"ok": 2, "failed": 1}

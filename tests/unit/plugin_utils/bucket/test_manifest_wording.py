"""Build wording as maand's (issue 23 item 8): a bad manifest.json carries Go's JSON reader text after
maand's "invalid manifest.json: job <job>", a manifest.json that is a folder and a negative batch count
are refused naming the file and field. Go's texts: tests/data/maand/go_json_errors.json, made by
go_json_errors.go.txt (Go 1.19's encoding/json)."""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import readers as _readers
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from tests.maand_init import init_bucket, job, ws

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "maand", "go_json_errors.json")
with open(DATA, encoding="utf-8") as _handle:
    GO = json.load(_handle)


def test_go_json_error_words_every_case_as_go():
    mismatches = []
    for case in GO:
        found = _readers.go_json_error(case["text"])
        got = found[0] if found else ""
        if got != case["go_error"]:
            mismatches.append((case["text"], case["go_error"], got))
    assert not mismatches, mismatches[:5]
    assert sum(1 for case in GO if case["go_error"]) > 200  # mostly broken documents


def errors(root):
    result = _service.compute(root)
    return [(p.kind, p.file, p.field, p.message) for p in result.report.errors]


@pytest.mark.parametrize("text, words", [
    ("{", "invalid manifest.json: job a: unexpected end of JSON input (line 1, column 2)"),
    ('{\n  "version": "1.0.0",\n}',
     "invalid manifest.json: job a: invalid character '}' looking for beginning of object key string (line 3, column 1)"),
    ('{"selectors": ["worker"] "version": "1"}',
     "invalid manifest.json: job a: invalid character '\"' after object key:value pair (line 1, column 26)"),
    ("", "invalid manifest.json: job a: unexpected end of JSON input (line 1, column 1)"),
])
def test_invalid_manifest_json_carries_gos_reason(tmp_path, text, words):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "a", text)
    assert ("ErrInvalidManifest", "workspace/jobs/a/manifest.json", "", words) in errors(root), errors(root)


@pytest.mark.parametrize("field", ["max_concurrent_starts", "max_concurrent_upgrades", "deploy_parallel_count"])
def test_a_negative_batch_count_is_refused(tmp_path, field):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "a", json.dumps({"selectors": ["worker"], field: -1}))
    found = [e for e in errors(root) if e[2] == field]
    assert found and found[0][0] == "ErrInvalidManifest" and "must be >= 0, got -1" in found[0][3], errors(root)
    assert _service.build(root).written is False


def test_a_manifest_that_is_a_folder_is_an_error_naming_it(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "b", '{"selectors": ["worker"]}')
    os.makedirs(os.path.join(root, "workspace", "jobs", "a", "manifest.json"))
    assert ("ErrInvalidManifest", "workspace/jobs/a/manifest.json", "", "job a: manifest.json is a folder, not a file") \
        in errors(root), errors(root)


def test_a_job_without_makefile_is_maands_wording(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "a", '{"selectors": ["worker"]}', makefile=None)
    assert ("ErrInvalidJob", "workspace/jobs/a", "Makefile", "invalid job: job a, Makefile or Makefile.tpl not found") \
        in errors(root), errors(root)


def test_maands_own_cases_read_as_maand_words_them(tmp_path):
    """maand's tests/build_bucket_test.go: TestMakefileNotFound and TestInvalidmanifestJSON (maand joins the two
    parts of the second with a newline, one error line here: `: `)."""
    root = init_bucket(tmp_path)
    job(root, "a", '{"selectors":["worker"], "certs":{"a":{"subject":{"common":"fsadfsad"}}}}', makefile=None)
    texts = [str(p) for p in _service.compute(root).report.errors]
    assert any("invalid job: job a, Makefile or Makefile.tpl not found" in t for t in texts), texts
    job(root, "a", '{"selectors":["worker"],')
    texts = [str(p) for p in _service.compute(root).report.errors]
    assert any("invalid manifest.json: job a: unexpected end of JSON input" in t for t in texts), texts

"""Hostile or odd input (issue 9, "Hostile input"): each gives an error naming the file and the field,
never a traceback, and nothing is written. Plus property tests that inject such values anywhere."""

import json
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket import readers as _readers
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import KINDS
from tests.bucket_factory import write
from tests.maand_init import init_bucket, job, ws


def refused(root, file, field=None, words=None):
    result = _service.build(root)
    assert not result.report.ok and not result.written
    assert not os.path.exists(_catalog.catalog_path(root))
    hits = [p for p in result.report.errors if p.file == file and (field is None or p.field.lstrip("$.") == field)]
    assert hits, "\n".join(str(p) for p in result.report.errors)
    if words:
        assert words in str(hits[0]), str(hits[0])
    assert all(p.fix for p in result.report.errors)
    return hits[0]


@pytest.mark.parametrize("literal, field, words", [
    ("NaN", "[0].memory", "NaN is not a number JSON allows"),
    ("Infinity", "[0].memory", "Infinity"),
    ("-Infinity", "[0].cpu", "-Infinity"),
    ("1e400", "[0].memory", "1e400 is out of range"),
    ("123456789012345678901234567890", "[0].position", "out of range"),  # Go: int field overflows
    ("1" * 5000, "[0].memory", "out of range"),
])
def test_json_non_numbers_and_overflow_in_workers_json(tmp_path, literal, field, words):
    root = init_bucket(tmp_path)
    key = field.split(".")[1]
    ws(root, "workers.json", '[{"host": "10.0.0.1", "%s": %s}]' % (key, literal))
    refused(root, "workspace/workers.json", field if len(literal) < 4000 else "", words)


@pytest.mark.parametrize("manifest, field", [
    ('{"resources": {"memory": {"max": NaN}}}', "resources.memory.max"),
    ('{"resources": {"cpu": {"min": 1e999}}}', "resources.cpu.min"),
    ('{"min_allocations_count": 1e400}', "min_allocations_count"),
    ('{"health_check": {"timeout_seconds": -Infinity}}', "health_check.timeout_seconds"),
])
def test_json_non_numbers_in_a_manifest(tmp_path, manifest, field):
    root = init_bucket(tmp_path)
    job(root, "a", manifest)
    refused(root, "workspace/jobs/a/manifest.json", field)


@pytest.mark.parametrize("value", ['"2000000000000000 mb"', "1e300", '"9999999999999999 gb"', '"' + "9" * 400 + ' mb"'])
def test_quantities_out_of_range(tmp_path, value):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host": "10.0.0.1", "memory": %s}]' % value)
    refused(root, "workspace/workers.json", "[0].memory", "out of range")


def test_200000_deep_json_is_a_clear_error(tmp_path):
    root = init_bucket(tmp_path)
    job(root, "a", '{"x": ' + "[" * 200000 + "]" * 200000 + "}")
    refused(root, "workspace/jobs/a/manifest.json", None, "nesting is too deep")
    ws(root, "workers.json", "[" * 200000 + "]" * 200000)
    refused(root, "workspace/workers.json", None, "nesting is too deep")


def test_moderately_deep_json_is_bounded_naming_the_field(tmp_path):
    root = init_bucket(tmp_path)
    job(root, "a", {"description": "x", "deep": json.loads("[" * 100 + "]" * 100)})
    refused(root, "workspace/jobs/a/manifest.json", None, "nested deeper than 64 levels")
    os.remove(os.path.join(root, "workspace/jobs/a/manifest.json"))
    ws(root, "workers.json", json.dumps([{"host": "10.0.0.1", "extra": json.loads("[" * 100 + "]" * 100)}]))
    hit = refused(root, "workspace/workers.json", None, "nested deeper")
    assert hit.field.startswith("[0].extra")


def test_file_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(_readers, "MAX_FILE_BYTES", 1024)
    root = init_bucket(tmp_path)
    ws(root, "workers.json", json.dumps([{"host": "10.0.0.%d" % i} for i in range(100)]))
    refused(root, "workspace/workers.json", "", "larger than")


@pytest.mark.parametrize("file, text, field", [
    ("workspace/bucket.conf", 'port_min = 1979-05-27\n', "port_min"),
    ("workspace/bucket.conf", 'started = 07:32:00\n', "started"),
    ("maand.conf", 'ssh_user = 1979-05-27T07:32:00Z\n', "ssh_user"),
    ("maand.conf", 'job_config_selector = 2024-01-01\n', "job_config_selector"),
    ("maand.conf", 'certs_ttl = "60"\n', "certs_ttl"),
    ("maand.conf", 'ssh_port = nan\n', "ssh_port"),
    ("maand.conf", 'ssh_port = 99999999999999999999999\n', "ssh_port"),
    ("maand.conf", 'use_sudo = inf\n', "use_sudo"),
])
def test_toml_dates_and_odd_values_name_the_key(tmp_path, file, text, field):
    root = init_bucket(tmp_path)
    write(os.path.join(root, file), text)
    refused(root, file, field)


def test_deep_toml_is_a_clear_error(tmp_path):
    root = init_bucket(tmp_path)
    write(os.path.join(root, "maand.conf"), "x = " + "[" * 5000 + "]" * 5000 + "\n")
    refused(root, "maand.conf", None, "nesting is too deep")


def test_data_symlink_is_refused_and_nothing_written_through_it(tmp_path):
    root = init_bucket(tmp_path / "bucket")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(root, "data"))
    refused(root, "data", None, "data/ is a symlink")
    assert os.listdir(str(outside)) == []  # no lock file, no catalog
    assert not _service.build(root, check_mode=True).report.ok


@pytest.mark.parametrize("link, target, ok", [
    ("conf/app.conf", "../files/app.conf", True),           # relative, stays inside
    ("same.conf", "files/app.conf", True),
    ("abs.conf", "{job}/files/app.conf", False),             # absolute, even though it resolves into the job
    ("up.conf", "../a/files/app.conf", False),              # leaves the folder as written
    ("out.conf", "../../../outside.txt", False),
    ("dangling.conf", "/nonexistent/x", False),
])
def test_job_symlinks(tmp_path, link, target, ok):
    root = init_bucket(tmp_path)
    job(root, "a", {})
    job_dir = os.path.join(root, "workspace", "jobs", "a")
    write(os.path.join(job_dir, "files", "app.conf"), "x")
    write(os.path.join(root, "outside.txt"), "x")
    os.makedirs(os.path.dirname(os.path.join(job_dir, link)), exist_ok=True)
    os.symlink(target.format(job=job_dir), os.path.join(job_dir, link))
    result = _service.compute(root)
    assert result.report.ok == ok, "\n".join(map(str, result.report.errors))
    if not ok:
        assert [(p.kind, p.file, p.field) for p in result.report.errors] == [("ErrInvalidJob", "workspace/jobs/a", link)]


def test_linked_folder_that_escapes_is_refused(tmp_path):
    root = init_bucket(tmp_path)
    job(root, "a", {})
    job_dir = os.path.join(root, "workspace", "jobs", "a")
    os.symlink("../../..", os.path.join(job_dir, "up"))
    assert [p.field for p in _service.compute(root).report.errors] == ["up"]


# --- property tests: hostile values anywhere ---------------------------------------------------------

# Not JSON (NaN, Infinity) or beyond a float64, which is how Go reads a number it has no type for.
HOSTILE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400 + ".5"])
SAFE = st.one_of(st.integers(0, 10), st.sampled_from(['"1 gb"', '"x"', "true", "null", "[]", "{}"]))


@st.composite
def json_with_hostile_number(draw):
    """A JSON text (built as text, since json.dumps cannot write these literals) with one hostile number
    somewhere under a random path of keys and list positions."""
    inner = draw(HOSTILE)
    for dummy in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            inner = "[%s, %s]" % (draw(SAFE), inner) if draw(st.booleans()) else "[%s]" % inner
        else:
            inner = '{"%s": %s}' % (draw(st.sampled_from(["memory", "cpu", "x", "min", "max", "labels"])), inner)
    return inner


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_with_hostile_number(), st.sampled_from(["manifest", "worker", "disabled"]),
       st.sampled_from(["resources", "memory", "extra", "jobs", "workers", "health_check"]))
def test_hostile_numbers_anywhere_are_refused_with_file_and_field(value, where, key):
    root = init_bucket(tempfile.mkdtemp(prefix="maand-hostile-"))
    try:
        if where == "manifest":
            job(root, "a", '{"%s": %s}' % (key, value))
            file = "workspace/jobs/a/manifest.json"
        elif where == "worker":
            ws(root, "workers.json", '[{"host": "10.0.0.1", "%s": %s}]' % (key, value))
            file, key = "workspace/workers.json", "[0]." + key
        else:
            ws(root, "disabled.json", '{"%s": %s}' % (key, value))
            file = "workspace/disabled.json"
        result = _service.build(root)
        assert not result.report.ok and not result.written
        assert all(p.kind in KINDS and p.file and p.fix for p in result.report.errors)
        hits = [p for p in result.report.errors if p.file == file]
        assert hits and hits[0].field.startswith(key), [str(p) for p in result.report.errors]
        assert not os.path.exists(_catalog.catalog_path(root))
    finally:
        shutil.rmtree(root)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3000), st.sampled_from(["[", '{"a":']), st.sampled_from(["manifest", "worker"]))
def test_any_nesting_depth_builds_or_names_the_file(depth, opener, where):
    closer = "]" if opener == "[" else "}"
    value = opener * depth + "1" + closer * depth
    root = init_bucket(tempfile.mkdtemp(prefix="maand-deep-"))
    try:
        if where == "manifest":
            job(root, "a", '{"extra": %s}' % value)
            file = "workspace/jobs/a/manifest.json"
        else:
            ws(root, "workers.json", '[{"host": "10.0.0.1", "extra": %s}]' % value)
            file = "workspace/workers.json"
        result = _service.build(root)
        assert all(p.kind in KINDS and p.file and p.fix for p in result.report.errors)
        if depth + 2 > _readers.MAX_DEPTH:
            assert any(p.file == file for p in result.report.errors)
        else:
            assert result.report.ok and result.written
            with open(_catalog.catalog_path(root)) as handle:
                json.load(handle, parse_constant=lambda c: pytest.fail("catalog holds %s" % c))
    finally:
        shutil.rmtree(root)

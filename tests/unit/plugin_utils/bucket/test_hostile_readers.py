"""Hostile input in the files read outside the model (issue 9, "Hostile input" and "One reader"): a job's
vars.toml and an image's OCI JSON go through the bucket's one reader (_readers), so deep nesting, NaN,
infinities and 64-bit overflow give an error naming the file (and key), never a traceback."""

from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions
from ansible_collections.maand.core.plugins.plugin_utils.bucket import readers as _readers
from ansible_collections.maand.core.plugins.plugin_utils.jobspec import SpecError, read_oci_layout
from tests.maand_init import init_bucket, job

DEEP = "a = " + "[" * 200000 + "]" * 200000 + "\n"


@pytest.mark.parametrize("text, words", [
    (DEEP, "nesting is too deep"),
    ("a = nan\n", "nan"),
    ("a = inf\n", "inf"),
    ("a = 99999999999999999999\n", "out of range"),
    ("a = 1\nb = {c = 1}\n", "b is a table"),
    ("a = \"x\n", "Illegal character"),
], ids=["deep", "nan", "inf", "int64", "table", "syntax"])
def test_hostile_vars_toml_is_a_named_error(tmp_path, text, words):
    root = Path(init_bucket(tmp_path))
    job(str(root), "a", "{}")
    (root / "workspace" / "jobs" / "a" / "vars.toml").write_text(text)
    result = _service.build(str(root))
    assert not result.report.ok and not result.written
    assert not (root / "data" / "catalog.json").exists() or _catalog.read_catalog(str(root)) is None
    hits = [p for p in result.report.errors if p.file == "workspace/jobs/a/vars.toml"]
    assert hits, "\n".join(str(p) for p in result.report.errors)
    assert words.lower() in str(hits[0]).lower(), str(hits[0])


def test_vars_toml_values_still_read_as_strings(tmp_path):
    path = tmp_path / "vars.toml"
    path.write_text('a = "x"\nb = 2\nc = 1.5\nd = true\n')
    assert _functions.load_vars_toml(str(path)) == {"a": "x", "b": "2", "c": "1.5", "d": "true"}


def test_vars_toml_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(_readers, "MAX_FILE_BYTES", 64)
    path = tmp_path / "vars.toml"
    path.write_text('a = "%s"\n' % ("x" * 100))
    with pytest.raises(_functions.KVError, match="larger than"):
        _functions.load_vars_toml(str(path))


@pytest.mark.parametrize("text, words", [
    ("[" * 200000 + "]" * 200000, "nesting is too deep"),
    ('{"schemaVersion": NaN, "manifests": []}', "NaN"),
    ('{"schemaVersion": 1e400, "manifests": []}', "out of range"),
], ids=["deep", "nan", "overflow"])
def test_hostile_oci_json_is_a_spec_error(tmp_path, text, words):
    (tmp_path / "index.json").write_text(text)
    with pytest.raises(SpecError, match=r"image x: .*index.json") as info:
        read_oci_layout(str(tmp_path), "x")
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize("where", ["manifest", "worker"])
@pytest.mark.parametrize("opener, closer", [("[", "]"), ('{"a":', "}")], ids=["list", "object"])
@pytest.mark.parametrize("depth", [61, 62, 63, 64])
def test_nesting_limit_boundary_in_the_bucket_files(tmp_path, where, opener, closer, depth):
    """The boundary of the property test test_any_nesting_depth_builds_or_names_the_file, always checked
    (hypothesis found depth 63 accepted): a value nested `depth` levels builds iff depth + 2 <= MAX_DEPTH."""
    value = opener * depth + "1" + closer * depth
    root = init_bucket(tmp_path)
    if where == "manifest":
        job(root, "a", '{"extra": %s}' % value)
        file = "workspace/jobs/a/manifest.json"
    else:
        from tests.maand_init import ws
        ws(root, "workers.json", '[{"host": "10.0.0.1", "extra": %s}]' % value)
        file = "workspace/workers.json"
    result = _service.build(root)
    if depth + 2 > _readers.MAX_DEPTH:
        hits = [p for p in result.report.errors if p.file == file]
        assert hits and "nested deeper than %d levels" % _readers.MAX_DEPTH in str(hits[0]), result.report.error_text()
        assert not result.written
    else:
        assert result.report.ok and result.written, result.report.error_text()

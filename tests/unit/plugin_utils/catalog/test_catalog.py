"""The catalog file: its JSON Schema, NaN/Infinity, the input fingerprint, and the bucket_id that a
build never replaces silently (issue 8 item 4 and faults (2), (3); issue 9 item 6)."""

import json
import os
import uuid

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import (
    service as _service, catalog as _catalog, catalog_schema as _catalog_schema, fingerprint as _fingerprint,
)
from ansible_collections.maand.core.plugins.plugin_utils.placement.place import alloc_id
from tests.bucket_factory import make_bucket, set_job, set_workers, write

W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
W2 = {"host": "10.0.0.2", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
BID = "0f8fad5b-d9cb-469f-a165-70867728950e"


def built(tmp_path, jobs=None):
    make_bucket(tmp_path, [W1], jobs if jobs is not None else {"api": {"selectors": ["worker"]}})
    result = _service.build(str(tmp_path))
    assert result.report.ok and result.written, [str(p) for p in result.report.errors]
    return result.catalog


def minimal():
    return {"format": 1, "bucket_id": BID, "workers": [{"host": "h"}], "jobs": [{"name": "api"}],
            "allocations": [{"job": "api", "worker": "h", "alloc_id": alloc_id("api", "h"), "state": "active"}]}


def assert_refused(mutate, words):
    """A minimal catalog changed by mutate is refused, the error naming words and data/catalog.json."""
    catalog = minimal()
    mutate(catalog)
    with pytest.raises(_catalog.CatalogError) as err:
        _catalog.loads(json.dumps(catalog))
    assert words in str(err.value) and "data/catalog.json" in str(err.value)


def messages(result, severity="errors"):
    return [str(p) for p in getattr(result.report, severity)]


# --- schema ---------------------------------------------------------------------------------------

def test_a_written_catalog_matches_the_schema_and_reads_back(tmp_path):
    catalog = built(tmp_path)
    assert _catalog.read_catalog(str(tmp_path)) == catalog
    assert set(catalog["inputs"]) == {"digest", "files"}


def test_minimal_catalog_is_valid():
    assert _catalog.loads(json.dumps(minimal()))["bucket_id"] == BID


@pytest.mark.parametrize("mutate, words", [
    (lambda c: c.update(bucket_id="not-a-uuid"), "$.bucket_id"),
    (lambda c: c.update(bucket_id=7), "$.bucket_id"),
    (lambda c: c.pop("bucket_id"), "'bucket_id' is a required property"),
    (lambda c: c.update(format=2), "$.format"),
    (lambda c: c.update(workers={}), "$.workers"),
    (lambda c: c["allocations"][0].update(state="running"), "$.allocations[0].state"),
    (lambda c: c["allocations"][0].update(alloc_id="x"), "$.allocations[0].alloc_id"),
    (lambda c: c["workers"][0].pop("host"), "'host' is a required property"),
    (lambda c: c["jobs"][0].update(ports={"http": "80"}), "$.jobs[0].ports.http"),
    (lambda c: c.update(inputs={"digest": "x"}), "'files' is a required property"),
])
def test_schema_violations_name_the_field(mutate, words):
    assert_refused(mutate, words)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_on_read(text):
    raw = json.dumps(minimal()).replace('"format": 1', '"format": 1, "x": %s' % text)
    with pytest.raises(_catalog.CatalogError, match="not valid JSON.*finite"):
        _catalog.loads(raw)


def test_deep_nesting_is_an_error_not_a_traceback():
    with pytest.raises(_catalog.CatalogError, match="nested too deeply"):
        _catalog.loads("[" * 200000 + "]" * 200000)


def test_nan_is_never_written(tmp_path):
    with pytest.raises(ValueError):
        _catalog.dumps(dict(minimal(), port_min=float("nan")))
    result = _service.BuildResult()
    result.report = _service.Report()
    result.catalog = dict(minimal(), bucket_vars={"x": float("inf")})
    _service._finish(result)
    assert result.catalog is None and "ErrInvalidCatalog" in messages(result)[0]


def test_alloc_id_is_the_md5_based_uuid_documented_in_the_contract():
    value = uuid.UUID(alloc_id("api", "10.0.0.1"))
    assert value.version == 3 and value.variant == uuid.RFC_4122
    # the md5 of "<job>|<host>" with the version and variant bits set (docs/contract.md)
    import hashlib
    digest = bytearray(hashlib.md5(b"api|10.0.0.1").digest())
    assert value.bytes[:6] == bytes(digest[:6]) and value.bytes[9:] == bytes(digest[9:])


# --- fingerprint ----------------------------------------------------------------------------------

def test_a_fresh_build_is_current(tmp_path):
    catalog = built(tmp_path)
    assert _fingerprint.stale(str(tmp_path), catalog) == []


@pytest.mark.parametrize("edit, words", [
    (lambda root: write(os.path.join(root, "maand.conf"), 'ssh_user = "other"\n'), "maand.conf changed"),
    (lambda root: set_workers(root, [W1, W2]), "workspace/workers.json changed"),
    (lambda root: write(os.path.join(root, "workspace", "disabled.json"), "{}"), "workspace/disabled.json added"),
    (lambda root: write(os.path.join(root, "workspace", "bucket.jobs.conf"), "[api]\nx = \"1\"\n"),
     "workspace/bucket.jobs.conf"),
    (lambda root: write(os.path.join(root, "workspace", "bucket.jobs.prod.conf"), "[api]\n"),
     "workspace/bucket.jobs.prod.conf added"),
    (lambda root: set_job(root, "api", {"selectors": ["worker"], "version": "2.0.0"}), "workspace/jobs/api/ changed"),
    (lambda root: write(os.path.join(root, "workspace", "jobs", "api", "conf", "x.conf"), "x"),
     "workspace/jobs/api/ changed"),
    (lambda root: set_job(root, "web", {"selectors": ["worker"]}), "workspace/jobs/web/ added"),
    (lambda root: os.chmod(os.path.join(root, "workspace", "jobs", "api", "manifest.json"), 0o755),
     "workspace/jobs/api/ changed"),
])
def test_every_input_edit_makes_the_catalog_stale_and_is_named(tmp_path, edit, words):
    catalog = built(tmp_path)
    edit(str(tmp_path))
    lines = _fingerprint.stale(str(tmp_path), catalog)
    assert any(words in line for line in lines), lines


def test_runtime_folders_and_touch_do_not_make_it_stale(tmp_path):
    catalog = built(tmp_path)
    job = os.path.join(str(tmp_path), "workspace", "jobs", "api")
    for sub in ("data", "logs", "bin"):
        write(os.path.join(job, sub, "x"), "runtime")
    manifest = os.path.join(job, "manifest.json")
    os.utime(manifest, (1, 1))
    write(os.path.join(str(tmp_path), "data", "extra"), "not an input")
    assert _fingerprint.stale(str(tmp_path), catalog) == []


def test_a_removed_job_folder_is_named(tmp_path):
    catalog = built(tmp_path, {"api": {"selectors": ["worker"]}, "web": {"selectors": ["worker"]}})
    import shutil
    shutil.rmtree(os.path.join(str(tmp_path), "workspace", "jobs", "web"))
    assert _fingerprint.stale(str(tmp_path), catalog) == ["workspace/jobs/web/ removed"]


def test_a_catalog_without_inputs_is_stale(tmp_path):
    catalog = built(tmp_path)
    catalog.pop("inputs")
    assert "no input fingerprint" in _fingerprint.stale(str(tmp_path), catalog)[0]


def test_rebuilding_without_edits_does_not_change_the_catalog(tmp_path):
    built(tmp_path)
    again = _service.build(str(tmp_path))
    assert again.report.ok and not again.changed and not again.written


# --- bucket_id ------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["{not json", '{"bucket_id": "x"}', "[]", "",
                                     '{"format": 1, "bucket_id": NaN, "workers": [], "jobs": [], "allocations": []}'])
def test_an_invalid_catalog_is_an_error_and_keeps_its_file(tmp_path, content):
    built(tmp_path)
    path = _catalog.catalog_path(str(tmp_path))
    write(path, content)
    result = _service.build(str(tmp_path))
    text = "\n".join(messages(result))
    assert not result.report.ok and "ErrInvalidCatalog" in text and "data/catalog.json" in text
    assert "restore" in text and "maand_new_bucket_id=true" in text
    assert open(path).read() == content


def test_new_bucket_id_replaces_an_invalid_catalog_with_a_warning(tmp_path):
    old = built(tmp_path)["bucket_id"]
    write(_catalog.catalog_path(str(tmp_path)), '{"bucket_id": "x"}')
    result = _service.build(str(tmp_path), new_bucket_id=True)
    assert result.report.ok and result.written
    assert result.catalog["bucket_id"] not in (old, "x")
    assert any("maand_new_bucket_id=true" in w for w in messages(result, "warnings"))
    assert _catalog.recorded_bucket_id(str(tmp_path)) == result.catalog["bucket_id"]


def test_a_deleted_catalog_keeps_the_recorded_bucket_id_with_a_warning(tmp_path):
    old = built(tmp_path)["bucket_id"]
    os.unlink(_catalog.catalog_path(str(tmp_path)))
    result = _service.build(str(tmp_path))
    assert result.report.ok and result.catalog["bucket_id"] == old
    [warning] = [w for w in messages(result, "warnings") if "ErrMissingCatalog" in w]
    assert old in warning and "restore" in warning


def test_a_deleted_catalog_with_new_bucket_id_mints_one_and_names_the_old(tmp_path):
    old = built(tmp_path)["bucket_id"]
    os.unlink(_catalog.catalog_path(str(tmp_path)))
    result = _service.build(str(tmp_path), new_bucket_id=True)
    assert result.report.ok and result.catalog["bucket_id"] != old
    assert any(old in w for w in messages(result, "warnings"))


def test_first_build_warns_about_nothing_and_records_the_id(tmp_path):
    catalog = built(tmp_path)
    assert _catalog.recorded_bucket_id(str(tmp_path)) == catalog["bucket_id"]
    write(os.path.join(str(tmp_path), "data", "bucket_id"), "garbage\n")
    assert _catalog.recorded_bucket_id(str(tmp_path)) is None


def test_check_mode_after_a_lost_catalog_shows_the_kept_id(tmp_path):
    old = built(tmp_path)["bucket_id"]
    os.unlink(_catalog.catalog_path(str(tmp_path)))
    result = _service.build(str(tmp_path), check_mode=True)
    assert result.catalog["bucket_id"] == old and not os.path.exists(_catalog.catalog_path(str(tmp_path)))


def test_schema_uuid_pattern_accepts_uuid4_and_uuid3():
    import re
    assert re.match(_catalog_schema.UUID_PATTERN, str(uuid.uuid4()))
    assert re.match(_catalog_schema.UUID_PATTERN, alloc_id("a", "b"))


def test_compute_alone_does_not_hash_the_workspace(tmp_path):
    """explain, the inventory's preview and the placement benchmark call compute(): no fingerprint cost."""
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}})
    assert "inputs" not in _service.compute(str(tmp_path)).catalog
    checked = _service.build(str(tmp_path), check_mode=True)
    assert checked.catalog["inputs"] == _fingerprint.compute(str(tmp_path))


def test_read_built_refuses_a_missing_or_stale_catalog_naming_the_fix(tmp_path):
    bucket = str(tmp_path)
    make_bucket(bucket, [{"host": "10.0.0.1", "labels": ["worker"]}], {"api": {"selectors": ["worker"]}})
    with pytest.raises(_catalog.CatalogError, match="catalog.json does not exist: run ansible-playbook maand.core.build"):
        _catalog.read_built(bucket)
    assert _service.build(bucket).report.ok
    assert [a["job"] for a in _catalog.read_built(bucket)["allocations"]] == ["api"]
    (tmp_path / "workspace" / "jobs" / "api" / "Makefile").write_text("start:\n\ttrue\n")
    with pytest.raises(_catalog.CatalogError, match=r"ErrStaleCatalog: .*workspace changed since the last build \(.*api"):
        _catalog.read_built(bucket)


# --- issue 32 N4: a catalog is input (a shared store is written by whoever holds its credentials) ----------

@pytest.mark.parametrize("mutate, words", [
    (lambda c: c["jobs"][0].update(path="/etc"), "$.jobs[0].path: job api: path '/etc' is not workspace/jobs/api"),
    (lambda c: c["jobs"][0].update(path="workspace/jobs/../../.."), "path 'workspace/jobs/../../..' is not"),
    (lambda c: c["jobs"][0].update(path="workspace/jobs/web"), "path 'workspace/jobs/web' is not workspace/jobs/api"),
    (lambda c: c["jobs"][0].update(path="workspace/jobs/api/"), "is not workspace/jobs/api"),
    (lambda c: c["jobs"][0].update(name="../api"), "$.jobs[0].name: job name '../api' is not one build accepts"),
    (lambda c: c["jobs"][0].update(name="-x"), "job name '-x'"),
    (lambda c: c["allocations"][0].update(job="a/b"), "$.allocations[0].job: job name 'a/b'"),
    (lambda c: c["allocations"][0].update(worker="../h"), "$.allocations[0].worker: worker host '../h'"),
    (lambda c: c["workers"][0].update(host="h/../x"), "$.workers[0].host: worker host 'h/../x'"),
    (lambda c: c.update(departed=[{"host": "-oProxyCommand=x"}]), "$.departed[0].host: worker host"),
])
def test_paths_and_names_build_would_not_write_are_refused(mutate, words):
    assert_refused(mutate, words)


def test_the_path_build_writes_reads_back():
    catalog = minimal()
    catalog["jobs"][0]["path"] = "workspace/jobs/api"
    assert _catalog.loads(json.dumps(catalog))["jobs"][0]["path"] == _catalog_schema.job_path("api")
    catalog["jobs"][0]["path"] = None
    assert _catalog.loads(json.dumps(catalog))["jobs"][0]["path"] is None


def test_the_catalogs_jobs_are_compared_with_the_checkout_whatever_its_inputs_say(tmp_path):
    catalog = built(tmp_path, {"api": {"selectors": ["worker"]}, "web": {"selectors": ["worker"]}})
    forged = json.loads(json.dumps(catalog))  # the inputs stay as the build wrote them
    forged["jobs"].append(dict(forged["jobs"][0], name="ghost", path="workspace/jobs/ghost"))
    assert _fingerprint.stale(str(tmp_path), forged) == [
        "job ghost is in the catalog but workspace/jobs/ghost is not in this checkout"]
    forged["jobs"] = [j for j in forged["jobs"] if j["name"] != "web"]
    assert "workspace/jobs/web is not a job of the catalog" in _fingerprint.stale(str(tmp_path), forged)
    back = json.loads(json.dumps(catalog))
    next(j for j in back["jobs"] if j["name"] == "web")["removed"] = True
    assert _fingerprint.stale(str(tmp_path), back) == [
        "job web is removed in the catalog but workspace/jobs/web is in this checkout"]
    assert _fingerprint.stale(str(tmp_path), catalog) == []


def test_a_catalog_text_is_checked_once_per_process_and_a_changed_one_again(monkeypatch):
    """The deploy reads the catalog in every task; a text this process (or the controller process its forked
    worker came from) found valid is not checked again, a text that differs in one byte is (issue 29)."""
    monkeypatch.setattr(_catalog, "_VALID_TEXTS", set())
    calls = []
    check = _catalog.schemas.check
    monkeypatch.setattr(_catalog.schemas, "check", lambda *a: calls.append(1) or check(*a))
    text = json.dumps(minimal())
    assert _catalog.loads(text)["bucket_id"] == BID and _catalog.loads(text)["bucket_id"] == BID
    assert len(calls) == 1
    tampered = minimal()
    tampered["jobs"][0]["path"] = "/elsewhere"
    with pytest.raises(_catalog.CatalogError, match=r"\$\.jobs\[0\]\.path"):
        _catalog.loads(json.dumps(tampered))
    with pytest.raises(_catalog.CatalogError):  # refused every time, never remembered
        _catalog.loads(json.dumps(tampered))
    assert len(calls) == 3
    assert _catalog.loads(text)["jobs"] is not _catalog.loads(text)["jobs"]  # a fresh document for each caller

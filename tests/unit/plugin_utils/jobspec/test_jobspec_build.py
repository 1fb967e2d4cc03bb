"""Build reads the job-spec fields (seed 004): containers, parent chains, images, environment checks,
refusals of what a worker cannot honour, and job["spec"] in the catalog (never expanded values)."""

import hashlib
import json
import os
from pathlib import Path

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, fingerprint as _fingerprint
from tests.bucket_factory import make_bucket, write

W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
BASE = {"environment": [{"vars": {"PATH": "/usr/bin", "LOG": "$env{LOG_LEVEL:-info}"}, "extend": False}],
        "user": "maand", "working_directory": "bin"}


def _bucket(tmp_path, jobs, containers=None):
    root = make_bucket(tmp_path, [W1], jobs)
    for name, doc in (containers or {}).items():
        write(os.path.join(root, "workspace", "containers", name),
              doc if isinstance(doc, str) else json.dumps(doc))
    return root


def _errors(result):
    return [(p.kind, p.file, p.field, p.message) for p in result.report.errors]


def _job(result, name):
    return next(j for j in result.catalog["jobs"] if j["name"] == name)


def test_job_without_spec_fields_has_no_spec_key(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"web": {}}))
    assert result.report.ok, _errors(result)
    assert "spec" not in _job(result, "web")


def test_three_jobs_share_a_base_container(tmp_path):
    jobs = {name: {"parent": {"container": "base"}, "environment": {"PATH": "/opt/%s:$prev{PATH}" % name},
                   "timeout": 30, "priority": 2} for name in ("web", "api")}
    jobs["worker"] = {"parent": {"container": "base", "use": ["environment"]}, "user": "nobody",
                      "estimated_duration": 4.5, "environment": {"DB": "$env{DB_URL}"}}
    result = _service.compute(_bucket(tmp_path, jobs, {"base.json": BASE}))
    assert result.report.ok, _errors(result)
    web = _job(result, "web")["spec"]
    assert web["environment"] == [
        dict(BASE["environment"][0], origin="workspace/containers/base.json: environment[0]"),
        {"vars": {"PATH": "/opt/web:$prev{PATH}"}, "extend": True,
         "origin": "workspace/jobs/web/manifest.json: environment"}]
    assert (web["user"], web["working_directory"], web["timeout"], web["priority"]) == ("maand", "bin", 30, 2)
    assert web["env_vars"] == ["LOG_LEVEL"]
    worker = _job(result, "worker")["spec"]
    assert (worker["user"], worker["working_directory"], worker["estimated_duration"]) == ("nobody", None, 4.5)
    assert worker["env_vars"] == ["DB_URL", "LOG_LEVEL"]


def test_catalog_never_holds_controller_values(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_URL", "postgres://secret-value")
    result = _service.compute(_bucket(tmp_path, {"web": {"environment": {"DB": "$env{DB_URL}"}}}))
    assert result.report.ok, _errors(result)
    assert "secret-value" not in json.dumps(result.catalog)
    assert _job(result, "web")["spec"]["environment"] == [{"vars": {"DB": "$env{DB_URL}"}, "extend": True,
                                                           "origin": "workspace/jobs/web/manifest.json: environment"}]


def test_bad_fields_name_file_field_and_fix(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"web": {"timeout": -1, "working_directory": "../x",
                                                         "environment": [{"vars": {"A": 1}}]}}))
    got = {(p.file, p.field) for p in result.report.errors}
    assert got == {("workspace/jobs/web/manifest.json", "timeout"),
                   ("workspace/jobs/web/manifest.json", "working_directory"),
                   ("workspace/jobs/web/manifest.json", "environment[0].vars.A")}
    assert all(p.fix for p in result.report.errors)
    assert result.catalog is None


def test_missing_parent_and_loop_name_the_chain(tmp_path):
    containers = {"a.json": {"parent": {"container": "b"}}, "b.json": {"parent": {"container": "a"}},
                  "c.json": {"parent": {"container": "gone"}}}
    result = _service.compute(_bucket(tmp_path, {"x": {"parent": {"container": "a"}},
                                                 "y": {"parent": {"container": "c"}}}, containers))
    messages = [m for _k, _f, _fi, m in _errors(result)]
    assert any('parent loop found: "a" -> "b" -> "a"' in m for m in messages), messages
    assert any('couldn\'t find parent container "gone" (chain: job -> "c" -> "gone")' in m for m in messages), messages


def test_bad_container_file(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"x": {"parent": {"container": "base"}}},
                                      {"base.json": {"timeout": 3}, "notes.txt": "x", "bad.json": "{nope"}))
    errs = _errors(result)
    assert ("ErrInvalidContainer", "workspace/containers/base.json", "timeout") in [e[:3] for e in errs]
    assert any(e[1] == "workspace/containers/bad.json" and "invalid JSON" in e[3] for e in errs), errs
    assert any(w.file == "workspace/containers/notes.txt" and w.unhonoured for w in result.report.warnings)


def test_unknown_prev_and_malformed_dollar_are_build_errors(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"x": {"environment": {"P": "$prev{NOPE}"}},
                                                 "y": {"environment": {"Q": "$oops"}}}))
    errs = _errors(result)
    assert any(e[1].endswith("x/manifest.json") and "NOPE" in e[3] for e in errs), errs
    assert any(e[1].endswith("y/manifest.json") and "environment.vars.Q" in e[2] for e in errs), errs


def test_fields_a_worker_cannot_honour_are_refused(tmp_path):
    result = _service.compute(_bucket(tmp_path, {
        "a": {"mounts": [{"type": "bind", "mount_point": "/srv"}]},  # no local_path
        "d": {"mounts": [{"type": "bind", "mount_point": "/srv", "local_path": "/data", "read_only": True}]},
        "b": {"mounts": [{"type": "tmp", "mount_point": "/tmp"}, {"type": "devices", "mount_point": "/dev"}]},
        "c": {"mounts": [{"type": "tmp", "mount_point": "/tmp"}, {"type": "proc", "mount_point": "/proc"}],
              "enable_writable_file_system": False},
        "e": {"network": "local", "enable_writable_file_system": True}}))
    fields = sorted((p.file.split("/")[2], p.field) for p in result.report.errors)
    assert fields == [("a", "mounts[0].local_path"), ("b", "mounts")]
    assert all(p.fix for p in result.report.errors)


def test_private_network_is_honoured(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"a": {"network": "disabled"}, "b": {"network": "loopback"}}))
    assert result.report.ok, _errors(result)
    assert [_job(result, n)["spec"]["network"] for n in "ab"] == ["disabled", "loopback"]


def _blob(root: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": "sha256:" + digest, "size": len(data)}


def _layout(root: Path, config: dict) -> None:
    cfg = _blob(root, json.dumps({"config": config}).encode())
    manifest = _blob(root, json.dumps({"schemaVersion": 2, "config": cfg, "layers": []}).encode())
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))


def test_image_parent_feeds_environment_and_working_directory(tmp_path):
    root = _bucket(tmp_path, {"x": {"parent": {"image": "deb"}, "environment": {"PATH": "/x:$prev{PATH}"}}})
    _layout(Path(root) / "workspace" / "images" / "deb", {"Env": ["PATH=/usr/bin"], "WorkingDir": "srv"})
    result = _service.compute(root)
    assert result.report.ok, _errors(result)
    spec = _job(result, "x")["spec"]
    assert (spec["initial_environment"], spec["working_directory"]) == ({"PATH": "/usr/bin"}, "srv")
    assert "workspace/images/deb/" in _fingerprint.compute(root)["files"]


def test_missing_image_is_an_error(tmp_path):
    result = _service.compute(_bucket(tmp_path, {"x": {"parent": {"image": "deb"}}}))
    assert [(e[1], e[2]) for e in _errors(result)] == [("workspace/jobs/x/manifest.json", "parent.image")]


def test_container_edit_makes_the_catalog_stale(tmp_path):
    root = _bucket(tmp_path, {"x": {"parent": {"container": "base"}}}, {"base.json": BASE})
    before = _fingerprint.compute(root)
    write(os.path.join(root, "workspace", "containers", "base.json"), json.dumps(dict(BASE, user="other")))
    assert _fingerprint.changes(before, _fingerprint.compute(root)) == ["workspace/containers/base.json changed"]


def test_layers_must_be_folders_of_the_bucket(tmp_path):
    root = _bucket(tmp_path, {"a": {"parent": {"container": "base"}}, "b": {"layers": ["layers/gone"]},
                              "c": {"layers": ["layers/link"]}, "d": {"layers": ["../x"]}},
                   {"base.json": {"layers": ["layers/common"]}})
    os.makedirs(os.path.join(root, "layers", "common"))
    os.symlink("/usr", os.path.join(root, "layers", "link"))
    result = _service.compute(root)
    errs = sorted((e[1].split("/")[2], e[2], e[3]) for e in _errors(result))
    assert [(j, f) for j, f, _m in errs] == [("b", "layers"), ("c", "layers"), ("d", "layers[0]")], errs
    assert "not a folder" in errs[0][2] and "leaves the bucket" in errs[1][2] and "leaves the bucket" in errs[2][2]


def test_layers_may_not_ship_the_bucket_its_secrets_data_or_a_link_out(tmp_path):
    """The security review shipped secrets/kv.key, the CA key and the SSH key to every worker with layers ["."]."""
    root = _bucket(tmp_path, {"a": {"layers": ["."]}, "b": {"layers": ["secrets"]}, "c": {"layers": ["data"]},
                              "d": {"layers": ["layers/linky"]}, "e": {"layers": ["layers/fine"]}})
    for folder in ("secrets", "data", "layers/linky", "layers/fine"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    os.symlink("/etc", os.path.join(root, "layers", "linky", "etc"))
    os.symlink("../linky", os.path.join(root, "layers", "fine", "inside"))  # stays in the bucket
    result = _service.compute(root)
    errs = sorted((p.file.split("/")[2], p.field, p.message, p.fix) for p in result.report.errors)
    assert [(j, f) for j, f, _m, _x in errs] == [("a", "layers"), ("b", "layers"), ("c", "layers"), ("d", "layers")], errs
    assert "layer . is the bucket folder itself" in errs[0][2]
    assert "layer secrets lies in secrets/" in errs[1][2] and "layer data lies in data/" in errs[2][2]
    assert "holds a symlink layers/linky/etc -> /etc that leads out of the bucket" in errs[3][2]
    assert all("not secrets/ or data/" in fix for _j, _f, _m, fix in errs)


def test_layers_from_containers_reach_the_catalog(tmp_path):
    root = _bucket(tmp_path, {"a": {"parent": {"container": "base"}, "layers": ["layers/own"]}},
                   {"base.json": {"layers": ["layers/common"]}})
    for name in ("common", "own"):
        os.makedirs(os.path.join(root, "layers", name))
    result = _service.compute(root)
    assert result.report.ok, _errors(result)
    assert _job(result, "a")["spec"]["layers"] == ["layers/common", "layers/own"]


def test_a_writing_build_makes_the_kv_key_a_job_environment_needs(tmp_path, monkeypatch):
    """The environment digests are HMACs keyed from secrets/kv.key: build makes it (the deploy only reads it);
    a check-mode build and a bucket without environments make none."""
    from ansible_collections.maand.core.plugins.plugin_utils.kv import secrets as _secrets
    monkeypatch.delenv(_secrets.KEY_ENV, raising=False)
    monkeypatch.delenv(_secrets.KEY_FILE_ENV, raising=False)
    plain = _bucket(tmp_path / "plain", {"web": {}})
    assert _service.build(plain).written and not os.path.exists(_secrets.key_path(plain))
    root = _bucket(tmp_path / "env", {"web": {"environment": {"DB": "$env{DB_URL:-x}"}}})
    assert _service.build(root, check_mode=True).report.ok and not os.path.exists(_secrets.key_path(root))
    assert _service.build(root).written
    key = Path(_secrets.key_path(root)).read_bytes()
    assert len(key) == _secrets.KEY_SIZE and _service.build(root) is not None
    assert Path(_secrets.key_path(root)).read_bytes() == key  # kept by the next build

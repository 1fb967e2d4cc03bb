"""One reader (issue 9, item 4): facts reads maand.conf and workers.json through the model's readers,
so it accepts and refuses exactly what build (and the inventory, which runs build's compute) does,
with the same error lines."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.ops import facts as _facts
from ansible_collections.maand.core.plugins.plugin_utils.bucket.model import MAAND_CONF, WORKERS_FILE
from tests.bucket_factory import make_bucket

ROOT = Path(__file__).resolve().parents[4]
GOOD_CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
GOOD_WORKERS = [{"host": "10.0.0.1", "labels": ["web"]}, {"host": "10.0.0.2"}]


def bucket_with(tmp_path, conf=GOOD_CONF, workers=None):
    root = make_bucket(tmp_path / "b", GOOD_WORKERS if workers is None else workers, {"web": {"selectors": ["web"]}},
                       maand_conf=conf)
    os.makedirs(os.path.join(root, "secrets"), exist_ok=True)
    Path(root, "secrets", "worker.key").write_text("key\n")
    os.chmod(Path(root, "secrets", "worker.key"), 0o600)
    return root


def build_lines(root):
    """build's errors for the two files facts reads, as it prints them."""
    report = _service.compute(root).report
    return sorted(str(p) for p in report.errors if p.file in (MAAND_CONF, WORKERS_FILE))


def facts_lines(root):
    with pytest.raises(_facts.WorkersFileError) as exc:
        _facts.inventory_entries(root)
    head, *lines = str(exc.value).split("\n")
    assert "maand.core.build reports the same" in head
    return sorted(line.strip() for line in lines)


# The three cases of issue 9 (the old facts reader accepted them), then more of build's rules.
REJECTED = [
    pytest.param({"conf": GOOD_CONF.replace("ssh_port = 22", 'ssh_port = "22"')}, "ssh_port", id="ssh_port-string"),
    pytest.param({"workers": [{"host": "bad host!"}]}, "is not an IP address or host name", id="bad-host-name"),
    pytest.param({"conf": GOOD_CONF.replace("use_sudo = false", "use_sudo = 1")}, "use_sudo", id="use_sudo-int"),
    pytest.param({"conf": GOOD_CONF.replace('"worker.key"', '"../k"')}, "ssh_key", id="ssh_key-path"),
    pytest.param({"workers": [{"host": "a"}, {"host": "a"}]}, "duplicate host a", id="duplicate-host"),
    pytest.param({"workers": [{"host": "a", "position": 1}, {"host": "b", "position": 1}]}, "position 1",
                 id="duplicate-position"),
    pytest.param({"workers": [{"host": "a", "memory": "lots"}]}, "memory", id="bad-memory"),
    pytest.param({"workers": '[{"host": "a",}]'}, "invalid JSON", id="bad-json"),
    pytest.param({"conf": "ssh_port = \n"}, "invalid TOML", id="bad-toml"),
]


@pytest.mark.parametrize("kwargs, expected", REJECTED)
def test_facts_rejects_exactly_as_build(tmp_path, kwargs, expected):
    root = bucket_with(tmp_path, **kwargs)
    want = build_lines(root)
    assert want, "build must reject this bucket"
    assert any(expected in line for line in want)
    assert facts_lines(root) == want


def test_uppercase_label_is_lower_cased_as_in_build(tmp_path):
    root = bucket_with(tmp_path, workers=[{"host": "10.0.0.1", "labels": ["Web"]}])
    out = _facts.inventory_entries(root)
    assert out["targets"] == [{"host": "10.0.0.1", "labels": ["web", "worker"],
                               "groups": ["maand_facts_targets", "label_web", "label_worker"]}]
    catalog = _service.compute(root).catalog
    assert catalog["workers"][0]["labels"] == out["targets"][0]["labels"]
    assert [t["host"] for t in _facts.inventory_entries(root, labels="WEB")["targets"]] == ["10.0.0.1"]


def test_targets_follow_builds_worker_order(tmp_path):
    workers = [{"host": "c", "position": 2}, {"host": "a", "position": 0}, {"host": "b", "position": 1}]
    root = bucket_with(tmp_path, workers=workers)
    catalog = _service.compute(root).catalog
    assert [t["host"] for t in _facts.inventory_entries(root)["targets"]] == [w["host"] for w in catalog["workers"]]
    assert [w["host"] for w in catalog["workers"]] == ["a", "b", "c"]


def test_warnings_are_builds_warnings(tmp_path):
    root = bucket_with(tmp_path, workers=[{"host": "a", "colour": "red"}])
    out = _facts.inventory_entries(root)
    build_warnings = [str(p) for p in _service.compute(root).report.warnings if p.file == WORKERS_FILE]
    assert build_warnings and out["warnings"] == build_warnings


def test_write_refuses_what_build_refuses_and_writes_nothing(tmp_path):
    root = bucket_with(tmp_path, workers=[{"host": "bad host!"}])
    before = Path(root, WORKERS_FILE).read_text()
    with pytest.raises(_facts.WorkersFileError, match="is not an IP address or host name"):
        _facts.update_workers_file(root, {"bad host!": {"memory_mb": 1024, "cpu_mhz": 1000}})
    assert Path(root, WORKERS_FILE).read_text() == before


def test_write_path_reads_only_workers_json(tmp_path):
    """Writing probed facts needs workers.json only; a broken maand.conf is facts' load step's concern."""
    root = bucket_with(tmp_path, conf='ssh_port = "22"\n')
    result = _facts.update_workers_file(root, {"10.0.0.1": {"memory_mb": 1024, "cpu_mhz": 1000}})
    assert result["changed"] and json.loads(Path(root, WORKERS_FILE).read_text())[0]["memory"] == "1024 mb"


def _imported_modules(path):
    names = set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_action_has_no_reader_of_its_own():
    imported = _imported_modules(ROOT / "plugins" / "action" / "workers_file.py")
    assert not imported & {"json", "tomllib", "os", "glob", "re"}, imported
    assert "ansible_collections.maand.core.plugins.plugin_utils" in imported  # the ops door: ops.facts reads
    assert "facts.update_workers_file(" in (ROOT / "plugins" / "action" / "workers_file.py").read_text()
    facts_imports = _imported_modules(ROOT / "plugins" / "plugin_utils" / "ops" / "facts.py")
    assert "tomllib" not in facts_imports


def test_an_ssh_key_others_may_read_is_a_build_warning(tmp_path):
    """Issue 21 (ssh refuses such a key too): the warning names the file and chmod 600."""
    root = bucket_with(tmp_path)
    os.chmod(Path(root, "secrets", "worker.key"), 0o644)
    warnings = [(p.field, p.message, p.fix) for p in _service.compute(root).report.warnings if p.file == "maand.conf"]
    assert warnings == [("ssh_key", "secrets/worker.key may be read by group or others (mode 0644): it must be the "
                         "controller user's alone", "chmod 600 secrets/worker.key")]

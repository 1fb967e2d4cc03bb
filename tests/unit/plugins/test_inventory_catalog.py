"""The maand.core.workspace inventory's catalog mode, in process (no ansible-inventory subprocess):
the catalog is the one truth, a stale or missing one is refused, and a failure never vanishes."""

import os

from ansible.inventory.data import InventoryData

from ansible_collections.maand.core.plugins.inventory import workspace
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.catalog import fingerprint as _fingerprint
from tests.bucket_factory import make_bucket, set_job, set_workers, write

W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
W2 = {"host": "10.0.0.2", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}


def built(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}},
                maand_conf='ssh_user = "deploy"\nssh_key = "id"\nssh_port = 2222\n')
    assert _service.build(str(tmp_path)).written
    return str(tmp_path)


def only_error(data):
    [error] = data["errors"]
    return error


def test_a_current_catalog_is_used_as_written(tmp_path):
    bucket = built(tmp_path)
    data = workspace.load_from_catalog(bucket)
    assert not data.get("errors") and data["catalog"] == _catalog.read_catalog(bucket)
    assert data["connection"]["ansible_port"] == 2222 and data["connection"]["ansible_user"] == "deploy"
    assert data["connection"]["ansible_ssh_private_key_file"] == os.path.join(bucket, "secrets", "id")
    assert data["preview"] is False


def test_missing_catalog_names_the_build_command_and_preview(tmp_path):
    make_bucket(tmp_path, [W1], {})
    error = only_error(workspace.load_from_catalog(str(tmp_path)))
    assert error.startswith("ErrMissingCatalog: data/catalog.json")
    assert "ansible-playbook maand.core.build -e maand_bucket=%s" % tmp_path in error and "preview: true" in error


def test_an_edit_of_a_manifest_without_a_rebuild_is_refused(tmp_path):
    """issue 8, fault (2): a new version or health_check must not deploy with the catalog's old values."""
    bucket = built(tmp_path)
    set_job(tmp_path, "api", {"selectors": ["worker"], "version": "9.0.0", "health_check": {"command": "true"}})
    data = workspace.load_from_catalog(bucket)
    error = only_error(data)
    assert "workspace changed since the last build; run maand.core.build" in error
    assert "workspace/jobs/api/ changed" in error and data["bucket_id"] == _catalog.read_catalog(bucket)["bucket_id"]


def test_many_changes_are_cut_short(tmp_path):
    bucket = built(tmp_path)
    for i in range(15):
        set_job(tmp_path, "job%02d" % i, {"selectors": ["worker"]})
    error = only_error(workspace.load_from_catalog(bucket))
    assert "workspace/jobs/job09/ added" in error and "job10" not in error and "and 5 more" in error


def test_an_invalid_catalog_is_named_with_its_fix(tmp_path):
    bucket = built(tmp_path)
    write(_catalog.catalog_path(bucket), '{"bucket_id": "x"}')
    error = only_error(workspace.load_from_catalog(bucket))
    assert error.startswith("ErrInvalidCatalog") and "restore it from git or a backup" in error


def test_an_invalid_maand_conf_in_a_current_catalog_is_still_an_error(tmp_path):
    bucket = built(tmp_path)
    catalog = _catalog.read_catalog(bucket)
    write(os.path.join(bucket, "maand.conf"), "ssh_port = 'x'\n")
    catalog["inputs"] = _fingerprint.compute(bucket)  # a catalog that claims to be current
    _catalog.write_catalog(bucket, catalog)
    assert "ErrInvalidMaandConf" in only_error(workspace.load_from_catalog(bucket))


def test_preview_builds_in_memory_and_writes_nothing(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"]}, "gpu": {"selectors": ["gpu"]}})
    warnings = []
    data = workspace.load_preview(str(tmp_path), warnings.append)
    assert data["preview"] is True and len(data["catalog"]["allocations"]) == 2
    assert any("gpu" in w for w in warnings)
    assert not os.path.exists(_catalog.catalog_path(str(tmp_path)))


def test_preview_of_an_invalid_bucket_lists_every_error(tmp_path):
    make_bucket(tmp_path, [W1, W1], {}, maand_conf="ssh_port = 'x'\n")
    data = workspace.load_preview(str(tmp_path), lambda w: None)
    text = "\n".join(data["errors"])
    assert "duplicate host 10.0.0.1" in text and "ErrInvalidMaandConf" in text


class Recorder:
    def __init__(self):
        self.errors = []

    def error(self, msg, wrap_text=True, stderr=True):
        self.errors.append(msg)

    def warning(self, msg, *args, **kwargs):
        pass


def plugin():
    module = workspace.InventoryModule()
    module.inventory = InventoryData()
    module.display = Recorder()
    return module


def test_a_failure_adds_no_host_and_puts_the_errors_on_all(tmp_path):
    module = plugin()
    module._populate_failure({"bucket_dir": "/b", "bucket_id": None, "errors": ["ErrX: f: field: broken (fix: y)"]})
    all_vars = module.inventory.groups["all"].get_vars()
    assert all_vars["maand_workspace_ok"] is False
    assert all_vars["maand_inventory_errors"] == ["ErrX: f: field: broken (fix: y)"]
    assert (all_vars["maand_bucket_dir"], all_vars["maand_bucket_id"]) == ("/b", None)
    assert not module.inventory.hosts and "maand_workers" not in module.inventory.groups
    assert "ErrX: f: field: broken" in module.display.errors[0] and "no host was added" in module.display.errors[0]


def test_success_sets_the_same_variables_on_all(tmp_path):
    bucket = built(tmp_path)
    module = plugin()
    module.get_option = lambda name: None
    module._populate(workspace.load_from_catalog(bucket))
    all_vars = module.inventory.groups["all"].get_vars()
    assert all_vars["maand_workspace_ok"] is True and all_vars["maand_inventory_errors"] == []
    assert all_vars["maand_bucket_id"] == _catalog.read_catalog(bucket)["bucket_id"]
    assert all_vars["maand_inventory_preview"] is False and "10.0.0.1" in module.inventory.hosts


def test_removed_workers_come_from_the_catalog(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"]}})
    assert _service.build(str(tmp_path)).written
    set_workers(tmp_path, [W1])
    assert _service.build(str(tmp_path)).written
    module = plugin()
    module.get_option = lambda name: None
    module._populate(workspace.load_from_catalog(str(tmp_path)))
    assert [h.name for h in module.inventory.groups["maand_removed_workers"].get_hosts()] == ["10.0.0.2"]


def test_the_contract_documents_every_variable_set_on_all(tmp_path):
    contract = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "contract.md")).read()
    module = plugin()
    module._populate_failure({"bucket_dir": "/b", "bucket_id": None, "errors": ["e"]})
    names = set(module.inventory.groups["all"].get_vars())
    assert names == {"maand_workspace_ok", "maand_inventory_errors", "maand_inventory_preview", "maand_bucket_dir",
                     "maand_bucket_id"}
    for name in names:
        assert "| `%s` |" % name in contract, name

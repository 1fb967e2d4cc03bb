"""The inventory plugin and the build / init playbooks, through the real ansible CLIs."""

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from tests.bucket_factory import make_bucket, set_job, set_workers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "resources-and-placement")
W1 = {"host": "10.0.0.1", "labels": ["worker", "web"], "memory": "4 gb", "cpu": "4 ghz", "tags": {"zone": "eu-1"}}
W2 = {"host": "10.0.0.2", "labels": ["worker"], "memory": "4 gb", "cpu": "4 ghz"}


def run(*args, cwd=None, env=None):
    full_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    full_env.update(env or {})
    return subprocess.run(list(args), cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120, check=False)


def plain(value):
    """ansible-inventory shows values the plugin does not trust as templates as {"__ansible_unsafe": v}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def inventory_list(bucket, env=None, export=False):
    proc = run("ansible-inventory", "-i", os.path.join(str(bucket), "maand.yml"), "--list",
               *(["--export"] if export else []), env=env)
    assert proc.returncode == 0, proc.stderr
    return plain(json.loads(proc.stdout))


def all_vars(bucket):
    """The variables on `all` (ansible-inventory --list shows group variables only with --export)."""
    return inventory_list(bucket, export=True)["all"]["vars"]


def build(bucket):
    result = _service.build(str(bucket))
    assert result.report.ok, result.report.error_text()


def preview(bucket):
    (bucket / "maand.yml").write_text("plugin: maand.core.workspace\npreview: true\n")


@pytest.fixture
def example(tmp_path):
    dest = tmp_path / "bucket"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("data"))
    return dest


def test_docs_example_graph_shows_the_expected_allocations(example):
    preview(example)
    proc = run("ansible-inventory", "-i", str(example / "maand.yml"), "--graph")
    assert proc.returncode == 0, proc.stderr
    graph = proc.stdout
    assert "@job_api:\n  |  |--10.0.0.10" in graph
    assert "@job_api_staging_bd387be0:\n  |  |--10.0.0.20" in graph
    assert "@label_prod:\n  |  |--10.0.0.10" in graph
    assert not (example / "data").exists(), "the inventory must never write the catalog"


def test_host_vars_connection_and_allocations(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"version": "1.2", "selectors": ["web"]}},
                maand_conf='ssh_user = "deploy"\nssh_key = "id"\nssh_port = 2222\nuse_sudo = true\n')
    build(tmp_path)
    listing = inventory_list(tmp_path)
    hv = listing["_meta"]["hostvars"]["10.0.0.1"]
    assert (hv["ansible_host"], hv["ansible_user"], hv["ansible_port"], hv["ansible_become"]) == ("10.0.0.1", "deploy", 2222, True)
    assert hv["ansible_ssh_private_key_file"] == os.path.join(str(tmp_path), "secrets", "id")
    assert hv["maand_worker"]["zone"] == "eu-1" and hv["maand_worker"]["labels"] == ["web", "worker"]
    [alloc] = hv["maand_allocations"]
    # versions are kept as written, as maand (tests/build_job_test.go TestJobVersionUpdate)
    assert (alloc["job"], alloc["state"], alloc["version"], alloc["deployment_seq"]) == ("api", "active", "1.2", 0)
    assert hv["maand_catalog_jobs"]["api"]["version"] == "1.2"
    assert listing["job_api"]["hosts"] == ["10.0.0.1"]
    assert listing["zone_eu_1_%s" % __import__("hashlib").sha1(b"eu-1").hexdigest()[:8]]["hosts"] == ["10.0.0.1"]
    assert sorted(listing["maand_workers"]["hosts"]) == ["10.0.0.1", "10.0.0.2"]
    assert hv["maand_workspace_ok"] is True and hv["maand_inventory_errors"] == []
    assert hv["maand_inventory_preview"] is False


def test_invalid_workspace_fails_loudly_with_every_error(tmp_path):
    make_bucket(tmp_path, [W1, W1], {"api": {"selectors": ["web"], "resources": {"memory": {"min": "9 gb"}}}},
                maand_conf="ssh_port = 'x'\n")
    preview(tmp_path)
    proc = run("ansible-inventory", "-i", os.path.join(str(tmp_path), "maand.yml"), "--list", "--export")
    for words in ("ErrInvalidWorkerJSON", "duplicate host 10.0.0.1", "ErrInvalidMaandConf", "ssh_port"):
        assert words in proc.stderr
    assert "Traceback" not in proc.stderr
    listing = plain(json.loads(proc.stdout))  # the source did not vanish: all says why
    assert listing["all"]["vars"]["maand_workspace_ok"] is False
    assert any("duplicate host 10.0.0.1" in e for e in listing["all"]["vars"]["maand_inventory_errors"])
    assert "maand_workers" not in listing and not listing["_meta"]["hostvars"].get("10.0.0.1")
    playbook = run("ansible-playbook", "-i", os.path.join(str(tmp_path), "maand.yml"),
                   os.path.join(REPO, "tests", "integration", "files", "ping_workers.yml"))
    assert playbook.returncode != 0 and "duplicate host" in playbook.stderr + playbook.stdout


def test_without_a_catalog_the_inventory_asks_for_a_build(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["web"]}})
    listing = inventory_list(tmp_path, export=True)
    [error] = listing["all"]["vars"]["maand_inventory_errors"]
    assert listing["all"]["vars"]["maand_workspace_ok"] is False
    assert "data/catalog.json" in error and "ansible-playbook maand.core.build -e maand_bucket=%s" % tmp_path in error
    assert "preview: true" in error and "job_api" not in listing
    build(tmp_path)
    assert inventory_list(tmp_path)["job_api"]["hosts"] == ["10.0.0.1"]


def test_an_edit_without_a_rebuild_is_refused_naming_the_file(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"version": "1.0", "selectors": ["web"]}})
    build(tmp_path)
    set_job(tmp_path, "api", {"version": "1.1", "selectors": ["web"], "restart_policy": "never"})
    proc = run("ansible-inventory", "-i", os.path.join(str(tmp_path), "maand.yml"), "--list", "--export")
    [error] = plain(json.loads(proc.stdout))["all"]["vars"]["maand_inventory_errors"]
    assert "workspace changed since the last build; run maand.core.build" in error
    assert "workspace/jobs/api/ changed" in error and "workspace changed" in " ".join(proc.stderr.split())


def test_an_assert_play_fails_the_run_with_no_ansible_cfg_at_all(tmp_path):
    """With Ansible's defaults a failing source only warns: the variables on all carry the failure."""
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["web"]}})
    (tmp_path / "empty.cfg").write_text("")
    env = {"ANSIBLE_CONFIG": str(tmp_path / "empty.cfg")}
    playbook = run("ansible-playbook", "-i", os.path.join(str(tmp_path), "maand.yml"),
                   os.path.join(REPO, "tests", "integration", "files", "assert_workspace.yml"), env=env)
    assert playbook.returncode != 0, playbook.stdout
    out = playbook.stdout + playbook.stderr
    assert "ErrMissingCatalog" in out and "maand.core.build" in out and "Assert maand_workspace_ok" in out
    build(tmp_path)
    playbook = run("ansible-playbook", "-i", os.path.join(str(tmp_path), "maand.yml"),
                   os.path.join(REPO, "tests", "integration", "files", "assert_workspace.yml"), env=env)
    assert playbook.returncode == 0, playbook.stdout + playbook.stderr


def test_build_runs_with_the_inventory_of_a_stale_catalog(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["web"]}})
    build(tmp_path)
    set_workers(tmp_path, [W1, W2])
    proc = run("ansible-playbook", "-i", os.path.join(str(tmp_path), "maand.yml"), "maand.core.build",
               "-e", "maand_bucket=%s" % tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all_vars(tmp_path)["maand_workspace_ok"] is True


def test_the_init_bucket_config_makes_a_broken_inventory_fatal(tmp_path):
    proc = run("ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    set_workers(tmp_path, [W1, W1])
    env = {"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": os.environ["ANSIBLE_COLLECTIONS_PATH"]}
    (tmp_path / "maand.yml").write_text("plugin: maand.core.workspace\npreview: true\n")
    playbook = subprocess.run(["ansible-playbook", "-i", "maand.yml",
                               os.path.join(REPO, "tests", "integration", "files", "ping_workers.yml")],
                              cwd=str(tmp_path), env=dict(os.environ, **env), capture_output=True, text=True, timeout=120, check=False)
    assert playbook.returncode != 0
    assert "duplicate host" in playbook.stderr


def test_init_never_overwrites(tmp_path):
    (tmp_path / "maand.conf").write_text('ssh_user = "mine"\n')
    proc = run("ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "maand.conf").read_text() == 'ssh_user = "mine"\n'
    assert json.loads((tmp_path / "workspace" / "workers.json").read_text()) == []
    assert 'port_min = "30000"' in (tmp_path / "workspace" / "bucket.conf").read_text()
    again = run("ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % tmp_path)
    assert "changed=0" in again.stdout


def test_removed_worker_group_and_constructed_groups(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"]}})
    assert run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path).returncode == 0
    set_workers(tmp_path, [W1])
    build(tmp_path)
    (tmp_path / "maand.yml").write_text(
        "plugin: maand.core.workspace\ngroups:\n  big: maand_worker.memory_mb >= 4096\n"
        "keyed_groups:\n  - key: maand_worker.zone\n    prefix: z\n")
    listing = inventory_list(tmp_path)
    assert listing["maand_removed_workers"]["hosts"] == ["10.0.0.2"]
    assert listing["maand_workers"]["hosts"] == ["10.0.0.1"]
    removed = listing["_meta"]["hostvars"]["10.0.0.2"]["maand_allocations"]
    assert [(a["job"], a["state"]) for a in removed] == [("api", "removed")]
    assert sorted(listing["big"]["hosts"]) == ["10.0.0.1", "10.0.0.2"]  # constructed groups see every host
    assert listing["z_eu_1"]["hosts"] == ["10.0.0.1"]


def test_inventory_cache_is_never_stale(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}})
    build(tmp_path)
    (tmp_path / "maand.yml").write_text("plugin: maand.core.workspace\ncache: true\ncache_plugin: ansible.builtin.jsonfile\n"
                                        "cache_connection: %s\n" % (tmp_path / "cache"))
    assert inventory_list(tmp_path)["job_api"]["hosts"] == ["10.0.0.1"]
    assert os.listdir(str(tmp_path / "cache"))
    set_workers(tmp_path, [W1, W2])
    assert "workspace/workers.json changed" in all_vars(tmp_path)["maand_inventory_errors"][0]
    build(tmp_path)
    assert sorted(inventory_list(tmp_path)["job_api"]["hosts"]) == ["10.0.0.1", "10.0.0.2"]


def test_build_playbook_lists_every_error_and_exits_nonzero(tmp_path):
    jobs = {n: {"selectors": ["worker"], "resources": {"memory": {"max": "3 gb"}}} for n in ("a", "b")}
    make_bucket(tmp_path, [W1, W2], jobs, disabled={"jobs": {"ghost": {}}})
    proc = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "worker_ip 10.0.0.1, available memory is 4096.00 MB, required memory is 6144.00 MB" in out
    assert "worker_ip 10.0.0.2, available memory is 4096.00 MB, required memory is 6144.00 MB" in out
    assert "unknown job ghost" in out  # the warning is printed too
    assert "Traceback" not in out and not (tmp_path / "data" / "catalog.json").exists()


def test_build_playbook_check_mode_shows_changes_and_writes_nothing(tmp_path):
    make_bucket(tmp_path, [W1], {"api": {"selectors": ["worker"]}})
    proc = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout
    assert "+ allocation api@10.0.0.1 (active)" in proc.stdout
    assert not (tmp_path / "data" / "catalog.json").exists()
    proc = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path)
    assert "JOB" in proc.stdout and "api  10.0.0.1" in proc.stdout.replace("   ", "  ")
    catalog = json.loads((tmp_path / "data" / "catalog.json").read_text())
    assert [a["worker"] for a in catalog["allocations"]] == ["10.0.0.1"]
    again = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path)
    assert "changed=0" in again.stdout


def test_inventory_warns_with_a_summary_for_a_job_that_matches_no_worker(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"gpu": {"selectors": ["gpu"]}, "api": {"selectors": ["web"]}})
    preview(tmp_path)
    proc = run("ansible-inventory", "-i", os.path.join(str(tmp_path), "maand.yml"), "--list")
    assert proc.returncode == 0, proc.stderr
    warnings = " ".join(proc.stderr.split())
    assert "gpu: 0/2 workers" in warnings and "missing label gpu" in warnings
    assert "api: 0/2" not in warnings
    assert plain(json.loads(proc.stdout))["job_api"]["hosts"] == ["10.0.0.1"]


HOSTILE = [  # (file under the bucket, its new bytes, what the error must say besides the file)
    ("workspace/workers.json", b"{[", "JSON"),
    ("workspace/workers.json", b'{"host": "10.0.0.1"}', "list"),
    ("workspace/workers.json", b'[{"host": 5, "labels": ["worker"]}]', "host"),
    ("workspace/jobs/api/manifest.json", b'{"selectors": "worker"}', "selectors"),
    ("workspace/jobs/api/manifest.json", b'{"selectors": ["worker"], "version": 3}', "version"),
    ("workspace/jobs/api/manifest.json", b"\xff\xfe\x00garbage", "UTF-8"),
    ("maand.conf", b"ssh_port = = 22\n", "TOML"),
    ("workspace/bucket.conf", b'port_min = "abc"\n', "port_min"),
    ("workspace/disabled.json", b'{"jobs": ["api"]}', "jobs"),
]


@pytest.mark.parametrize("rel,data,says", HOSTILE, ids=["%s:%d" % (h[0].rsplit("/", 1)[-1], i) for i, h in enumerate(HOSTILE)])
def test_build_playbook_refuses_hostile_input_naming_the_file_and_loses_nothing(tmp_path, rel, data, says):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"], "resources": {"ports": {"api_port": {}}}}})
    proc = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    catalog = (tmp_path / "data" / "catalog.json").read_bytes()
    (tmp_path / rel).write_bytes(data)
    proc = run("ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out and "Exception" not in out, out
    assert rel.rsplit("/", 1)[-1] in out and says in out, out
    assert (tmp_path / "data" / "catalog.json").read_bytes() == catalog  # the last good build stays

"""First steps that cannot go wrong (issue 14 item 5), without a fleet: `-i <bucket folder>` and a
missing -i give one error naming <bucket>/maand.yml, under Ansible's defaults and under the bucket's
own ansible.cfg; the status playbook fails loud when the inventory did not load; a first build does not open
with "not built", a stale catalog is said once (issue 23 item 10). Same setup as test_fail_loud.py (an empty
ANSIBLE_CONFIG, a working folder without ansible.cfg)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

# the fixtures below are used by name (pytest), not by reference
from tests.integration.test_fail_loud import REPO, _built, _bucket, _home, run  # pylint: disable=unused-import

PATH_ERROR = "ErrInventoryPath: -i was given the maand bucket folder"


@pytest.mark.parametrize("playbook", ["deploy", "status", "job"])
def test_bucket_folder_as_inventory_gives_one_error_naming_maand_yml(home, bucket, playbook):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket), "maand.core.%s" % playbook, "-e", "maand_job=api",
                  "-e", "maand_target=status", "-e", "maand_allow_unknown_vars=true")
    assert rc != 0, out
    assert "%s %s, not its inventory file. Fix: pass -i %s/maand.yml" % (PATH_ERROR, bucket, bucket) in out, out
    # Ansible's default enable_plugins leave the folder's other files to ini/yaml: they only warn
    assert "[10.0.0.10]" not in out and "[10.0.0.20]" not in out, out  # no task ran on a worker


def test_bucket_folder_under_the_buckets_own_ansible_cfg(home, bucket):
    """init's ansible.cfg makes a failing source fatal; the folder still gives the one error."""
    rc, out = run(home, "ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % bucket)
    assert rc == 0, out
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(["ansible-playbook", "-i", ".", "maand.core.deploy", "--check"], cwd=str(bucket), env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert PATH_ERROR in out and "Completely failed to parse" not in out, out
    assert "Failed to parse inventory with" not in out, out  # no raw parse error per file
    # and with no -i at all, the bucket's ansible.cfg (inventory = maand.yml) targets the bucket
    proc = subprocess.run(["ansible-playbook", "maand.core.deploy", "--list-hosts"], cwd=str(bucket), env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "10.0.0.10" in out and "10.0.0.20" in out, out


@pytest.mark.parametrize("playbook", ["deploy", "status"])
def test_no_inventory_names_maand_yml_and_the_bucket_folder(home, playbook):
    rc, out = run(home, "ansible-playbook", "maand.core.%s" % playbook)
    assert rc != 0, out
    assert "no inventory was given" in out and "-i <bucket>/maand.yml, or run from the bucket folder" in out, out


def test_status_fails_loud_on_a_broken_bucket(home, bucket):
    (bucket / "maand.conf").write_text('ssh_user = "agent"\nssh_port = "twenty-two"\n')
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.status")
    assert rc != 0 and "has errors; nothing was run" in out, out


def test_status_on_a_broken_workers_json_uses_the_last_built_catalog(home, bucket):
    """A git pull that breaks workers.json leaves status working on the last built catalog (issue 31 item 2)."""
    (bucket / "workspace" / "workers.json").write_text("[{not json")
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.status")
    assert out.count("ErrStaleCatalog") == 1 and "workspace/workers.json changed" in out, out
    assert "this run uses the last built catalog" in out and "has errors; nothing was run" not in out, out


def test_status_refuses_an_unknown_extra_var(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.status",
                  "-e", "maand_job=api")
    assert rc != 0 and "maand_job is not read by maand.core.status" in out and "maand_jobs" in out, out


def test_job_create_outside_a_bucket_says_how_to_make_one(home):
    rc, out = run(home, "ansible-playbook", "maand.core.job_create", "-e", "maand_job=api")
    assert rc != 0 and "is not a maand bucket" in out and "maand.core.init" in out, out


def _bucket_cli(bucket, *args):
    """ansible-playbook from the bucket folder under its own ansible.cfg (maand.core.init's: the maand.core.deploy
    stdout callback, inventory = maand.yml), as a user runs it."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), PWD=str(bucket))
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(["ansible-playbook", *args], cwd=str(bucket), env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_first_build_of_a_fresh_bucket_does_not_open_with_missing_catalog(home, bucket):
    """issue 23 item 10: the inventory loads before the build it is part of; only playbooks that need it say so."""
    rc, out = run(home, "ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % bucket)
    assert rc == 0, out
    shutil.rmtree(bucket / "data")
    rc, out = _bucket_cli(bucket, "maand.core.build")
    assert rc == 0, out
    assert "ErrMissingCatalog" not in out and "cannot be used" not in out, out
    assert (bucket / "data" / "catalog.json").exists()


def test_a_stale_catalog_is_said_once_without_the_asserts_json(home, bucket):
    rc, out = run(home, "ansible-playbook", "maand.core.init", "-e", "maand_bucket=%s" % bucket)
    assert rc == 0, out
    rc, out = _bucket_cli(bucket, "maand.core.build")
    assert rc == 0, out
    manifest = next((bucket / "workspace" / "jobs").iterdir()) / "manifest.json"
    manifest.write_text(manifest.read_text().rstrip() + "\n\n")
    rc, out = _bucket_cli(bucket, "maand.core.deploy", "--check", "--diff")
    assert rc != 0, out
    assert out.count("ErrStaleCatalog") == 1, out
    assert "FAILED: The maand workspace %s has errors; nothing was run." % bucket in out, out
    assert "evaluated_to" not in out and "Task failed" not in out and "fatal:" not in out, out
    # ansible-inventory still says it (no play asserts it there)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(["ansible-inventory", "--graph"], cwd=str(bucket), env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert "ErrStaleCatalog" in proc.stdout + proc.stderr

"""Build then maand.core.cat and lookup maand.core.kv through real ansible-playbook runs (no fleet):
build writes data/kv.json, cat prints the tables with -i <bucket>/maand.yml, secrets stay hidden
unless maand_reveal=true."""

from __future__ import annotations

import os
import subprocess

from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.unit.plugin_utils.catalog.test_kv_build import bucket

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def playbook(*args, cwd=None):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(["ansible-playbook", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300, check=False)


def test_build_then_cat_every_view(tmp_path):
    root = bucket(tmp_path)
    with open(os.path.join(root, "maand.yml"), "w") as handle:
        handle.write("plugin: maand.core.workspace\n")
    check = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert not os.path.exists(os.path.join(root, "data", "kv.json"))
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "KV: " in built.stdout and os.path.isfile(os.path.join(root, "data", "kv.json"))

    store = _store.KVStore.load(root)
    store.put("secrets/job/api", "db_password", "hunter2-secret")
    store.save()
    inventory = os.path.join(root, "maand.yml")

    kv = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=kv", "-e", "maand_jobs=api")
    assert kv.returncode == 0, kv.stdout + kv.stderr
    assert "vars/job/api" in kv.stdout and "api-gateway" in kv.stdout and "***" in kv.stdout
    assert "hunter2-secret" not in kv.stdout
    revealed = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=kv", "-e", "maand_jobs=api",
                        "-e", "maand_reveal=true")
    assert revealed.returncode == 0 and "hunter2-secret" in revealed.stdout
    # -v prints every task result: the revealed value is printed once (the table), never kept in the result
    verbose = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=kv", "-e", "maand_jobs=api",
                       "-e", "maand_reveal=true", "-v")
    assert verbose.returncode == 0 and "secrets were printed, this result keeps them masked" in verbose.stdout
    assert verbose.stdout.count("hunter2-secret") == revealed.stdout.count("hunter2-secret") == 1, verbose.stdout

    for view, words in (("allocations", "10.0.0.2"), ("jobs", "1 active / 1"), ("workers", "4096 MB"),
                        ("ports", "api_http_port"), ("deployments", "no deploy record is kept yet")):
        proc = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=%s" % view,
                        "-e", "maand_workers=10.0.0.2")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert words in proc.stdout, (view, proc.stdout)

    bad = playbook("-i", inventory, "maand.core.cat", "-e", "maand_cat=job")
    assert bad.returncode != 0 and 'did you mean "jobs"?' in bad.stdout


def test_lookup_reads_the_built_store(tmp_path):
    root = bucket(tmp_path)
    assert playbook("maand.core.build", "-e", "maand_bucket=%s" % root).returncode == 0
    play = tmp_path / "play.yml"
    play.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.debug:
        msg: "{{ lookup('maand.core.kv', 'vars/job/api', 'service_name', bucket=BUCKET) }}"
""".replace("BUCKET", "'%s'" % root))
    proc = playbook(str(play))
    assert proc.returncode == 0 and "api-gateway" in proc.stdout, proc.stdout + proc.stderr

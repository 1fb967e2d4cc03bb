"""The verbs' playbooks that need no fleet, through ansible-playbook and ansible-doc (moved out of tests/unit,
which stays a fast loop): explain and build's explanations, facts' refusals of bad workers.json, the docs of
worker_facts and workers_file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.bucket_factory import make_bucket
from tests.unit.plugin_utils.ops.test_workers_file import bucket, workers_path  # noqa: F401 (bucket is a fixture); pylint: disable=unused-import
from tests.unit.plugin_utils.placement.test_explain import CONF, DISABLED, FLEET

REPO = str(Path(__file__).resolve().parents[2])
COLLECTIONS = Path(REPO) / ".collections"


def _playbook(*extra, name="maand.core.explain"):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_STDOUT_CALLBACK="default")
    return subprocess.run(["ansible-playbook", name, *extra], env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.slow
def test_explain_playbook_on_an_invalid_capacity_bucket(tmp_path):
    jobs = {"a": {"selectors": ["prod"], "resources": {"memory": {"max": "6 gb"}}},
            "b": {"selectors": ["prod"], "resources": {"memory": {"max": "6 gb"}}, "hardware": "mem=3G"}}
    make_bucket(tmp_path, FLEET, jobs, maand_conf=CONF, disabled=DISABLED)
    proc = _playbook("-e", "maand_bucket=%s" % tmp_path, "-e", "job=b", "-e", "show=rejected")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "ErrInsufficientResource" in out  # the build's errors come first
    assert "b: 3/10 workers: 4 missing label prod, 2 mem < 3G, 1 disabled" in out
    assert "  10.0.0.8 (position 7): not placed\n      - hardware: mem 2048 MB < 3072 MB" in out
    proc = _playbook("-e", "maand_bucket=%s" % tmp_path)
    assert "a: 5/10 workers: 4 missing label prod, 1 disabled" in proc.stdout
    proc = _playbook("-e", "maand_bucket=%s" % tmp_path, "-e", "job=nope")
    assert proc.returncode != 0 and "unknown job 'nope'" in proc.stdout
    assert not os.path.exists(os.path.join(str(tmp_path), "data", "catalog.json"))


@pytest.mark.slow
def test_build_playbook_prints_the_explanation_of_a_short_job(tmp_path):
    jobs = {"api": {"selectors": ["prod"], "placement": {"count": 8}}, "gpu": {"selectors": ["gpu"]}}
    make_bucket(tmp_path, FLEET, jobs, maand_conf=CONF, disabled=DISABLED)
    proc = _playbook("-e", "maand_bucket=%s" % tmp_path, name="maand.core.build")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "job api needs 8 workers (placement.count), only 5 eligible" in out
    assert "api: 5/10 workers (count 8): 4 missing label prod, 1 disabled" in out
    assert "  10.0.0.4 (position 3): not placed" in out and "missing label prod (selectors)" in out
    assert "job gpu matches no worker (selectors: gpu): gpu: 0/10 workers: 10 missing label gpu" in out
    assert not os.path.exists(os.path.join(str(tmp_path), "data", "catalog.json"))


def run_playbook(bucket, tmp_path, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    return subprocess.run(["ansible-playbook", "maand.core.facts", "-e", "maand_bucket=%s" % bucket, *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)


@pytest.mark.parametrize("content, expected", [
    ("[{\"host\": \"a\"}, {\"host\": \"a\"}]", "[1].host: duplicate host a (also at [0])"),
    ("not json", "workspace/workers.json: invalid JSON"),
    ("[{\"labels\": []}]", "$[0]: 'host' is a required property"),
])
def test_playbook_bad_input_fails_cleanly(bucket, tmp_path, content, expected):
    workers_path(bucket).write_text(content)
    proc = run_playbook(bucket, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert expected in out
    assert str(workers_path(bucket)) in out
    assert "Traceback" not in out
    assert workers_path(bucket).read_text() == content


def test_playbook_requires_the_bucket(tmp_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["ansible-playbook", "maand.core.facts"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode != 0
    assert "-e maand_bucket=DIR" in proc.stdout + proc.stderr


def test_ansible_doc_renders():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    for name in ("maand.core.worker_facts", "maand.core.workers_file"):
        proc = subprocess.run(["ansible-doc", "--json", name], capture_output=True, text=True, env=env,
                              timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)[name]
        assert doc["doc"]["options"] and doc["examples"] and doc["return"], name

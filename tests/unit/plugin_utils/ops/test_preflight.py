"""maand.core.preflight: the extra vars, the workspace inventory, the workers and the SSH key, in one task
(ops/preflight.py and its action)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.ops import preflight
from tests.unit.plugin_utils.ops.test_extra_vars import _action


def test_a_loaded_inventory_with_workers_and_its_key_passes(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    inv = preflight.Inventory(True, workers=2, key_file=str(key), bucket_dir="/b")
    assert preflight.inventory_problem(inv) == "" and preflight.workers_problem(inv) == ""
    assert preflight.workers_problem(preflight.Inventory(True, workers=1)) == ""  # no key named: ssh's defaults


@pytest.mark.parametrize("inv, words", [
    (preflight.Inventory(False, errors=("workers.json: bad host",), bucket_dir="/b"),
     ["The maand workspace /b has errors; nothing was run", "  - workers.json: bad host"]),
    (preflight.Inventory(False, sources=("/nowhere/maand.yml",)),
     ["no inventory was given", "(/nowhere/maand.yml does not exist)", "-i <bucket>/maand.yml"]),
    (preflight.Inventory(False, sources=("/",)),
     ["did not load, so there is nothing to run on", "ansible-inventory -i <bucket>/maand.yml --graph",
      "enable_plugins, it must include maand.core.workspace"]),
])
def test_an_inventory_that_did_not_load_says_why_and_the_fix(inv, words):
    problem = preflight.inventory_problem(inv)
    for word in words:
        assert word in problem, (word, problem)


def test_no_workers_or_a_missing_key_refuses_naming_the_file_and_the_fix(tmp_path):
    none = preflight.workers_problem(preflight.Inventory(True, bucket_dir="/b"))
    assert "The bucket /b has no workers" in none and "/b/workspace/workers.json" in none
    missing = preflight.workers_problem(preflight.Inventory(True, workers=3, key_file=str(tmp_path / "nokey"),
                                                            bucket_dir="/b"))
    assert "SSH key %s not found" % (tmp_path / "nokey") in missing and "/b/maand.conf" in missing


def _vars(tmp_path, key=True, ok=True, workers=("w1",)):
    path = tmp_path / "id_ed25519"
    if key:
        path.write_text("k")
    return {"maand_workspace_ok": ok, "maand_inventory_errors": [], "maand_bucket_dir": str(tmp_path),
            "ansible_inventory_sources": [str(tmp_path)], "groups": {"maand_workers": list(workers)},
            "hostvars": {w: {"ansible_ssh_private_key_file": str(path)} for w in workers}}


def test_the_action_checks_only_what_it_is_told(tmp_path):
    for args, task_vars, failed in (
            ({"playbook": "maand.core.info"}, {}, False),  # no inventory check: build, info, init ...
            ({"playbook": "maand.core.job", "inventory": True}, {}, True),  # nothing loaded
            ({"playbook": "maand.core.job", "inventory": True}, _vars(tmp_path, workers=()), False),
            ({"playbook": "maand.core.deploy", "workers": True}, _vars(tmp_path, workers=()), True),
            ({"playbook": "maand.core.deploy", "workers": True}, _vars(tmp_path), False),
            ({"playbook": "maand.core.deploy", "workers": True}, _vars(tmp_path / "..", ok="False"), True)):
        module, act = _action(args)
        with mock.patch.object(module, "load_extra_vars", return_value={}):
            res = act.run(task_vars=task_vars)
        assert bool(res.get("failed")) == failed, (args, res)


def test_the_action_reads_the_key_of_the_first_worker_that_names_one(tmp_path):
    task_vars = _vars(tmp_path, key=False, workers=("w1", "w2"))
    task_vars["hostvars"]["w1"] = {}
    module, act = _action({"playbook": "maand.core.status", "workers": True})
    with mock.patch.object(module, "load_extra_vars", return_value={}):
        res = act.run(task_vars=task_vars)
    assert res["failed"] and "SSH key %s not found" % (tmp_path / "id_ed25519") in res["msg"]


def test_an_unknown_extra_var_is_refused_before_the_inventory_is_looked_at():
    module, act = _action({"playbook": "maand.core.deploy", "workers": True})
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_rollbak": "api"}):
        res = act.run(task_vars={})
    assert res["failed"] and res["msg"].startswith("nothing was run: the extra var maand_rollbak"), res

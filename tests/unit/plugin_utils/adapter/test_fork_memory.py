"""adapter/fork_memory: the controller freezes what survives its full collections, so a fork keeps sharing the
controller's heap; cycles are still collected by a complete sweep once the frozen set has doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

# Run in a process of its own: the collector's state (callbacks, the frozen set) is the whole process's.
SCRIPT = r"""
import gc, json, os, sys
from ansible_collections.maand.core.plugins.plugin_utils.adapter import fork_memory
gc.disable()                                 # only the collections below: each step is one of the policy's
out = {}
keep = [[i] for i in range(50000)]          # long-lived, as the controller's inventory and play are
out["frozen_before"] = gc.get_freeze_count()
fork_memory.install(); fork_memory.install()
out["hooks"] = gc.callbacks.count(fork_memory._after_collection)
gc.collect()                                 # the first full collection examines everything: its survivors freeze
out["frozen_after_sweep"] = gc.get_freeze_count()
base = out["frozen_after_sweep"]
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a                      # a cycle among objects that will be frozen
gc.collect()
out["frozen_with_cycle"] = gc.get_freeze_count()
import weakref
probe = weakref.ref(a)
del a, b
more = [[i] for i in range(3 * base)]        # the frozen set more than doubles ...
gc.collect()                                 # ... so this collection unfreezes
out["frozen_after_doubling"] = gc.get_freeze_count()
gc.collect()                                 # and this one sweeps everything: the cycle is gone
out["cycle_collected"] = probe() is None
out["frozen_after_second_sweep"] = gc.get_freeze_count()
pid = os.fork()
if pid == 0:                                 # a fork: its collections do not freeze what it makes
    mine = [[i] for i in range(20000)]
    gc.collect()
    os._exit(0 if gc.get_freeze_count() <= out["frozen_after_second_sweep"] else 3)
out["fork_rc"] = os.waitpid(pid, 0)[1]
print(json.dumps(out))
"""


def run_script():
    env = dict(os.environ, PYTHONPATH=str(REPO / ".collections"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_survivors_of_a_full_collection_are_frozen_and_cycles_still_collected():
    out = run_script()
    assert out["frozen_before"] == 0 and out["hooks"] == 1  # installed once, however often it is called
    assert out["frozen_after_sweep"] >= 50000  # the long-lived objects skip later collections
    assert out["frozen_with_cycle"] > out["frozen_after_sweep"]  # the cycle survived (it was alive) and froze
    assert out["frozen_after_doubling"] == 0  # more than twice the base: unfrozen for a complete sweep
    assert out["cycle_collected"]  # the dead cycle among frozen objects was collected by that sweep
    assert out["frozen_after_second_sweep"] >= 4 * 50000
    assert out["fork_rc"] == 0


INVENTORY = r"""
import gc, sys
from ansible.parsing.dataloader import DataLoader
from ansible.inventory.manager import InventoryManager
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader()
from ansible_collections.maand.core.plugins.plugin_utils.adapter import fork_memory
inventory = InventoryManager(loader=DataLoader(), sources=[sys.argv[1]])
assert inventory.groups.get("maand_workers") is not None, sorted(inventory.groups)
print(gc.callbacks.count(fork_memory._after_collection))
"""


def test_the_workspace_inventory_installs_it(tmp_path):
    """Loaded by the controller (ansible-playbook, ansible, AWX) before any fork, the inventory installs it."""
    import shutil
    bucket = tmp_path / "b"
    shutil.copytree(REPO / "examples" / "hello", bucket, ignore=shutil.ignore_patterns("data"))
    (bucket / "maand.yml").write_text("plugin: maand.core.workspace\npreview: true\n")  # no build needed
    env = dict(os.environ, PYTHONPATH=str(REPO / ".collections"), ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"),
               ANSIBLE_INVENTORY_ENABLED="maand.core.workspace")
    proc = subprocess.run([sys.executable, "-c", INVENTORY, str(bucket / "maand.yml")], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-1] == "1", proc.stdout

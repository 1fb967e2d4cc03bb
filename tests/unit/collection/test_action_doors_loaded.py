"""An action plugin's doors are resolved when the plugin is imported (doors.load_used, from
adapter/action_base.MaandAction): the controller imports an action once, then forks a worker per task and
host, and Ansible's collection loader compiles a module from source at every import, so a door name first
used inside a task (``deploy.step(...)`` in ``act``) cost every fork the compile of deploy/service.py and
all it imports (issue 29's benchmark parity: that was most of the move's extra controller time per step).

Each plugin is imported in a fresh fork of one interpreter that has loaded only Ansible's action base;
every door name the plugin's functions use must then be in its package's namespace already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from ansible_collections.maand.core.plugins.plugin_utils import doors

REPO = Path(__file__).resolve().parents[3]
ACTIONS = sorted(p.stem for p in (REPO / "plugins" / "action").glob("*.py") if p.stem != "__init__")

_CHILD = textwrap.dedent('''
    import ast, importlib, json, os, sys
    sys.path.insert(0, sys.argv[1])
    import ansible.plugins.action  # noqa: F401  what the controller holds before it imports an action
    ROOT = "ansible_collections.maand.core.plugins"

    def late_uses(path, module):
        """(alias, name) of door names used inside the functions of a plugin."""
        tree = ast.parse(open(path, encoding="utf-8").read())
        out = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.Lambda)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                        door = vars(module).get(node.value.id)
                        if getattr(door, "__name__", "").startswith(ROOT + ".plugin_utils.") \\
                                and node.attr in getattr(door, "__all__", ()):
                            out.add((node.value.id, node.attr))
        return sorted(out)

    found = {}
    for name in sys.argv[2:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            module = importlib.import_module("%s.action.%s" % (ROOT, name))
            uses = late_uses(module.__file__, module)
            unresolved = ["%s.%s" % use for use in uses if use[1] not in vars(vars(module)[use[0]])]
            os.write(write, json.dumps([len(uses), unresolved]).encode())
            os._exit(0)
        os.close(write)
        chunks = []
        while True:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(read)
        os.waitpid(pid, 0)
        found[name] = json.loads(b"".join(chunks) or b"null")
    print(json.dumps(found))
''')


def test_every_action_resolves_its_doors_when_imported():
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(REPO / ".collections")] + ACTIONS,
                          capture_output=True, text=True, check=False, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert sorted(found) == ACTIONS and None not in found.values(), proc.stderr[-3000:]
    assert found["deploy_step"][0] >= 2  # deploy.step and adapter.deploy_controller: the detector sees them
    unresolved = {name: late for name, (dummy, late) in found.items() if late}
    assert unresolved == {}, "first used in a forked worker (see doors.load_used): %s" % unresolved


def test_load_used_resolves_the_door_names_of_a_module(tmp_path, monkeypatch):
    """On a synthetic plugin: a door name used in a function is resolved, a local of the same name is left."""
    source = ("from ansible_collections.maand.core.plugins.plugin_utils import catalog\n"
              "def act(catalog_doc):\n"
              "    catalog.read_catalog('x')\n"
              "    return catalog_doc.get('jobs')\n")
    path = tmp_path / "fake_action.py"
    path.write_text(source)
    module = type(sys)("fake_action")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), vars(module))  # pylint: disable=exec-used
    catalog = vars(module)["catalog"]
    monkeypatch.delitem(vars(catalog), "read_catalog", raising=False)  # as in a process that never used it
    monkeypatch.setitem(sys.modules, "fake_action", module)
    assert "read_catalog" not in vars(catalog)
    doors.load_used("fake_action")
    assert "read_catalog" in vars(catalog)

"""One worker layout: the controller's paths (worker/layout.py) agree with what the agent, its sandbox
and the hooks' maand module spell out themselves (they are shipped alone and import nothing of the rest)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ansible_collections.maand.core.plugins.plugin_utils.worker import agent, layout, maand_helper, sandbox

CORE = Path(layout.__file__).resolve().parents[1]


def test_paths():
    assert layout.bucket_root("b1") == "/opt/worker/b1"
    assert layout.job_root("b1", "api") == "/opt/worker/b1/jobs/api"
    assert layout.AGENT_DIR == "/opt/worker/.maand"


def test_the_shipped_files_spell_the_same_root():
    for module in (agent, sandbox, maand_helper):
        text = Path(module.__file__).read_text(encoding="utf-8")
        roots = set(re.findall(r'"(/opt/[a-z]+)/', text))
        assert roots <= {layout.WORKER_ROOT}, (module.__name__, roots)
    assert '"/opt/worker/%s/jobs/%s"' in Path(maand_helper.__file__).read_text(encoding="utf-8")


def test_the_agent_and_its_sandbox_keep_the_same_folders():
    assert sandbox.KEEP == agent.KEEP == layout.KEEP == ("data", "logs")


def test_no_core_module_outside_worker_spells_the_worker_root():
    """Code (not docstrings or comments) names /opt/worker only through worker/layout.py."""
    offenders = []
    for path in sorted(CORE.glob("*/*.py")):
        if path.parent.name == "worker":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if re.search(r"/opt/worker/%s", node.value) or node.value == "/opt/worker":
                    offenders.append("%s:%d" % (path.relative_to(CORE), node.lineno))
    assert offenders == []

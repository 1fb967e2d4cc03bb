"""Every plugin's DOCUMENTATION / EXAMPLES / RETURN is valid YAML.

ansible-doc (and so the collection install check and ansible-test sanity) refuses a plugin whose
documentation does not parse; a plain scalar holding ": " is the usual cause. This catches it in the
fast unit loop instead of minutes later in sanity.
"""
from __future__ import annotations

import ast
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3] / "plugins"
DOC_NAMES = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def _doc_strings():
    for path in sorted(ROOT.glob("*/*.py")):
        if path.parent.name in ("plugin_utils", "module_utils"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            name = getattr(node.targets[0], "id", "")
            if name in DOC_NAMES and isinstance(node.value, ast.Constant):
                yield pytest.param(node.value.value, id=f"{path.parent.name}/{path.name}:{name}")


CASES = list(_doc_strings())


def test_every_plugin_has_documentation():
    ids = {case.id for case in CASES}
    assert any(i.endswith(":DOCUMENTATION") for i in ids)


@pytest.mark.parametrize("text", CASES)
def test_doc_is_yaml(text):
    yaml.safe_load(text)


def test_bad_doc_is_caught():
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load("description:\n  - C(a) is what\n    C(maand job <target>): when O(job) runs\n")

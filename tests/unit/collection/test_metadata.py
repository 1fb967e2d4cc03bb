"""The collection's metadata (issue 29 item 7): galaxy.yml points at the real repository, meta/runtime.yml's action
group `maand` lists the public actions, and what calls itself internal carries the maand.core.private fragment.

Public: a module of plugins/modules without the maand.core.private doc fragment. The action group lists exactly
those, and each takes `bucket` (so `module_defaults: {group/maand.core.maand: {bucket: DIR}}` suits them all).
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
MODULES = REPO / "plugins" / "modules"
PRIVATE = "maand.core.private"


def documentation(path):
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % path)


def modules():
    return {path.stem: documentation(path) for path in sorted(MODULES.glob("*.py"))}


def fragments(doc):
    value = doc.get("extends_documentation_fragment") or []
    return [value] if isinstance(value, str) else list(value)


def public():
    return sorted(name for name, doc in modules().items() if PRIVATE not in fragments(doc))


def test_galaxy_yml_names_the_repository():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
    for key in ("repository", "documentation", "issues"):
        assert str(galaxy.get(key, "")).startswith("https://github.com/maand-sh/maand.core"), key
    assert "example.invalid" not in (REPO / "galaxy.yml").read_text(encoding="utf-8")


def test_the_action_group_lists_the_public_actions():
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    assert runtime["requires_ansible"] == ">=2.19.0"
    assert runtime["action_groups"] == {"maand": public()}
    assert len(public()) >= 10  # build, cat, explain, info, status... (the verbs of the playbooks)


def fragment_options(name):
    """The options a maand.core doc fragment adds: maand.core.<file>[.<variant>] is plugins/doc_fragments/<file>.py,
    ModuleDocFragment.DOCUMENTATION or .<VARIANT>."""
    _ns, _coll, file, *variant = name.split(".")
    tree = ast.parse((REPO / "plugins" / "doc_fragments" / ("%s.py" % file)).read_text(encoding="utf-8"))
    wanted = variant[0].upper() if variant else "DOCUMENTATION"
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == wanted for t in node.targets):
            return set((yaml.safe_load(node.value.value) or {}).get("options") or {})
    raise AssertionError("no doc fragment %s" % name)


def test_every_public_action_takes_bucket():
    docs = modules()
    without = [name for name in public()
               if "bucket" not in (docs[name].get("options") or {})
               and not any("bucket" in fragment_options(f) for f in fragments(docs[name]) if f.startswith("maand.core."))]
    assert not without, "the action group's module_defaults set bucket; these take none: %s" % without


def test_what_calls_itself_internal_is_private():
    loud = []
    for name, doc in modules().items():
        text = " ".join(doc.get("description") or []) + " " + " ".join(doc.get("notes") or [])
        if ("Internal" in text or "Private" in text or "internal to" in text) and PRIVATE not in fragments(doc):
            loud.append(name)
    assert not loud, "internal modules without the %s doc fragment: %s" % (PRIVATE, loud)

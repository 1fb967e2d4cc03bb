"""Every action's ARGUMENT_SPEC agrees with its module documentation (issue 20 item 5).

An action plugin validates its arguments with ARGUMENT_SPEC (plugins/plugin_utils/adapter/specs.py) while
users read the doc-only module file of the same name (plugins/modules/, which extends the shared
plugins/doc_fragments/). ansible-test's validate-modules compares spec and docs only for modules that
run an AnsibleModule, so this test does it for the actions: the documentation is read with Ansible's own
plugin docs loader (fragments applied, as ansible-doc shows it) and every option is compared for type,
required, default, choices and elements.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import pytest
from ansible.plugins.loader import fragment_loader, init_plugin_loader
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
from ansible.utils.plugin_docs import get_docstring

from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs

REPO = Path(__file__).resolve().parents[3]
ACTIONS = sorted(p.stem for p in (REPO / "plugins" / "action").glob("*.py") if p.stem != "__init__")
KEYS = ("type", "required", "default", "choices", "elements")


@contextlib.contextmanager
def collection_loader():
    """Ansible's collection loader, installed for the block only: the unit tests import the collection as a
    plain package (conftest.py), which the loader does not accept, so those modules step aside meanwhile."""
    def ours():
        return [name for name in sys.modules if name.split(".")[0] == "ansible_collections"]

    saved = {name: sys.modules.pop(name) for name in ours()}
    init_plugin_loader([str(REPO / ".collections")])
    try:
        yield
    finally:
        _AnsibleCollectionFinder._remove()
        for name in ours():
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.fixture(scope="module")
def docs():
    """{action: its module documentation, fragments applied, as plain JSON types}."""
    with collection_loader():
        found = {name: get_docstring(str(REPO / "plugins" / "modules" / ("%s.py" % name)), fragment_loader,
                                     is_module=True, collection_name="maand.core")[0] for name in ACTIONS}
    return json.loads(json.dumps(found))


def _field(option, key):
    value = option.get(key)
    if key == "type":
        return value or "str"
    if key == "required":
        return bool(value)
    return value


def _same(a, b):
    # strict: True is not 1, "0" is not 0
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def disagreements(spec, options):
    """What an argument spec and a module's documented options disagree on, one line per difference."""
    found = ["%s: in the argument spec, not documented" % name for name in sorted(set(spec) - set(options))]
    found += ["%s: documented, not in the argument spec" % name for name in sorted(set(options) - set(spec))]
    for name in sorted(set(spec) & set(options)):
        pairs = ((key, _field(spec[name], key), _field(options[name], key)) for key in KEYS)
        found += ["%s: %s is %r in the argument spec, %r in the docs" % (name, key, code, doc)
                  for key, code, doc in pairs if not _same(code, doc)]
    return found


def test_every_action_has_a_module_doc():
    assert ACTIONS and all((REPO / "plugins" / "modules" / ("%s.py" % name)).is_file() for name in ACTIONS)
    assert sorted(specs.SPECS) == ACTIONS


@pytest.mark.parametrize("name", ACTIONS)
def test_argument_spec_agrees_with_the_docs(docs, name):
    action = importlib.import_module("ansible_collections.maand.core.plugins.action.%s" % name).ActionModule
    assert action.ARGUMENT_SPEC == specs.spec_for(name)
    assert disagreements(action.ARGUMENT_SPEC, docs[name].get("options", {})) == []


@pytest.mark.parametrize("name", ACTIONS)
def test_every_option_and_attribute_has_a_description(docs, name):
    doc = docs[name]
    assert all(option.get("description") for option in doc.get("options", {}).values())
    assert {"check_mode", "diff_mode", "platform"} <= set(doc["attributes"])
    assert all(attr.get("description") and attr.get("support") for attr in doc["attributes"].values())


def test_the_checker_finds_each_kind_of_difference(docs):
    spec = specs.spec_for("deploy_lock")
    assert disagreements(spec, docs["deploy_lock"]["options"]) == []
    spec["bucket"]["type"] = "str"
    spec["state"]["default"] = "absent"
    spec["state"]["choices"].append("gone")
    spec["adopt_bucket_id"]["required"] = True
    spec["extra"] = {"type": "bool"}
    options = dict(docs["deploy_lock"]["options"], undocumented={"type": "list", "elements": "str"})
    found = disagreements(spec, options)
    assert found == [
        "extra: in the argument spec, not documented",
        "undocumented: documented, not in the argument spec",
        "adopt_bucket_id: required is True in the argument spec, False in the docs",
        "bucket: type is 'str' in the argument spec, 'path' in the docs",
        "state: default is 'absent' in the argument spec, 'present' in the docs",
        "state: choices is ['present', 'absent', 'gone'] in the argument spec, ['present', 'absent'] in the docs",
    ]


def test_the_checker_is_strict_about_value_types():
    assert disagreements({"a": {"type": "bool", "default": True}}, {"a": {"type": "bool", "default": 1}})
    assert disagreements({"a": {"type": "list", "elements": "str"}}, {"a": {"type": "list"}})
    assert disagreements({"a": {"type": "str"}}, {"a": {}}) == []  # str is the default type on both sides


def test_compose_refuses_an_option_given_twice():
    with pytest.raises(ValueError, match="'bucket' given twice"):
        specs.compose(specs.BUCKET, specs.BUCKET_CWD)

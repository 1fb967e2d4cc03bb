"""The core has one error family (issue 29 item 5): every exception class derives ``errors.MaandError``,
which ``adapter/action_base.MaandAction.run`` maps once into a failed task; no class but MaandError
derives a builtin exception directly; and an exception the core swallows says why, where it is caught."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "plugins"
CORE = PLUGINS / "plugin_utils"
PACKAGE = "ansible_collections.maand.core.plugins.plugin_utils"
BUILTIN_EXCEPTIONS = frozenset(name for name, obj in vars(builtins).items()
                               if isinstance(obj, type) and issubclass(obj, BaseException))
ROOT = ("plugins/plugin_utils/errors/__init__.py", "MaandError")  # the one class that derives Exception

# Code that runs alone on a worker derives the base shipped with it (worker/sandbox.py, worker/maand_helper.py:
# errors/__init__.py installed or staged beside them) or needs no class (modules/worker_facts.py returns its
# problems): none is left out. The set may only stay empty.
WORKER_SIDE: set[tuple[str, str]] = set()

# Moving in parallel (issue 29: other helpers move or split these files and derive their errors from
# MaandError there). Empty this set at the merge.
MOVING: set[str] = set()
# Swallowed exceptions whose comment waits for the helper that owns the file. Empty at the merge.
UNEXPLAINED: set[tuple[str, str]] = set()


def _rel(path):
    return path.relative_to(REPO).as_posix()


def _sources(root=PLUGINS):
    for path in sorted(root.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


# --- the detectors ----------------------------------------------------------------------------------------


def builtin_derived(source):
    """Names of the classes of a source that list a builtin exception among their bases (nested ones too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else (
                    base.attr if isinstance(base, ast.Attribute) and ast.unparse(base.value) == "builtins" else None)
                if name in BUILTIN_EXCEPTIONS:
                    found.append(node.name)
                    break
    return found


_MARKERS = re.compile(r"pylint:\s*disable=[\w,-]+|pragma:\s*no cover|noqa(:\s*[\w,]+)?|type:\s*ignore")


def _says_why(line):
    """The line carries a comment with words in it, not only a linter's marker."""
    if "#" not in line:
        return False
    comment = _MARKERS.sub("", line.split("#", 1)[1]).replace("#", " ")
    return bool(re.search(r"[a-zA-Z]{2}", comment))


def _enclosing_functions(tree):
    owner = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                owner.setdefault(id(inner), node.name)  # ast.walk is breadth-first: the outermost wins
    return owner


def swallowed(source):
    """[(function, line)] of except clauses that drop an exception without saying why: a body of only
    ``pass``, or Exception/BaseException/bare caught without a raise. The reason is a comment on the
    except line, the line above it or the first line of its body."""
    tree = ast.parse(source)
    lines = source.splitlines()
    owner = _enclosing_functions(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler):
            continue
        types = [] if node.type is None else (node.type.elts if isinstance(node.type, ast.Tuple) else [node.type])
        broad = node.type is None or any(ast.unparse(t) in ("Exception", "BaseException") for t in types)
        only_pass = all(isinstance(s, ast.Pass) for s in node.body)
        reraises = any(isinstance(n, ast.Raise) for n in ast.walk(node))
        if not (only_pass or (broad and not reraises)):
            continue
        here = [lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""]
        first = node.body[0].lineno
        here += [lines[first - 1], lines[first - 2] if first - 1 > node.lineno else ""]
        if not any(_says_why(line) for line in here):
            out.append((owner.get(id(node), "<module>"), node.lineno))
    return out


def test_the_detectors_on_synthetic_sources():
    assert builtin_derived("class A(ValueError):\n    pass\nclass B(A):\n    pass\n"
                           "def f():\n    class C(builtins.KeyError):\n        pass\n"
                           "class D(Base, OSError):\n    pass\nclass E(ValueErrorish):\n    pass\n") == ["A", "D", "C"]
    source = ("def f():\n    try:\n        g()\n    except OSError:\n        pass\n"
              "    try:\n        g()\n    except OSError:  # gone already: nothing to do\n        pass\n"
              "    try:\n        g()\n    except Exception:  # pylint: disable=broad-except\n        return 1\n"
              "    try:\n        g()\n    # a check that fails is only a warning\n    except Exception:\n        warn()\n"
              "    try:\n        g()\n    except Exception:\n        log()\n        raise\n"
              "    try:\n        g()\n    except KeyError:\n        return None\n"
              "    try:\n        g()\n    except ValueError:\n        pass  # not JSON: reported below\n")
    assert swallowed(source) == [("f", 4), ("f", 12)]


# --- the real core ------------------------------------------------------------------------------------------


def test_only_maand_error_derives_a_builtin_exception():
    found = set()
    for path, source in _sources():
        if _rel(path) not in MOVING:
            found.update((_rel(path), name) for name in builtin_derived(source))
    assert found - WORKER_SIDE == {ROOT}, "derive MaandError (plugin_utils/errors) instead: %s" % sorted(
        found - WORKER_SIDE - {ROOT})
    assert WORKER_SIDE <= found, "stale WORKER_SIDE entries (the list may only shrink): %s" % sorted(
        WORKER_SIDE - found)
    assert len(found) <= 1, "at most one exception class derives a builtin directly (the base): %s" % sorted(found)


def _core_modules():
    for path in sorted(CORE.glob("*/*.py")):
        if _rel(path) in MOVING:
            continue
        name = path.parent.name if path.stem == "__init__" else "%s.%s" % (path.parent.name, path.stem)
        yield _rel(path), "%s.%s" % (PACKAGE, name)


@pytest.mark.parametrize("rel, module", list(_core_modules()), ids=[rel for rel, dummy in _core_modules()])
def test_every_core_exception_class_is_a_maand_error(rel, module):
    """Bases resolved by importing the module: a class that derives another module's error counts."""
    loaded = importlib.import_module(module)
    classes = [obj for obj in vars(loaded).values()
               if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == module]
    bad = [cls.__name__ for cls in classes
           if not issubclass(cls, MaandError) and (rel, cls.__name__) not in WORKER_SIDE]
    assert bad == [], "%s: derive MaandError: %s" % (rel, bad)


def test_a_swallowed_exception_says_why():
    found = []
    for path, source in _sources():
        if _rel(path) in MOVING:
            continue
        found.extend("%s:%d (%s)" % (_rel(path), line, func) for func, line in swallowed(source)
                     if (_rel(path), func) not in UNEXPLAINED)
    assert found == [], "say why the exception is dropped, in a comment where it is caught: %s" % found


def test_the_unexplained_list_is_not_stale():
    for rel, func in UNEXPLAINED:
        path = REPO / rel
        assert path.is_file() and func in [f for f, dummy in swallowed(path.read_text(encoding="utf-8"))], (rel, func)

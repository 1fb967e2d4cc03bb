"""Comments, docstrings and docs name only what exists (issue 29 item 3).

Read: every comment and docstring under plugins/ (tokenize + ast; message strings are code, not read), and the
whole text of README.md, docs/*.md and bench/results/*.md. The rules:

1. A path ``plugins/...py``, ``tests/...py`` or ``docs/<page>.md`` exists in the repository. Our docs are one
   level deep, so ``docs/<dir>/...`` is maand's documentation (docs/reference/cli/...) and not read; a path right
   after another collection's name (``kubernetes.core's plugins/...``) is that collection's.
2. ``pkg/module.py`` and ``pkg/module.name``, with pkg a package of plugins/plugin_utils, name a module of that
   package, and ``name`` a top-level name of it (a function, class, assignment or import). ``pkg/module.go``,
   ``.json``... are files of maand's or a bucket's (``deploy/batch_hooks.go``), not read.
3. The flat module names of before the stage packages (``_deploy_plan``, ``_kv_store``, ``_hook_deploy``...,
   FLAT below) are not used: ``_name.py`` never, ``_name`` or ``_name.attr`` only in a file that binds
   ``_name`` itself (an import alias ``from ..kv import store as _kv_store`` the code still has).
4. ``_module.attr``, with module a module of plugin_utils that the file does not bind, names an ``attr`` that
   module defines.
5. A relative Markdown link of README.md, docs/*.md and bench/results/*.md points at a file that exists and, with
   ``#anchor``, at a heading of it (GitHub's anchors: lower case, punctuation but ``-`` and ``_`` dropped, spaces
   to ``-``, ``-1``, ``-2``... for repeats).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "plugins" / "plugin_utils"
PACKAGES = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
# The flat modules of plugins/plugin_utils before the stage packages (git history), and the import aliases that
# carried their names; a comment naming one is older than the move.
FLAT = frozenset(
    "_action_support _bits _build _cat _catalog _catalog_schema _certs _certs_build _constraints _deploy_adopt "
    "_deploy_files _deploy_gate _deploy_lock _deploy_pin _deploy_plan _deploy_progress _deploy_remote _deploy_rsync "
    "_deploy_run _deploy_stage _deploy_view _explain _extra_vars _facts _fingerprint _fleet _gc _gotemplate _hardware "
    "_health_check _hook_deploy _hook_run _hooks _hostlist _idset _job_checks _job_scaffold _jobspec _jobspec_build "
    "_jobspec_deploy _jobspec_layers _kv _kv_build _kv_store _maand_db _maand_helper _model _naming _placement "
    "_problems _prometheus _readers _run_command _run_state _runtime_api _schemas _secrets _select _status _units "
    "_validate _worker_agent".split())
# Files of a bucket, of maand or of the worker that look like pkg/module.ext.
OTHER_EXTENSIONS = frozenset("go md json yml yaml txt sh j2 tpl conf toml html js lock pid crt key log ini cfg "
                             "mod sum db sql".split()) | {"crt_path", "key_path"}  # maand's KV keys certs/<name>.crt_path

PATH = re.compile(r"(?<![\w/.-])((?:plugins|tests)/[\w./-]*?\w\.py|docs/[\w.-]+\.md)(?![\w/])")
FOREIGN = re.compile(r"\b[a-z]\w*\.[a-z]\w*(?:'s)?\s*`?\Z")  # "kubernetes.core's " right before a path
PKG_MODULE = re.compile(r"(?<![\w/.-])(%s)/(\w+)\.(\w+)" % "|".join(PACKAGES))
# _name, _name.attr, _name.py; not a folder (``_prometheus/``, ``jobs/<job>/_modules``) nor an attribute (``x._y``)
UNDERSCORED = re.compile(r"(?<![\w./])(_[a-z][a-z0-9_]*[a-z0-9])(?:\.(\w+))?(?![\w/])")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _rel(path):
    return str(path.relative_to(REPO))


def comments_and_docstrings(path):
    """[(line, text)] of a Python file's comments and docstrings."""
    source = path.read_text(encoding="utf-8")
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                found.append((doc.lineno, doc.value.value))
    return found


@lru_cache(maxsize=None)
def top_level_names(path):
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


@lru_cache(maxsize=None)
def bound_names(path):
    """Every name a Python file binds or uses (imports, defs, arguments, names, attributes)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return frozenset(names)


def core_modules():
    """{module name: [files]} of plugin_utils: every module, and every package as its __init__.py."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((CORE / package).glob("*.py")):
            modules.setdefault(package if path.name == "__init__.py" else path.stem, []).append(path)
    return modules


def path_problems(text):
    problems = []
    for match in PATH.finditer(text):
        if FOREIGN.search(text[max(0, match.start() - 40):match.start()]):
            continue
        if not (REPO / match.group(1)).exists():
            problems.append("%s: no such file" % match.group(1))
    for match in PKG_MODULE.finditer(text):
        package, module, name = match.groups()
        if name in OTHER_EXTENSIONS:
            continue
        path = CORE / package / ("%s.py" % module)
        if not path.is_file():
            problems.append("%s: no module %s/%s.py" % (match.group(0), package, module))
        elif name != "py" and name not in top_level_names(path):
            problems.append("%s: %s/%s.py defines no %s" % (match.group(0), package, module, name))
    return problems


def alias_problems(text, bound, modules):
    problems = []
    for match in UNDERSCORED.finditer(text):
        name, attr = match.groups()
        if attr == "py":
            if name in FLAT:
                problems.append("%s: a flat module of before the stage packages" % match.group(0))
        elif name in bound:
            continue
        elif name in FLAT:
            problems.append("%s: the flat name %s (the file binds no %s)" % (match.group(0), name, name))
        elif attr and name[1:] in modules:
            files = modules[name[1:]]
            if not any(attr in top_level_names(f) or (f.name == "__init__.py" and (f.parent / (attr + ".py")).is_file())
                       for f in files):
                problems.append("%s: no module %s defines %s" % (match.group(0), name[1:], attr))
    return problems


def test_comments_and_docstrings_name_what_exists():
    modules = core_modules()
    problems = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        bound = bound_names(path)
        for line, text in comments_and_docstrings(path):
            for problem in path_problems(text) + alias_problems(text, bound, modules):
                problems.append("%s:%d: %s" % (_rel(path), line, problem))
    assert not problems, "stale mentions:\n" + "\n".join(problems)


def markdown_files():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "bench" / "results").glob("*.md"))


def test_docs_name_what_exists():
    problems = []
    for path in markdown_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for problem in path_problems(line):
                problems.append("%s:%d: %s" % (_rel(path), number, problem))
    assert not problems, "stale mentions:\n" + "\n".join(problems)


def anchors(path):
    """GitHub's anchors of a Markdown file's headings (outside code fences)."""
    found, seen, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if not count else "%s-%d" % (slug, count))
    return found


def test_markdown_links_resolve():
    problems = []
    for path in markdown_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in LINK.finditer(line):
                target = match.group(1)
                if re.match(r"[a-z]+:", target):
                    continue
                file_part, _sep, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                if not dest.exists():
                    problems.append("%s:%d: %s: no such file" % (_rel(path), number, target))
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problems.append("%s:%d: %s: no heading #%s in %s" % (_rel(path), number, target, anchor,
                                                                         _rel(dest)))
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_rules_catch_what_they_say(tmp_path):
    modules = core_modules()
    assert path_problems("see plugins/plugin_utils/deploy/nowhere.py") == [
        "plugins/plugin_utils/deploy/nowhere.py: no such file"]
    assert path_problems("as kubernetes.core's plugins/module_utils/k8s/waiter.py does") == []
    assert path_problems("maand's docs/reference/cli/health-check.md") == []
    assert path_problems("deploy/plan.py and deploy/plan.compute_plan; maand deploy/batch_hooks.go") == []
    assert path_problems("deploy/plan.no_such_name") == ["deploy/plan.no_such_name: deploy/plan.py defines no "
                                                         "no_such_name"]
    assert alias_problems("(_hook_deploy) and _explain.py", frozenset(), modules) == [
        "_hook_deploy: the flat name _hook_deploy (the file binds no _hook_deploy)",
        "_explain.py: a flat module of before the stage packages"]
    assert alias_problems("_kv_store.KVStore", frozenset({"_kv_store"}), modules) == []
    assert alias_problems("_stage.NoSuchOverlay, _stage.Overlay", frozenset(), modules) == [
        "_stage.NoSuchOverlay: no module stage defines NoSuchOverlay"]

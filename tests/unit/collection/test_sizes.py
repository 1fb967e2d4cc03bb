"""Files and classes a maintainer can read whole (issue 29): no Python file under plugins/ over MAX_FILE_LINES
lines, no class over MAX_CLASS_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MAX_FILE_LINES = 900
MAX_CLASS_LINES = 300


def oversized(paths, root=REPO):
    """(long files, big classes) among paths, each as 'path: N lines' / 'path:line class X: N lines'."""
    long, big = [], []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_FILE_LINES:
            long.append("%s: %d lines" % (path.relative_to(root), len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            size = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and size > MAX_CLASS_LINES:
                big.append("%s:%d class %s: %d lines" % (path.relative_to(root), node.lineno, node.name, size))
    return long, big


def test_no_file_or_class_is_over_the_limits():
    long, big = oversized(sorted((REPO / "plugins").rglob("*.py")))
    assert not long, "split these by concern (at most %d lines):\n%s" % (MAX_FILE_LINES, "\n".join(long))
    assert not big, "split these classes (at most %d lines):\n%s" % (MAX_CLASS_LINES, "\n".join(big))


def test_the_check_finds_a_long_file_and_a_big_class(tmp_path):
    (tmp_path / "big.py").write_text("class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES)
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "fine.py").write_text("class Small:\n    x = 1\n")
    long, big = oversized(sorted(tmp_path.glob("*.py")), tmp_path)
    assert long == ["long.py: %d lines" % (MAX_FILE_LINES + 1)]
    assert big == ["big.py:1 class Big: %d lines" % (MAX_CLASS_LINES + 1)]

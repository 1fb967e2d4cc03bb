"""Every Go test of maand (tests/data/maand/go_tests.txt: each `func Test*` of maand-sh/maand's *_test.go files
at the commit it names) is either cited by a maand.core test (its name in a tests/**/test_*.py file: the parity
rows of test_parity_*.py and the tests that take maand's tables) or listed in
tests/data/maand/go_tests_not_ported.txt with its reason. A name in neither fails here; so does a listed name
that a test now cites (drop the line), a line naming no Go test, and a whole-file line (`<path> *`) for one
of the build files docs/parity.md ("Differences from maand") says are parity rows, where each test needs its own line.
"""

from __future__ import annotations

import os
import re

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "maand")
TESTS = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
KINDS = ("n/a:", "absent:", "not ported:", "differs on purpose:")
# The build files docs/parity.md names: every Go test in them is a row or has a line of its own.
BUILD_SCOPE = re.compile(r"(tests/build_[a-z_]+|tests/init|tests/port_range|tests/healthcheck_manifest|build/[a-z_]+"
                         r"|workspace/[a-z_]+|promconfig/alerts|promconfig/scrape)_test\.go\Z")


def _lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle if line.strip() and not line.startswith("#")]


def go_tests():
    rows = [tuple(line.split()) for line in _lines("go_tests.txt")]
    for row in rows:
        assert len(row) == 2 and row[0].endswith("_test.go") and re.match(r"Test\w*\Z", row[1]), row
    return rows


def not_ported():
    entries = {}
    for line in _lines("go_tests_not_ported.txt"):
        head, sep, reason = line.partition(": ")
        path, _sep, name = head.partition(" ")
        assert sep and name and reason.startswith(KINDS), "go_tests_not_ported.txt: %r wants '<path> <Test|*>: " \
            "<%s> <reason>'" % (line, " | ".join(KINDS))
        assert (path, name) not in entries, "listed twice: %s %s" % (path, name)
        entries[(path, name)] = reason
    return entries


def _test_sources():
    sources = {}
    for folder, _dirs, files in os.walk(TESTS):
        for name in files:
            if name.startswith("test_") and name.endswith(".py") and name != os.path.basename(__file__):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    sources[os.path.relpath(path, TESTS)] = handle.read()
    return sources


def cited(rows, sources):
    """(path, name) -> the test files citing it. A name that several maand files define counts only where its
    file is named too."""
    counts = {}
    for _path, name in rows:
        counts[name] = counts.get(name, 0) + 1
    words = {f: set(re.findall(r"\bTest\w+", text)) for f, text in sources.items()}
    found = {}
    for path, name in rows:
        found[(path, name)] = [f for f, text in sources.items()
                               if name in words[f] and (counts[name] == 1 or os.path.basename(path) in text)]
    return found


def test_every_maand_go_test_is_a_row_or_has_a_reason():
    rows, entries = go_tests(), not_ported()
    found = cited(rows, _test_sources())
    missing = [("%s %s" % row) for row in rows
               if not found[row] and row not in entries and (row[0], "*") not in entries]
    assert not missing, "maand Go tests neither cited by a test nor listed with a reason in " \
        "tests/data/maand/go_tests_not_ported.txt:\n" + "\n".join(missing)


def test_not_ported_lines_are_current():
    rows, entries = go_tests(), not_ported()
    found = cited(rows, _test_sources())
    known, files = set(rows), {path for path, _name in rows}
    problems = []
    for (path, name), reason in sorted(entries.items()):
        if name == "*":
            if path not in files:
                problems.append("%s *: no such maand test file" % path)
            elif BUILD_SCOPE.match(path):
                problems.append("%s *: a build file docs/parity.md names; list each test with its own reason" % path)
        elif (path, name) not in known:
            problems.append("%s %s: no such maand test" % (path, name))
        elif found[(path, name)]:
            problems.append("%s %s: cited by %s; drop its line" % (path, name, ", ".join(found[(path, name)])))
    assert not problems, "\n".join(problems)


def test_the_list_is_maands():
    rows = go_tests()
    assert len(rows) == len(set(rows)) and len(rows) > 700  # maand 3f8043e has 790
    with open(os.path.join(DATA, "go_tests.txt"), encoding="utf-8") as handle:
        assert "maand-sh/maand 3f8043e0fc00855ce4705ed290e3754567b6160b" in handle.readline()
    assert len([row for row in rows if BUILD_SCOPE.match(row[0])]) > 300  # the build files docs/parity.md names

"""Name patterns end at the end of the string (issue 21): ``$`` also matches before a trailing newline, so
``re.match(r"^name$", "api\n")`` accepts a job, host, key or target name with a newline in it."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.maand.core.plugins.plugin_utils.bucket import job_checks, model
from ansible_collections.maand.core.plugins.plugin_utils.catalog import maand_db
from ansible_collections.maand.core.plugins.plugin_utils.hooks import runtime_api

REPO = Path(__file__).resolve().parents[3]
# a pattern anchored with ^ and ending in $ (YAML's float resolvers in prometheus/goyaml.py mirror PyYAML's on purpose)
DOLLAR_END = re.compile(r"""re\.(?:compile|match)\(r?["']\^[^"']*\$["']""")


def test_no_name_pattern_ends_in_dollar():
    found = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        if path.name == "goyaml.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DOLLAR_END.search(line):
                found.append("%s:%d" % (path.relative_to(REPO), number))
    assert found == [], "use \\Z or fullmatch: %s" % found


def test_a_trailing_newline_is_no_name():
    for pattern, good in ((model.JOB_NAME, "api"), (model.HOST_NAME, "10.0.0.1"), (model.SELECTOR_NAME, "web"),
                          (model.PORT_NAME, "http_port"), (job_checks.SAFE_TARGET, "start"),
                          (job_checks.CERT_NAME, "tls"), (maand_db.UUID, "0" * 8 + "-0000-0000-0000-" + "0" * 12)):
        assert pattern.match(good) and not pattern.match(good + "\n"), pattern.pattern
    assert runtime_api.KEY_PATTERN.fullmatch("k") and not runtime_api.KEY_PATTERN.fullmatch("k\n")

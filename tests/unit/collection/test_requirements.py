"""requirements.txt names every third-party package the collection's Python imports (execution environments
install from it: meta/execution-environment.yml), besides ansible-core's own dependencies."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_CORE_BRINGS = {"ansible", "ansible_collections", "jinja2", "yaml"}
PACKAGE_OF = {"markdown_it": "markdown_it_py", "google": "protobuf"}  # import name -> distribution name (normalised) where they differ
# Optional: imported late, only by the feature that needs it, which names the pip command when it is missing;
# requirements.txt names each in a comment (an EE that uses the feature adds it).
OPTIONAL = {"psycopg",  # the PostgreSQL state store (bucket/state_pg.py)
            "google", "cramjam"}  # protobuf and snappy: the certificate expiry metrics' remote write (prometheus/remote_write.py)
STAGED = {"maand_errors"}  # errors/__init__.py as staged beside the hooks' maand.py (hooks/commands.stage): no package


def imported_top_level(root):
    names = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_requirements_txt_lists_every_third_party_import():
    required = {re.split(r"[<>=!~ ;\[]", line.strip())[0].lower().replace("-", "_")
                for line in (REPO / "requirements.txt").read_text().splitlines() if line.strip() and not line.startswith("#")}
    third_party = (imported_top_level(REPO / "plugins") - set(sys.stdlib_module_names) - ANSIBLE_CORE_BRINGS
                   - {"__future__"} - OPTIONAL - STAGED)
    third_party = {PACKAGE_OF.get(name, name) for name in third_party}
    assert "cryptography" in third_party  # _certs, _secrets
    assert third_party <= required, "import(s) missing from requirements.txt: %s" % sorted(third_party - required)


def test_optional_imports_are_named_in_requirements_txt_and_installed_for_the_tests():
    text = (REPO / "requirements.txt").read_text()
    dev = (REPO / "requirements-dev.txt").read_text()
    for name in (PACKAGE_OF.get(name, name) for name in OPTIONAL):
        assert "# optional: %s" % name in text.lower(), name
        assert re.search(r"^%s\b" % name, dev, re.M), name  # CI tests the feature

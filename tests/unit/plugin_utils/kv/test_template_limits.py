"""Template engines have limits (issue 21, security review L10): Jinja2's * and ** and its output, bounded with
the Go engine's MAX_OUTPUT and MAX_SECONDS (deploy/stage._bounded); each gives a named SecurityError, never a
traceback or a 100 MB file. (The Go engine's own limits: tests/unit/plugin_utils/gotemplate/test_gotemplate_limits.py.)"""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage


@pytest.mark.parametrize("text, why", [
    ("{{ 'a' * 100000000 }}", "repetition"),
    ("{{ [1] * 100000000 }}", "repetition"),
    ("{{ 2 ** 100000000 }}", "exponent"),
])
def test_jinja_repetition_and_powers_are_bounded(text, why):
    import jinja2
    env = _stage._jinja_env((("a.j2", text),))
    with pytest.raises(jinja2.exceptions.SecurityError, match=why):
        _stage._bounded(env.get_template("a.j2").generate({}))
    assert _stage._bounded(_stage._jinja_env((("b.j2", "{{ 'ab' * 3 }}"),)).get_template("b.j2").generate({})) == "ababab"


def test_jinja_output_is_bounded(monkeypatch):
    import jinja2
    monkeypatch.setattr(_gotemplate, "MAX_OUTPUT", 100)
    env = _stage._jinja_env((("a.j2", "{% for i in range(50) %}0123456789{% endfor %}"),))
    with pytest.raises(jinja2.exceptions.SecurityError, match="output exceeds"):
        _stage._bounded(env.get_template("a.j2").generate({}))

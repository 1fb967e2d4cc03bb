"""Template engines have limits (issue 21, security review L10): nesting, output size, time, printf widths
and Jinja2's * and **; each gives a named TemplateError / SecurityError, never a traceback or a 100 MB file."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.kv import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.deploy import stage as _stage


def test_deep_nesting_is_a_parse_error_not_a_traceback():
    with pytest.raises(_gotemplate.TemplateError, match="nested too deeply to parse"):
        _gotemplate.parse("{{" + "(" * 3000 + "1" + ")" * 3000 + "}}", "deep.tpl")


def test_printf_widths_beyond_a_million_are_refused_as_go_does():
    out = _gotemplate.render('{{printf "%0100000000d" 1}}')  # Go: a bad format ("%!..."), not 100 MB of zeros
    assert out.startswith("%!") and len(out) < 100
    assert _gotemplate.render('{{printf "%*d" 100000000 1}}').endswith("1") and len(_gotemplate.render('{{printf "%*d" 100000000 1}}')) < 100
    assert _gotemplate.render('{{printf "%05d" 1}}') == "00001"


def test_output_and_time_are_bounded(monkeypatch):
    monkeypatch.setattr(_gotemplate, "MAX_OUTPUT", 1000)
    with pytest.raises(_gotemplate.TemplateError, match="output exceeds"):
        _gotemplate.render("{{range .}}0123456789{{end}}", list(range(200)))
    assert len(_gotemplate.render("{{range .}}0123456789{{end}}", list(range(50)))) == 500
    monkeypatch.setattr(_gotemplate, "MAX_SECONDS", 0.0)
    with pytest.raises(_gotemplate.TemplateError, match="rendering took over"):
        _gotemplate.render("{{range .}}{{end}}", list(range(5000)))


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

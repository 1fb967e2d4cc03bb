"""The Go template engine has limits (issue 21, security review L10): nesting, output size, time and printf
widths; each gives a named TemplateError, never a traceback or a 100 MB file. (Jinja2's limits:
tests/unit/plugin_utils/kv/test_template_limits.py.)"""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.gotemplate import exec as _exec


def test_deep_nesting_is_a_parse_error_not_a_traceback():
    with pytest.raises(_gotemplate.TemplateError, match="nested too deeply to parse"):
        _gotemplate.parse("{{" + "(" * 3000 + "1" + ")" * 3000 + "}}", "deep.tpl")


def test_printf_widths_beyond_a_million_are_refused_as_go_does():
    out = _gotemplate.render('{{printf "%0100000000d" 1}}')  # Go: a bad format ("%!..."), not 100 MB of zeros
    assert out.startswith("%!") and len(out) < 100
    assert _gotemplate.render('{{printf "%*d" 100000000 1}}').endswith("1") and len(_gotemplate.render('{{printf "%*d" 100000000 1}}')) < 100
    assert _gotemplate.render('{{printf "%05d" 1}}') == "00001"


def test_output_and_time_are_bounded(monkeypatch):
    monkeypatch.setattr(_exec, "MAX_OUTPUT", 1000)
    with pytest.raises(_gotemplate.TemplateError, match="output exceeds"):
        _gotemplate.render("{{range .}}0123456789{{end}}", list(range(200)))
    assert len(_gotemplate.render("{{range .}}0123456789{{end}}", list(range(50)))) == 500
    monkeypatch.setattr(_exec, "MAX_SECONDS", 0.0)
    with pytest.raises(_gotemplate.TemplateError, match="rendering took over"):
        _gotemplate.render("{{range .}}{{end}}", list(range(5000)))

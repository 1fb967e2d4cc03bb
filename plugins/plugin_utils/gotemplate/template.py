# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Template, parse and render: the engine's entry points (Go: text/template/template.go, exec.go Execute).

``parse(text, name, funcs)`` lexes (lex.py) and parses (parse.py) with the built-ins (funcs.py) and
the given functions; the :class:`Template` it returns executes (exec.py).
"""

from __future__ import annotations

from typing import Any, Callable

from .exec import _Output, _State
from .fmt import go_quote
from .funcs import BUILTINS
from .lex import _Lexer
from .parse import TemplateError, Tree, _Parser


class Template(Tree):
    """A parsed template and the set of templates it defines (Go's *Template + common)."""

    def execute(self, data: Any = None, name: str | None = None,
                funcs: dict[str, Callable] | None = None) -> str:
        """Render this template (or the named one of its set) over data.

        funcs replaces functions of the same names for this run (a parsed template is reused
        with per-run functions; names unknown at parse time cannot be called).
        """
        tmpl = self if name is None else self.trees.get(name)
        if tmpl is None:
            raise TemplateError("template: no template %s associated with template %s"
                                % (go_quote(name or ""), go_quote(self.name)), self.name)
        if not tmpl.root.nodes and tmpl.name not in tmpl.trees:
            msg = "template: %s: %s is an incomplete or empty template" % (
                tmpl.name, go_quote(tmpl.name))
            raise TemplateError(msg, tmpl.name, cause=msg)
        out = _Output()
        run_funcs = tmpl.funcs if not funcs else dict(tmpl.funcs, **funcs)
        _State(tmpl, out, 0, run_funcs).run(data)
        return "".join(out)


def parse(text: str, name: str = "template", funcs: dict[str, Callable] | None = None,
          left: str = "{{", right: str = "}}") -> Template:
    """Parse text (Go's New(name).Funcs(funcs).Parse(text)); raise TemplateError."""
    all_funcs = dict(BUILTINS)
    all_funcs.update(funcs or {})
    try:
        tokens = _Lexer(text, left, right).run()
        return _Parser(name, text, tokens, all_funcs, Template).parse()
    except RecursionError:
        msg = "template: %s: nested too deeply to parse (parentheses, pipelines or blocks)" % name
        raise TemplateError(msg, name, cause="nested too deeply to parse") from None


def render(text: str, data: Any = None, name: str = "template",
           funcs: dict[str, Callable] | None = None) -> str:
    """Parse and execute in one call."""
    return parse(text, name, funcs).execute(data)

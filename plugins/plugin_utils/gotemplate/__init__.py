# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go templates: Go's text/template language in pure Python (rank 0.5: imports only errors). PRIVATE to the collection.

maand renders job ``.tpl`` files with Go's ``text/template``; no maintained Python package implements that
language, so this package does, split as Go's own is: lex.py (the lexer, parse/lex.go), parse.py (the parser and
the parse tree, parse/parse.go and node.go; TemplateError), exec.py (the executor, exec.go; the output limits),
funcs.py (the built-in functions, truth and comparison, funcs.go), fmt.py (Go's fmt printing: %v, Sprintf, %q,
strconv.Quote) and template.py (Template, parse, render: template.go).

Go values map to Python values: int, float, complex, str, bool, None (nil), list/tuple (slice), dict (map),
dataclass or other object (struct: exported fields and methods), callable (func). ``parse(text, name, funcs)``
returns a :class:`Template`; ``Template.execute(data)`` returns the rendered string. Errors raise
:class:`TemplateError` (a MaandError) with Go's message text
(``template: NAME:LINE:COL: executing "NAME" at <...>: cause``) and the line, column and cause as attributes.
Tested against Go's own test tables (tests/unit/plugin_utils/gotemplate/test_gotemplate_go.py).

The door is this module: the names in ``__all__``. ``parse`` here is the function; the parser module is
``gotemplate.parse`` only to ``from .parse import ...`` (or importlib). ``MAX_OUTPUT`` and ``MAX_SECONDS`` here
are the values other packages read (deploy/stage bounds Jinja2 with them); the engine reads exec.py's own.
"""

from __future__ import annotations

from .exec import MAX_OUTPUT, MAX_SECONDS
from .fmt import format_value, go_quote, go_sprintln, go_type
from .funcs import BUILTINS
from .parse import TemplateError
from .template import Template, parse, render

__all__ = ["BUILTINS", "MAX_OUTPUT", "MAX_SECONDS", "Template", "TemplateError", "format_value", "go_quote",
           "go_sprintln", "go_type", "parse", "render"]

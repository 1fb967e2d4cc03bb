# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small Go text/template engine in pure Python (no Ansible imports).

maand renders job ``.tpl`` files with Go's ``text/template``; no maintained Python package
implements that language, so this module does: a lexer and a parser that follow Go's
text/template/parse (lex.go, parse.go, node.go) and an executor that follows text/template's
exec.go and funcs.go, with Go's fmt printing rules for the values a template can hold.

Go values map to Python values: int, float, complex, str, bool, None (nil), list/tuple (slice),
dict (map), dataclass or other object (struct: exported fields and methods), callable (func).
``parse(text, name, funcs)`` returns a :class:`Template`; ``Template.execute(data)`` returns the
rendered string.  Errors raise :class:`TemplateError` with Go's message text
(``template: NAME:LINE:COL: executing "NAME" at <...>: cause``) and the line, column and cause as
attributes.  Tested against Go's own test tables (tests/unit/test_gotemplate*.py).
"""

from __future__ import annotations

import dataclasses
import decimal
import inspect
import math
import time
import urllib.parse
from typing import Any, Callable

__all__ = ["TemplateError", "Template", "parse", "render", "go_sprintf", "go_sprint", "go_quote"]

MAX_EXEC_DEPTH = 64  # Go allows 100000 nested {{template}} calls; Python's stack is smaller.
MAX_OUTPUT = 16 << 20  # characters one execution may write (a config file, not a disk filler)
MAX_SECONDS = 30.0  # wall-clock seconds one execution may take (e.g. a range over millions)


class TemplateError(Exception):
    """A parse or execution error: ``str()`` is Go's message; name/line/column/cause are fields."""

    def __init__(self, message: str, name: str = "", line: int = 0, column: int | None = None,
                 cause: str = "", context: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.line = line
        self.column = column
        self.cause = cause or message
        self.context = context


class _Missing:
    """Go's missingVal: "no final argument" in a pipeline."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


class _Invalid:
    """Go's zero reflect.Value inside a field chain: a map key that is absent (not nil)."""

    def __repr__(self) -> str:
        return "<invalid>"


INVALID = _Invalid()


# --------------------------------------------------------------------------------------------
# Lexer (Go: text/template/parse/lex.go)
# --------------------------------------------------------------------------------------------

T_ERROR, T_EOF, T_TEXT, T_LEFT, T_RIGHT, T_SPACE = "error", "EOF", "text", "{{", "}}", "space"
T_IDENT, T_FIELD, T_VAR, T_DOT, T_STRING, T_RAW, T_CHARCONST = (
    "identifier", "field", "variable", ".", "string", "raw string", "char constant")
T_NUMBER, T_COMPLEX, T_BOOL, T_NIL, T_PIPE, T_LPAREN, T_RPAREN = (
    "number", "complex", "bool", "nil", "|", "(", ")")
T_DECLARE, T_ASSIGN, T_CHAR, T_KEYWORD = ":=", "=", "char", "keyword"

KEYWORDS = frozenset(["block", "break", "continue", "define", "else", "end", "if", "range",
                      "template", "with"])
SPACES = " \t\r\n"


class Token:
    __slots__ = ("typ", "val", "pos", "line")

    def __init__(self, typ: str, val: str, pos: int, line: int) -> None:
        self.typ, self.val, self.pos, self.line = typ, val, pos, line

    def __str__(self) -> str:
        if self.typ == T_EOF:
            return "EOF"
        if self.typ == T_ERROR:
            return self.val
        if self.typ == T_KEYWORD:
            return "<%s>" % self.val
        if len(self.val) > 10:
            return "%.10s..." % go_quote(self.val)
        return go_quote(self.val)

    def __repr__(self) -> str:
        return "Token(%s, %r)" % (self.typ, self.val)


def _is_alnum(ch: str) -> bool:
    return ch == "_" or ch.isalnum()


class _Lexer:
    """Turns template text into a list of tokens; an error ends the list with an error token."""

    def __init__(self, text: str, left: str = "{{", right: str = "}}") -> None:
        self.text, self.left, self.right = text, left, right
        self.pos = 0
        self.tokens: list[Token] = []
        self.paren_depth = 0

    def line_at(self, pos: int) -> int:
        return 1 + self.text.count("\n", 0, pos)

    def emit(self, typ: str, start: int, end: int | None = None, val: str | None = None) -> None:
        end = self.pos if end is None else end
        self.tokens.append(Token(typ, self.text[start:end] if val is None else val, start,
                                 self.line_at(start)))

    def error(self, msg: str, at: int | None = None) -> None:
        at = self.pos if at is None else at
        self.tokens.append(Token(T_ERROR, msg, at, self.line_at(at)))
        raise _LexStop()

    def run(self) -> list[Token]:
        try:
            while self.lex_text():
                self.lex_action()
            self.emit(T_EOF, len(self.text), len(self.text), "")
        except _LexStop:
            pass
        return self.tokens

    # Text outside actions, with {{- trimming of the preceding spaces.
    def lex_text_once(self) -> bool | None:
        text, start = self.text, self.pos
        i = text.find(self.left, start)
        if i < 0:
            if start < len(text):
                self.emit(T_TEXT, start, len(text))
            self.pos = len(text)
            return False
        after = i + len(self.left)
        trim = text.startswith("-", after) and after + 1 < len(text) and text[after + 1] in SPACES
        end = i
        if trim:
            while end > start and text[end - 1] in SPACES:
                end -= 1
        if end > start:
            self.emit(T_TEXT, start, end)
        self.pos = after + (2 if trim else 0)
        if self.text.startswith("/*", self.pos):
            self.lex_comment(i)
            return None
        self.emit(T_LEFT, i, after)
        self.paren_depth = 0
        return True

    def lex_text(self) -> bool:
        """Lex text and comments up to the next action; False at the end of the input."""
        while True:
            found = self.lex_text_once()
            if found is not None:
                return found

    def at_right(self) -> tuple[bool, bool]:
        """(at the right delimiter, with a trim marker)."""
        text, pos = self.text, self.pos
        if (pos + 1 < len(text) and text[pos] in SPACES and text[pos + 1] == "-"
                and text.startswith(self.right, pos + 2)):
            return True, True
        return text.startswith(self.right, pos), False

    def close_action(self, trim: bool) -> None:
        self.pos += (2 if trim else 0) + len(self.right)
        if trim:
            while self.pos < len(self.text) and self.text[self.pos] in SPACES:
                self.pos += 1

    def lex_comment(self, left_at: int) -> None:
        end = self.text.find("*/", self.pos + 2)
        if end < 0:
            self.error("unclosed comment", left_at)
        self.pos = end + 2
        delim, trim = self.at_right()
        if not delim:
            self.error("comment ends before closing delimiter", left_at)
        self.close_action(trim)

    def lex_action(self) -> None:
        while True:
            delim, trim = self.at_right()
            if delim:
                if self.paren_depth:
                    self.error("unclosed left paren")
                start = self.pos + (1 if trim else 0)
                self.emit(T_RIGHT, start, start + (1 if trim else 0) + len(self.right))
                self.close_action(trim)
                return
            if self.pos >= len(self.text):
                self.error("unclosed action")
            self.lex_inside()

    def lex_inside(self) -> None:  # noqa: C901 - one branch per token kind, as Go's lexInsideAction
        text, start = self.text, self.pos
        ch = text[start]
        nxt = text[start + 1] if start + 1 < len(text) else ""
        if ch in SPACES:
            while self.pos < len(text) and text[self.pos] in SPACES and not self.at_right()[1]:
                self.pos += 1
            self.emit(T_SPACE, start)
        elif ch == "=":
            self.pos += 1
            self.emit(T_ASSIGN, start)
        elif ch == ":":
            if nxt != "=":
                self.error("expected :=")
            self.pos += 2
            self.emit(T_DECLARE, start)
        elif ch == "|":
            self.pos += 1
            self.emit(T_PIPE, start)
        elif ch == '"':
            self.lex_quote(start)
        elif ch == "`":
            end = text.find("`", start + 1)
            if end < 0:
                self.error("unterminated raw quoted string", start)
            self.pos = end + 1
            self.emit(T_RAW, start)
        elif ch == "$":
            self.lex_field_or_var(T_VAR)
        elif ch == "'":
            self.lex_char(start)
        elif ch == "." and not ("0" <= nxt <= "9"):
            self.lex_field_or_var(T_FIELD)
        elif ch in "+-." or "0" <= ch <= "9":
            self.lex_number(start)
        elif _is_alnum(ch):
            self.lex_identifier(start)
        elif ch == "(":
            self.pos += 1
            self.paren_depth += 1
            self.emit(T_LPAREN, start)
        elif ch == ")":
            self.pos += 1
            self.paren_depth -= 1
            if self.paren_depth < 0:
                self.error("unexpected right paren")
            self.emit(T_RPAREN, start)
        elif ch.isprintable() and ord(ch) < 0x80:
            self.pos += 1
            self.emit(T_CHAR, start)
        else:
            self.error("unrecognized character in action: %s" % _go_rune_repr(ch))

    def at_terminator(self) -> bool:
        if self.pos >= len(self.text):
            return True
        ch = self.text[self.pos]
        if ch in SPACES or ch in ".,|:()":
            return True
        return self.text.startswith(self.right, self.pos)

    def lex_quote(self, start: int) -> None:
        pos, text = start + 1, self.text
        while True:
            if pos >= len(text) or text[pos] == "\n":
                self.error("unterminated quoted string", start)
            if text[pos] == "\\":
                pos += 2
                continue
            if text[pos] == '"':
                break
            pos += 1
        self.pos = pos + 1
        self.emit(T_STRING, start)

    def lex_char(self, start: int) -> None:
        pos, text = start + 1, self.text
        while True:
            if pos >= len(text) or text[pos] == "\n":
                self.error("unterminated character constant", start)
            if text[pos] == "\\":
                pos += 2
                continue
            if text[pos] == "'":
                break
            pos += 1
        self.pos = pos + 1
        self.emit(T_CHARCONST, start)

    def lex_field_or_var(self, typ: str) -> None:
        start = self.pos
        self.pos += 1
        if self.at_terminator():
            self.emit(T_VAR if typ == T_VAR else T_DOT, start)
            return
        while self.pos < len(self.text) and _is_alnum(self.text[self.pos]):
            self.pos += 1
        if not self.at_terminator():
            self.error("bad character %s" % _go_rune_repr(self.text[self.pos]))
        self.emit(typ, start)

    def lex_identifier(self, start: int) -> None:
        while self.pos < len(self.text) and _is_alnum(self.text[self.pos]):
            self.pos += 1
        if not self.at_terminator():
            self.error("bad character %s" % _go_rune_repr(self.text[self.pos]))
        word = self.text[start:self.pos]
        if word in KEYWORDS:
            self.emit(T_KEYWORD, start)
        elif word in ("true", "false"):
            self.emit(T_BOOL, start)
        elif word == "nil":
            self.emit(T_NIL, start)
        else:
            self.emit(T_IDENT, start)

    def scan_number(self) -> bool:
        text = self.text

        def accept(chars: str) -> bool:
            if self.pos < len(text) and text[self.pos] in chars:
                self.pos += 1
                return True
            return False

        def accept_run(chars: str) -> None:
            while self.pos < len(text) and text[self.pos] in chars:
                self.pos += 1

        accept("+-")
        digits = "0123456789_"
        if accept("0"):
            if accept("xX"):
                digits = "0123456789abcdefABCDEF_"
            elif accept("oO"):
                digits = "01234567_"
            elif accept("bB"):
                digits = "01_"
        accept_run(digits)
        if accept("."):
            accept_run(digits)
        if len(digits) == 11 and accept("eE"):
            accept("+-")
            accept_run("0123456789_")
        if len(digits) == 23 and accept("pP"):
            accept("+-")
            accept_run("0123456789_")
        accept("i")
        return not (self.pos < len(text) and _is_alnum(text[self.pos]))

    def lex_number(self, start: int) -> None:
        if not self.scan_number():
            self.error("bad number syntax: %s" % go_quote(self.text[start:self.pos + 1]))
        if self.pos < len(self.text) and self.text[self.pos] in "+-":
            if not self.scan_number() or self.text[self.pos - 1] != "i":
                self.error("bad number syntax: %s" % go_quote(self.text[start:self.pos + 1]))
            self.emit(T_COMPLEX, start)
        else:
            self.emit(T_NUMBER, start)


class _LexStop(Exception):
    pass


def _go_rune_repr(ch: str) -> str:
    return "U+%04X %s" % (ord(ch), "'%s'" % ch if ch.isprintable() else "")


# --------------------------------------------------------------------------------------------
# Parse tree (Go: text/template/parse/node.go); str() of a node is Go's String().
# --------------------------------------------------------------------------------------------

class Node:
    pos = 0
    line = 0
    tree: "Template | None" = None


class ListNode(Node):
    def __init__(self, pos: int) -> None:
        self.pos, self.nodes = pos, []

    def __str__(self) -> str:
        return "".join(str(n) for n in self.nodes)


class TextNode(Node):
    def __init__(self, pos: int, text: str) -> None:
        self.pos, self.text = pos, text

    def __str__(self) -> str:
        return go_quote(self.text) if _TEXT_QUOTED[0] else self.text


_TEXT_QUOTED = [False]  # Go's parse tests print text nodes with %q (node.go textFormat)


class PipeNode(Node):
    def __init__(self, pos: int, line: int) -> None:
        self.pos, self.line = pos, line
        self.decl: list[VariableNode] = []
        self.is_assign = False
        self.cmds: list[CommandNode] = []

    def __str__(self) -> str:
        out = ""
        if self.decl:
            out = ", ".join(str(v) for v in self.decl) + (" = " if self.is_assign else " := ")
        return out + " | ".join(str(c) for c in self.cmds)


class ActionNode(Node):
    def __init__(self, pos: int, line: int, pipe: PipeNode) -> None:
        self.pos, self.line, self.pipe = pos, line, pipe

    def __str__(self) -> str:
        return "{{%s}}" % self.pipe


class CommandNode(Node):
    def __init__(self, pos: int) -> None:
        self.pos, self.args = pos, []

    def __str__(self) -> str:
        return " ".join("(%s)" % a if isinstance(a, PipeNode) else str(a) for a in self.args)


class IdentifierNode(Node):
    def __init__(self, pos: int, ident: str) -> None:
        self.pos, self.ident = pos, ident

    def __str__(self) -> str:
        return self.ident


class VariableNode(Node):
    def __init__(self, pos: int, ident: str) -> None:
        self.pos, self.ident = pos, ident.split(".")

    def __str__(self) -> str:
        return ".".join(self.ident)


class DotNode(Node):
    def __init__(self, pos: int) -> None:
        self.pos = pos

    def __str__(self) -> str:
        return "."


class NilNode(Node):
    def __init__(self, pos: int) -> None:
        self.pos = pos

    def __str__(self) -> str:
        return "nil"


class FieldNode(Node):
    def __init__(self, pos: int, ident: str) -> None:
        self.pos, self.ident = pos, ident[1:].split(".")

    def __str__(self) -> str:
        return "".join("." + i for i in self.ident)


class ChainNode(Node):
    def __init__(self, pos: int, node: Node) -> None:
        self.pos, self.node, self.fields = pos, node, []

    def __str__(self) -> str:
        base = "(%s)" % self.node if isinstance(self.node, PipeNode) else str(self.node)
        return base + "".join("." + f for f in self.fields)


class BoolNode(Node):
    def __init__(self, pos: int, value: bool) -> None:
        self.pos, self.value = pos, value

    def __str__(self) -> str:
        return "true" if self.value else "false"


class NumberNode(Node):
    def __init__(self, pos: int, text: str, value: Any) -> None:
        self.pos, self.text, self.value = pos, text, value

    def __str__(self) -> str:
        return self.text


class StringNode(Node):
    def __init__(self, pos: int, quoted: str, text: str) -> None:
        self.pos, self.quoted, self.text = pos, quoted, text

    def __str__(self) -> str:
        return self.quoted


class EndNode(Node):
    def __init__(self, pos: int) -> None:
        self.pos = pos

    def __str__(self) -> str:
        return "{{end}}"


class ElseNode(Node):
    def __init__(self, pos: int, line: int) -> None:
        self.pos, self.line = pos, line

    def __str__(self) -> str:
        return "{{else}}"


class BranchNode(Node):
    keyword = ""

    def __init__(self, pos: int, line: int, pipe: PipeNode, body: ListNode,
                 else_list: ListNode | None) -> None:
        self.pos, self.line, self.pipe, self.list, self.else_list = pos, line, pipe, body, else_list

    def __str__(self) -> str:
        out = "{{%s %s}}%s" % (self.keyword, self.pipe, self.list)
        if self.else_list is not None:
            out += "{{else}}%s" % self.else_list
        return out + "{{end}}"


class IfNode(BranchNode):
    keyword = "if"


class RangeNode(BranchNode):
    keyword = "range"


class WithNode(BranchNode):
    keyword = "with"


class BreakNode(Node):
    def __init__(self, pos: int, line: int) -> None:
        self.pos, self.line = pos, line

    def __str__(self) -> str:
        return "{{break}}"


class ContinueNode(BreakNode):
    def __str__(self) -> str:
        return "{{continue}}"


class TemplateNode(Node):
    def __init__(self, pos: int, line: int, name: str, pipe: PipeNode | None) -> None:
        self.pos, self.line, self.name, self.pipe = pos, line, name, pipe

    def __str__(self) -> str:
        if self.pipe is None:
            return "{{template %s}}" % go_quote(self.name)
        return "{{template %s %s}}" % (go_quote(self.name), self.pipe)


# --------------------------------------------------------------------------------------------
# Parser (Go: text/template/parse/parse.go)
# --------------------------------------------------------------------------------------------

class Template:
    """A parsed template and the set of templates it defines (Go's *Template + common)."""

    def __init__(self, name: str, text: str, root: ListNode, trees: dict[str, "Template"],
                 funcs: dict[str, Callable], parse_name: str) -> None:
        self.name, self.text, self.root = name, text, root
        self.trees, self.funcs, self.parse_name = trees, funcs, parse_name

    def __str__(self) -> str:
        return str(self.root)

    def lookup(self, name: str) -> "Template | None":
        return self.trees.get(name)

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


class _Limit(Exception):
    """An execution went past MAX_OUTPUT or MAX_SECONDS."""


class _Output(list):
    """The output of one execution, with its limits: MAX_OUTPUT characters, MAX_SECONDS."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0
        self.deadline = time.monotonic() + MAX_SECONDS
        self.ticks = 0

    def append(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise _Limit("output exceeds %d MiB; a template renders a configuration file, not bulk data"
                         % (MAX_OUTPUT >> 20))
        super().append(text)

    def tick(self) -> None:
        self.ticks += 1
        if not self.ticks & 1023 and time.monotonic() > self.deadline:
            raise _Limit("rendering took over %d seconds; look for a range over a huge list or number"
                         % MAX_SECONDS)


def parse(text: str, name: str = "template", funcs: dict[str, Callable] | None = None,
          left: str = "{{", right: str = "}}") -> Template:
    """Parse text (Go's New(name).Funcs(funcs).Parse(text)); raise TemplateError."""
    all_funcs = dict(BUILTINS)
    all_funcs.update(funcs or {})
    try:
        tokens = _Lexer(text, left, right).run()
        return _Parser(name, text, tokens, all_funcs).parse()
    except RecursionError:
        msg = "template: %s: nested too deeply to parse (parentheses, pipelines or blocks)" % name
        raise TemplateError(msg, name, cause="nested too deeply to parse") from None


def render(text: str, data: Any = None, name: str = "template",
           funcs: dict[str, Callable] | None = None) -> str:
    """Parse and execute in one call."""
    return parse(text, name, funcs).execute(data)


class _ParseError(Exception):
    pass


class _Parser:
    def __init__(self, name: str, text: str, tokens: list[Token], funcs: dict[str, Callable]):
        self.name, self.text, self.tokens, self.funcs = name, text, tokens, funcs
        self.i = 0
        self.vars = ["$"]
        self.range_depth = 0
        self.trees: dict[str, Template] = {}
        self.tree_name = name

    # --- token stream
    def next(self) -> Token:
        tok = self.tokens[min(self.i, len(self.tokens) - 1)]
        self.i += 1
        return tok

    def backup(self, n: int = 1) -> None:
        self.i -= n

    def peek(self) -> Token:
        return self.tokens[min(self.i, len(self.tokens) - 1)]

    def next_non_space(self) -> Token:
        tok = self.next()
        while tok.typ == T_SPACE:
            tok = self.next()
        return tok

    def peek_non_space(self) -> Token:
        tok = self.next_non_space()
        self.backup()
        return tok

    def errorf(self, msg: str, tok: Token | None = None) -> None:
        tok = tok or self.tokens[min(max(self.i - 1, 0), len(self.tokens) - 1)]
        full = "template: %s:%d: %s" % (self.name, tok.line, msg)
        col = tok.pos - (self.text.rfind("\n", 0, tok.pos) + 1)
        raise TemplateError(full, self.name, tok.line, col, msg)

    def expect(self, typ: str, context: str, val: str | None = None) -> Token:
        tok = self.next_non_space()
        if tok.typ != typ or (val is not None and tok.val != val):
            self.unexpected(tok, context)
        return tok

    def unexpected(self, tok: Token, context: str) -> None:
        if tok.typ == T_ERROR:
            extra = ""
            if tok.val == "unclosed action" and "\n" in self.text[tok.pos:]:
                extra = ""
            self.errorf(tok.val + extra, tok)
        self.errorf("unexpected %s in %s" % (tok, context), tok)

    # --- top level
    def parse(self) -> Template:
        root = ListNode(self.peek().pos)
        while self.peek().typ != T_EOF:
            if self.peek().typ == T_ERROR:
                self.unexpected(self.peek(), "input")
            if self.peek().typ == T_LEFT:
                delim = self.next()
                tok = self.next_non_space()
                if tok.typ == T_KEYWORD and tok.val == "define":
                    self.parse_definition()
                    continue
                self.i = self.tokens.index(delim)
            node = self.text_or_action()
            if isinstance(node, (EndNode, ElseNode)):
                self.errorf("unexpected %s" % node)
            root.nodes.append(node)
        top = self.make_tree(self.name, root)
        self.add_tree(top)
        return top

    def make_tree(self, name: str, root: ListNode) -> Template:
        return Template(name, self.text, root, self.trees, self.funcs, self.name)

    def add_tree(self, tree: Template) -> None:
        old = self.trees.get(tree.name)
        if old is not None and old.root.nodes and tree.root.nodes:
            self.errorf("template: multiple definition of template %s" % go_quote(tree.name))
        if old is None or tree.root.nodes:
            self.trees[tree.name] = tree

    def parse_definition(self) -> None:
        name = self.parse_template_name(self.next_non_space(), "define clause")
        self.expect(T_RIGHT, "define clause")
        self.vars = ["$"]
        body, end = self.item_list()
        if not isinstance(end, EndNode):
            self.errorf("unexpected %s in %s" % (end, "define clause"))
        self.add_tree(self.make_tree(name, body))

    def parse_template_name(self, tok: Token, context: str) -> str:
        if tok.typ in (T_STRING, T_RAW):
            return self.unquote(tok)
        self.unexpected(tok, context)
        return ""

    def item_list(self) -> tuple[ListNode, Node]:
        body = ListNode(self.peek_non_space().pos)
        while self.peek_non_space().typ != T_EOF:
            node = self.text_or_action()
            if isinstance(node, (EndNode, ElseNode)):
                return body, node
            body.nodes.append(node)
        self.errorf("unexpected EOF")
        raise AssertionError  # unreachable

    def text_or_action(self) -> Node:
        tok = self.next_non_space()
        if tok.typ == T_TEXT:
            node: Node = TextNode(tok.pos, tok.val)
            return node
        if tok.typ == T_LEFT:
            return self.action()
        self.unexpected(tok, "input")
        raise AssertionError

    def action(self) -> Node:
        tok = self.next_non_space()
        if tok.typ == T_KEYWORD:
            handler = {
                "block": self.block_control, "break": self.break_control,
                "continue": self.break_control, "else": self.else_control,
                "end": self.end_control, "if": self.branch_control,
                "range": self.branch_control, "template": self.template_control,
                "with": self.branch_control,
            }.get(tok.val)
            if handler is not None:
                return handler(tok)
        self.backup()
        tok = self.peek()
        return ActionNode(tok.pos, tok.line, self.pipeline("command", T_RIGHT))

    def break_control(self, tok: Token) -> Node:
        nxt = self.next_non_space()
        if nxt.typ != T_RIGHT:
            self.unexpected(nxt, "{{%s}}" % tok.val)
        if not self.range_depth:
            self.errorf("{{%s}} outside {{range}}" % tok.val)
        cls = BreakNode if tok.val == "break" else ContinueNode
        return cls(tok.pos, tok.line)

    def end_control(self, tok: Token) -> Node:
        self.expect(T_RIGHT, "end")
        return EndNode(tok.pos)

    def else_control(self, tok: Token) -> Node:
        peek = self.peek_non_space()
        if peek.typ == T_KEYWORD and peek.val in ("if", "with"):
            return ElseNode(peek.pos, peek.line)
        tok = self.expect(T_RIGHT, "else")
        return ElseNode(tok.pos, tok.line)

    def branch_control(self, tok: Token) -> Node:
        context = tok.val
        mark = len(self.vars)
        try:
            pipe = self.pipeline(context, T_RIGHT)
            if context == "range":
                self.range_depth += 1
            body, nxt = self.item_list()
            if context == "range":
                self.range_depth -= 1
            else_list = None
            if isinstance(nxt, ElseNode):
                peek = self.peek()
                if context in ("if", "with") and peek.typ == T_KEYWORD and peek.val == context:
                    kw = self.next()
                    else_list = ListNode(nxt.pos)
                    else_list.nodes.append(self.branch_control(kw))
                else:
                    else_list, nxt = self.item_list()
                    if not isinstance(nxt, EndNode):
                        self.errorf("expected end; found %s" % nxt)
        finally:
            del self.vars[mark:]
        cls = {"if": IfNode, "range": RangeNode, "with": WithNode}[context]
        return cls(pipe.pos, pipe.line, pipe, body, else_list)

    def template_control(self, tok: Token) -> Node:
        context = "template clause"
        name = self.parse_template_name(self.next_non_space(), context)
        pipe = None
        if self.next_non_space().typ != T_RIGHT:
            self.backup()
            pipe = self.pipeline(context, T_RIGHT)
        return TemplateNode(tok.pos, tok.line, name, pipe)

    def block_control(self, tok: Token) -> Node:
        context = "block clause"
        name = self.parse_template_name(self.next_non_space(), context)
        pipe = self.pipeline(context, T_RIGHT)
        saved_vars, saved_depth = self.vars, self.range_depth
        self.vars, self.range_depth = ["$"], 0
        body, end = self.item_list()
        if not isinstance(end, EndNode):
            self.errorf("unexpected %s in %s" % (end, context))
        self.vars, self.range_depth = saved_vars, saved_depth
        self.add_tree(self.make_tree(name, body))
        return TemplateNode(tok.pos, tok.line, name, pipe)

    # --- pipelines and commands
    def pipeline(self, context: str, end: str) -> PipeNode:
        tok = self.peek_non_space()
        pipe = PipeNode(tok.pos, tok.line)
        self.declarations(pipe, context)
        while True:
            tok = self.next_non_space()
            if tok.typ == end:
                self.check_pipeline(pipe, context)
                return pipe
            if tok.typ in (T_BOOL, T_CHARCONST, T_COMPLEX, T_DOT, T_FIELD, T_IDENT, T_NUMBER,
                           T_NIL, T_RAW, T_STRING, T_VAR, T_LPAREN):
                self.backup()
                pipe.cmds.append(self.command())
            else:
                self.unexpected(tok, context)

    def declarations(self, pipe: PipeNode, context: str) -> None:
        while self.peek_non_space().typ == T_VAR:
            start = self.i
            var = self.next_non_space()
            after_var = self.peek()
            nxt = self.peek_non_space()
            if nxt.typ in (T_ASSIGN, T_DECLARE):
                pipe.is_assign = nxt.typ == T_ASSIGN
                self.next_non_space()
                pipe.decl.append(VariableNode(var.pos, var.val))
                self.vars.append(var.val)
                return
            if nxt.typ == T_CHAR and nxt.val == ",":
                self.next_non_space()
                pipe.decl.append(VariableNode(var.pos, var.val))
                self.vars.append(var.val)
                if context == "range" and len(pipe.decl) < 2:
                    if self.peek_non_space().typ in (T_VAR, T_RIGHT, T_RPAREN):
                        continue
                    self.errorf("range can only initialize variables")
                self.errorf("too many declarations in %s" % context)
            del after_var
            self.i = start
            return

    def check_pipeline(self, pipe: PipeNode, context: str) -> None:
        if not pipe.cmds:
            self.errorf("missing value for %s" % context)
        for i, cmd in enumerate(pipe.cmds[1:]):
            if isinstance(cmd.args[0], (BoolNode, DotNode, NilNode, NumberNode, StringNode)):
                self.errorf("non executable command in pipeline stage %d" % (i + 2))

    def command(self) -> CommandNode:
        cmd = CommandNode(self.peek_non_space().pos)
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                cmd.args.append(operand)
            tok = self.next()
            if tok.typ == T_SPACE:
                continue
            if tok.typ in (T_RIGHT, T_RPAREN):
                self.backup()
            elif tok.typ != T_PIPE:
                self.unexpected(tok, "operand")
            break
        if not cmd.args:
            self.errorf("empty command")
        return cmd

    def operand(self) -> Node | None:
        node = self.term()
        if node is None:
            return None
        if self.peek().typ == T_FIELD:
            chain = ChainNode(self.peek().pos, node)
            while self.peek().typ == T_FIELD:
                chain.fields.append(self.next().val[1:])
            if isinstance(node, FieldNode):
                return FieldNode(node.pos, str(chain))
            if isinstance(node, VariableNode):
                return VariableNode(node.pos, str(chain))
            if isinstance(node, (BoolNode, StringNode, NumberNode, NilNode, DotNode)):
                self.errorf("unexpected . after term %s" % go_quote(str(node)))
            return chain
        return node

    def term(self) -> Node | None:  # noqa: C901 - one branch per token kind, as Go's term
        tok = self.next_non_space()
        if tok.typ == T_IDENT:
            if tok.val not in self.funcs:
                self.errorf("function %s not defined" % go_quote(tok.val), tok)
            return IdentifierNode(tok.pos, tok.val)
        if tok.typ == T_DOT:
            return DotNode(tok.pos)
        if tok.typ == T_NIL:
            return NilNode(tok.pos)
        if tok.typ == T_VAR:
            name = tok.val.split(".")[0]
            if name not in self.vars:
                self.errorf("undefined variable %s" % go_quote(name), tok)
            return VariableNode(tok.pos, tok.val)
        if tok.typ == T_FIELD:
            return FieldNode(tok.pos, tok.val)
        if tok.typ == T_BOOL:
            return BoolNode(tok.pos, tok.val == "true")
        if tok.typ in (T_CHARCONST, T_COMPLEX, T_NUMBER):
            return NumberNode(tok.pos, tok.val, self.number(tok))
        if tok.typ == T_LPAREN:
            return self.pipeline("parenthesized pipeline", T_RPAREN)
        if tok.typ in (T_STRING, T_RAW):
            return StringNode(tok.pos, tok.val, self.unquote(tok))
        if tok.typ == T_ERROR:
            self.unexpected(tok, "operand")
        self.backup()
        return None

    def unquote(self, tok: Token) -> str:
        if tok.typ == T_RAW:
            return tok.val[1:-1].replace("\r", "")
        try:
            return _go_unquote(tok.val[1:-1], '"')
        except ValueError as exc:
            self.errorf(str(exc), tok)
            raise

    def number(self, tok: Token) -> Any:
        try:
            return parse_number(tok.val, tok.typ)
        except ValueError as exc:
            self.errorf(str(exc), tok)
            raise


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"'}


def _go_unquote(body: str, quote: str) -> str:
    """Go's strconv.Unquote for the inside of a "..." or '...' literal."""
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = body[i + 1:i + 2]
        if esc in _ESCAPES and (esc not in "'\"" or esc == quote):
            out.append(_ESCAPES[esc])
            i += 2
        elif esc in ("x", "u", "U"):
            size = {"x": 2, "u": 4, "U": 8}[esc]
            digits = body[i + 2:i + 2 + size]
            if len(digits) != size or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError("invalid syntax")
            out.append(chr(int(digits, 16)))
            i += 2 + size
        elif esc and esc in "01234567":
            digits = body[i + 1:i + 4]
            if len(digits) != 3 or any(c not in "01234567" for c in digits):
                raise ValueError("invalid syntax")
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise ValueError("invalid syntax")
    return "".join(out)


def parse_number(text: str, typ: str = T_NUMBER) -> Any:
    """A number literal's Go "ideal constant" value: int, float or complex (Go: newNumber)."""
    if typ == T_CHARCONST:
        body = _go_unquote(text[1:-1], "'")
        if len(body) != 1:
            raise ValueError("malformed character constant: %s" % text)
        return ord(body)
    if typ == T_COMPLEX or text.endswith("i"):
        return _parse_complex(text)
    clean = text.replace("_", "")
    low = clean.lower().lstrip("+-")
    try:
        if low.startswith(("0x", "0o", "0b")) and "p" not in low and "." not in low:
            return int(clean, 0)
        if low.isdigit():
            if len(low) > 1 and low.startswith("0"):
                return int(clean[:-len(low)] + "0o" + low[1:], 0)
            return int(clean)
        if low.startswith("0x"):
            value = float.fromhex(clean)
        else:
            value = float(clean)
    except ValueError:
        raise ValueError("illegal number syntax: %s" % go_quote(text)) from None
    return value


def _parse_complex(text: str) -> Any:
    clean = text.replace("_", "")
    try:
        value = complex(clean[:-1] + "j")
    except ValueError:
        raise ValueError("illegal number syntax: %s" % go_quote(text)) from None
    return value


# --------------------------------------------------------------------------------------------
# Executor (Go: text/template/exec.go)
# --------------------------------------------------------------------------------------------

class _ExecError(Exception):
    """Raised inside execution; carries the finished Go message."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _State:
    def __init__(self, tmpl: Template, out: list[str], depth: int = 0,
                 funcs: dict[str, Callable] | None = None) -> None:
        self.tmpl, self.out, self.depth = tmpl, out, depth
        self.funcs = tmpl.funcs if funcs is None else funcs
        self.vars: list[list[Any]] = []
        self.node: Node | None = None

    def run(self, data: Any) -> None:
        data = _valid(data)
        self.vars = [["$", data]]
        try:
            self.walk(data, self.tmpl.root)
        except RecursionError:
            self.errorf("exceeded maximum template depth (%d)" % MAX_EXEC_DEPTH)
        except _Limit as exc:
            self.errorf(str(exc))

    # --- errors
    def at(self, node: Node) -> None:
        self.node = node

    def errorf(self, cause: str) -> None:
        name = self.tmpl.name
        if self.node is None:
            msg = "template: %s: %s" % (name, cause)
            raise TemplateError(msg, name, 0, None, cause)
        text, pos = self.tmpl.text, self.node.pos
        line = 1 + text.count("\n", 0, pos)
        col = pos - (text.rfind("\n", 0, pos) + 1)
        context = str(self.node)
        msg = "template: %s:%d:%d: executing %s at <%s>: %s" % (
            self.tmpl.parse_name, line, col, go_quote(name), _ctx(context), cause)
        raise TemplateError(msg, self.tmpl.parse_name, line, col, cause, context)

    # --- variables
    def push(self, name: str, value: Any) -> None:
        self.vars.append([name, value])

    def set_var(self, name: str, value: Any) -> None:
        for entry in reversed(self.vars):
            if entry[0] == name:
                entry[1] = value
                return
        self.errorf("undefined variable: %s" % name)

    def var_value(self, name: str) -> Any:
        for entry in reversed(self.vars):
            if entry[0] == name:
                return entry[1]
        self.errorf("undefined variable: %s" % name)

    # --- walking
    def walk(self, dot: Any, node: Node) -> None:
        self.node = node
        if isinstance(self.out, _Output):
            self.out.tick()
        kind = type(node)
        if kind is TextNode:
            self.out.append(node.text)
        elif kind is ListNode:
            for item in node.nodes:
                self.walk(dot, item)
        elif kind is ActionNode:
            value = self.eval_pipeline(dot, node.pipe)
            if not node.pipe.decl:
                self.print_value(node, value)
        elif kind is IfNode or kind is WithNode:
            self.walk_if_or_with(dot, node)
        elif kind is RangeNode:
            self.walk_range(dot, node)
        elif kind is TemplateNode:
            self.walk_template(dot, node)
        elif kind is ContinueNode:
            raise _Continue()
        elif kind is BreakNode:
            raise _Break()
        else:
            self.errorf("unknown node: %s" % node)

    def walk_if_or_with(self, dot: Any, node: BranchNode) -> None:
        mark = len(self.vars)
        try:
            value = self.eval_pipeline(dot, node.pipe)
            truth, ok = is_true(value)
            if not ok:
                self.errorf("if/with can't use %s" % format_value(value))
            if truth:
                self.walk(_valid(value) if isinstance(node, WithNode) else dot, node.list)
            elif node.else_list is not None:
                self.walk(dot, node.else_list)
        finally:
            del self.vars[mark:]

    def walk_range(self, dot: Any, node: RangeNode) -> None:
        self.at(node)
        mark = len(self.vars)
        try:
            value = self.eval_pipeline(dot, node.pipe, declare=False)
            items = self.range_items(node, value)
            if not node.pipe.is_assign:
                for var in node.pipe.decl:
                    self.push(var.ident[0], value)
            inner = len(self.vars)
            for key, elem in items:
                self.range_vars(node, key, elem, inner)
                try:
                    self.walk(elem, node.list)
                except _Continue:
                    pass
                except _Break:
                    break
                finally:
                    del self.vars[inner:]
            if not items and node.else_list is not None:
                self.walk(dot, node.else_list)
        finally:
            del self.vars[mark:]

    def range_vars(self, node: RangeNode, key: Any, elem: Any, inner: int) -> None:
        decl = node.pipe.decl
        if not decl:
            return
        if node.pipe.is_assign:
            if len(decl) > 1:
                self.set_var(decl[0].ident[0], key)
                self.set_var(decl[1].ident[0], elem)
            else:
                self.set_var(decl[0].ident[0], elem)
            return
        self.vars[inner - 1][1] = elem
        if len(decl) > 1:
            self.vars[inner - 2][1] = key

    def range_items(self, node: RangeNode, value: Any) -> list[tuple[Any, Any]]:
        if value is None:
            return []
        if isinstance(value, (list, tuple)):
            return list(enumerate(value))
        if isinstance(value, dict):
            return [(k, value[k]) for k in _sorted_keys(value)]
        if isinstance(value, int) and not isinstance(value, bool):
            if len(node.pipe.decl) > 1:
                self.errorf("can't use %d to iterate over more than one variable" % value)
            return [(i, i) for i in range(value)]
        self.errorf("range can't iterate over %s" % format_value(value))
        return []

    def walk_template(self, dot: Any, node: TemplateNode) -> None:
        self.at(node)
        tmpl = self.tmpl.lookup(node.name)
        if tmpl is None:
            self.errorf("template %s not defined" % go_quote(node.name))
        if self.depth >= MAX_EXEC_DEPTH:
            self.errorf("exceeded maximum template depth (%d)" % MAX_EXEC_DEPTH)
        new_dot = INVALID if node.pipe is None else _valid(self.eval_pipeline(dot, node.pipe))
        state = _State(tmpl, self.out, self.depth + 1, self.funcs)
        state.vars = [["$", new_dot]]
        state.walk(new_dot, tmpl.root)

    # --- evaluation
    def eval_pipeline(self, dot: Any, pipe: PipeNode, declare: bool = True) -> Any:
        self.at(pipe)
        value: Any = MISSING
        for cmd in pipe.cmds:
            value = self.eval_command(dot, cmd, value)
        if value is MISSING:
            value = None
        if declare:
            for var in pipe.decl:
                if pipe.is_assign:
                    self.set_var(var.ident[0], _valid(value))
                else:
                    self.push(var.ident[0], _valid(value))
        elif pipe.is_assign and pipe.decl:
            pass
        return value

    def eval_command(self, dot: Any, cmd: CommandNode, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, FieldNode):
            return self.eval_field_chain(dot, dot, first, first.ident, cmd.args, final)
        if isinstance(first, ChainNode):
            return self.eval_chain(dot, first, cmd.args, final)
        if isinstance(first, IdentifierNode):
            return self.eval_function(dot, first, cmd, cmd.args, final)
        if isinstance(first, PipeNode):
            self.not_a_function(cmd.args, final)
            return self.eval_pipeline(dot, first)
        if isinstance(first, VariableNode):
            return self.eval_variable(dot, first, cmd.args, final)
        self.at(first)
        self.not_a_function(cmd.args, final)
        if isinstance(first, BoolNode):
            return first.value
        if isinstance(first, DotNode):
            return _plain(dot)
        if isinstance(first, NilNode):
            self.errorf("nil is not a command")
        if isinstance(first, NumberNode):
            return first.value
        if isinstance(first, StringNode):
            return first.text
        self.errorf("can't evaluate command %s" % first)
        return None

    def not_a_function(self, args: list[Node], final: Any) -> None:
        if len(args) > 1 or final is not MISSING:
            self.errorf("can't give argument to non-function %s" % args[0])

    def eval_chain(self, dot: Any, chain: ChainNode, args: list[Node], final: Any) -> Any:
        self.at(chain)
        if isinstance(chain.node, NilNode):
            self.errorf("indirection through explicit nil in %s" % chain)
        pipe = self.eval_arg(dot, chain.node)
        if isinstance(chain.node, PipeNode):
            pipe = _valid(pipe)
        return self.eval_field_chain(dot, pipe, chain, chain.fields, args, final)

    def eval_variable(self, dot: Any, var: VariableNode, args: list[Node], final: Any) -> Any:
        self.at(var)
        value = self.var_value(var.ident[0])
        if len(var.ident) == 1:
            self.not_a_function(args, final)
            return _plain(value)
        return self.eval_field_chain(dot, value, var, var.ident[1:], args, final)

    def eval_field_chain(self, dot: Any, receiver: Any, node: Node, idents: list[str],
                         args: list[Node], final: Any) -> Any:
        for ident in idents[:-1]:
            receiver = self.eval_field(dot, ident, node, [], MISSING, receiver)
        value = self.eval_field(dot, idents[-1], node, args, final, receiver)
        return None if value is INVALID else value

    def eval_field(self, dot: Any, name: str, node: Node, args: list[Node], final: Any,
                   receiver: Any) -> Any:
        self.at(node)
        has_args = len(args) > 1 or final is not MISSING
        if receiver is INVALID:
            return INVALID
        if receiver is None:
            self.errorf("nil pointer evaluating interface {}.%s" % name)
        method = _method(receiver, name)
        if method is not None:
            return self.eval_call(dot, method, False, node, name, args, final)
        if isinstance(receiver, dict):
            if receiver and not any(isinstance(k, str) for k in receiver):
                self.errorf("can't evaluate field %s in type %s" % (name, go_type(receiver)))
            if has_args:
                self.errorf("%s is not a method but has arguments" % name)
            return receiver.get(name, INVALID)
        if _is_struct(receiver):
            if not name[:1].isupper():
                self.errorf("%s is an unexported field of struct type %s"
                            % (name, go_type(receiver)))
            if not hasattr(receiver, name):
                self.errorf("can't evaluate field %s in type %s" % (name, go_type(receiver)))
            if has_args:
                self.errorf("%s has arguments but cannot be invoked as function" % name)
            return getattr(receiver, name)
        self.errorf("can't evaluate field %s in type %s" % (name, go_type(receiver)))
        return None

    def eval_function(self, dot: Any, ident: IdentifierNode, cmd: Node, args: list[Node],
                      final: Any) -> Any:
        self.at(ident)
        name = ident.ident
        fn = self.funcs.get(name)
        if fn is None:
            self.errorf("%s is not a defined function" % go_quote(name))
        return self.eval_call(dot, fn, fn in _BUILTIN_FUNCS, cmd, name, args, final)

    def eval_call(self, dot: Any, fn: Callable, builtin: bool, node: Node, name: str,
                  args: list[Node], final: Any) -> Any:
        arg_nodes = args[1:]
        if builtin and name in ("and", "or"):
            return self.eval_and_or(dot, name, node, arg_nodes, final)
        values = [self.eval_arg(dot, a) for a in arg_nodes]
        if final is not MISSING:
            values.append(final)
        self.at(node)
        bound = self.bind(fn, name, values)
        try:
            if builtin and name == "call":
                return self.builtin_call(bound)
            return fn(*bound)
        except TemplateError:
            raise
        except (_Break, _Continue):
            raise
        except Exception as exc:  # a template function's error becomes the template's error
            self.at(node)
            self.errorf("error calling %s: %s" % (name, _exc_text(exc)))
        return None

    def builtin_call(self, values: list[Any]) -> Any:
        fn = values[0]
        if fn is None:
            raise _CallError("call of nil")
        if not callable(fn):
            raise _CallError("non-function of type %s" % go_type(fn))
        return fn(*self.bind(fn, "call", values[1:], calling=True))

    def bind(self, fn: Callable, name: str, values: list[Any], calling: bool = False) -> list[Any]:
        """Check arity and annotated parameter types as Go's evalCall/validateType do."""
        spec = _signature(fn)
        if spec is None:
            return values
        params, variadic = spec
        want = len(params)
        if variadic is not None:
            if len(values) < want:
                self.fail_arity(name, "at least %d" % want, len(values), calling)
        elif len(values) != want:
            self.fail_arity(name, str(want), len(values), calling)
        out = []
        for i, value in enumerate(values):
            typ = params[i] if i < want else variadic
            out.append(self.convert(value, typ, calling))
        return out

    def fail_arity(self, name: str, want: str, got: int, calling: bool) -> None:
        if calling:
            raise _CallError("wrong number of args: got %d want %s" % (got, want))
        self.errorf("wrong number of args for %s: want %s got %d" % (name, want, got))

    def convert(self, value: Any, typ: Any, calling: bool) -> Any:
        ok, value = _convert(value, typ)
        if not ok:
            msg = "wrong type for value; expected %s; got %s" % (
                _GO_TYPE_NAMES.get(typ, str(typ)), go_type(value))
            if calling:
                raise _CallError(msg)
            self.errorf(msg)
        return value

    def eval_and_or(self, dot: Any, name: str, node: Node, arg_nodes: list[Node],
                    final: Any) -> Any:
        total = len(arg_nodes) + (final is not MISSING)
        if total < 1:
            self.errorf("wrong number of args for %s: want at least 1 got 0" % name)
        value: Any = None
        for i in range(total):
            value = final if i == len(arg_nodes) else self.eval_arg(dot, arg_nodes[i])
            if is_true(value)[0] == (name == "or"):
                return value
        return value

    def eval_arg(self, dot: Any, node: Node) -> Any:
        self.node = node
        kind = type(node)
        if kind is StringNode:
            return node.text
        if kind is VariableNode:
            return self.eval_variable(dot, node, [node], MISSING)
        if kind is FieldNode:
            return self.eval_field_chain(dot, dot, node, node.ident, [node], MISSING)
        if kind is PipeNode:
            return self.eval_pipeline(dot, node)
        if kind is NumberNode or kind is BoolNode:
            return node.value
        if kind is DotNode:
            return _plain(dot)
        if kind is NilNode:
            return None
        if kind is IdentifierNode:
            return self.eval_function(dot, node, node, [node], MISSING)
        if kind is ChainNode:
            return self.eval_chain(dot, node, [node], MISSING)
        self.errorf("can't handle %s for arg" % node)
        return None

    def print_value(self, node: Node, value: Any) -> None:
        self.at(node)
        if value is None:
            self.out.append("<no value>")
            return
        if callable(value) and not _is_struct(value) and not isinstance(value, (dict, list)):
            self.errorf("can't print %s of type %s" % (node, go_type(value)))
        self.out.append(format_value(value))


class _CallError(Exception):
    pass


def _valid(value: Any) -> Any:
    """A pipeline's nil result as Go holds it in dot and variables: the invalid Value."""
    return INVALID if value is None else value


def _plain(value: Any) -> Any:
    return None if value is INVALID else value


def _exc_text(exc: Exception) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc)


def _ctx(context: str) -> str:
    return context if len(context) <= 20 else context[:20] + "..."


def _is_struct(value: Any) -> bool:
    if isinstance(value, (str, bytes, int, float, complex, list, tuple, dict, type(None))):
        return False
    return dataclasses.is_dataclass(value) or hasattr(value, "__dict__")


def _method(receiver: Any, name: str) -> Callable | None:
    """A Go method: a callable defined on the receiver's class (not a field holding a func)."""
    if isinstance(receiver, (dict, list, tuple, str, int, float, complex, bool)):
        return None
    if not name[:1].isupper():
        return None
    attr = inspect.getattr_static(type(receiver), name, None)
    if attr is None or not callable(attr) or isinstance(attr, (staticmethod, type)):
        return None
    return getattr(receiver, name)


_SIGNATURES: dict[Any, Any] = {}


def _signature(fn: Callable) -> tuple[list[Any], Any] | None:
    """(parameter annotations, variadic annotation or None); None if not introspectable."""
    key = getattr(fn, "__func__", fn)
    key = getattr(key, "__code__", key)  # closures made per render share one entry
    if key in _SIGNATURES:
        cached = _SIGNATURES[key]
    else:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            _SIGNATURES[key] = None
            return None
        params, variadic = [], None
        for p in sig.parameters.values():
            ann = p.annotation if p.annotation is not inspect.Parameter.empty else Any
            if p.kind == p.VAR_POSITIONAL:
                variadic = ann
            elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
                params.append(ann)
        cached = (params, variadic)
        if not inspect.ismethod(fn):
            _SIGNATURES[key] = cached
    return cached


_GO_TYPE_NAMES = {str: "string", int: "int", float: "float64", bool: "bool", complex: "complex128",
                  list: "[]string", dict: "map[string]string", "str": "string", "int": "int",
                  "float": "float64", "bool": "bool", "list": "[]string",
                  "dict": "map[string]string"}


def _convert(value: Any, typ: Any) -> tuple[bool, Any]:
    typ = {"str": str, "int": int, "float": float, "bool": bool, "list": list,
           "dict": dict}.get(typ, typ)
    if typ is Any or typ is None or isinstance(typ, str):
        return True, value
    if typ is bool:
        return isinstance(value, bool), value
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        return False, value
    if typ is str:
        return isinstance(value, str), value
    if typ is list:
        return isinstance(value, (list, tuple)), value
    if isinstance(typ, type):
        return isinstance(value, typ), value
    return True, value


# --------------------------------------------------------------------------------------------
# Go semantics of values: truth, comparison, printing (fmt)
# --------------------------------------------------------------------------------------------

def is_true(value: Any) -> tuple[bool, bool]:
    """Go's template.IsTrue: (truth, ok)."""
    if value is None or value is MISSING:
        return False, True
    if isinstance(value, bool):
        return value, True
    if isinstance(value, (int, float, complex)):
        return value != 0, True
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0, True
    return True, True


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, complex):
        return "complex"
    if isinstance(value, str):
        return "string"
    return "other"


def go_type(value: Any) -> str:
    """The Go type name printed by %T and in errors, for the Python value."""
    if value is None:
        return "<nil>"
    kind = _kind(value)
    if kind != "other":
        return {"bool": "bool", "int": "int", "float": "float64", "complex": "complex128",
                "string": "string"}[kind]
    if isinstance(value, (list, tuple)):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if callable(value) and not _is_struct(value):
        return "func"
    return type(value).__name__


def _sorted_keys(mapping: dict) -> list[Any]:
    try:
        return sorted(mapping)
    except TypeError:
        return sorted(mapping, key=lambda k: (type(k).__name__, str(k)))


# --- fmt: %v and friends

def format_value(value: Any, verb: str = "v", plus: bool = False) -> str:
    """fmt's %v of value (Go's default format)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _fmt_g_shortest(value)
    if isinstance(value, complex):
        return _fmt_complex(value, _fmt_g_shortest)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(format_value(v, verb, plus) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join("%s:%s" % (format_value(k, verb, plus),
                                            format_value(value[k], verb, plus))
                                 for k in _sorted_keys(value)) + "]"
    text = _stringer(value)
    if text is not None:
        return text
    if dataclasses.is_dataclass(value):
        parts = []
        for f in dataclasses.fields(value):
            item = format_value(getattr(value, f.name), verb, plus)
            parts.append("%s:%s" % (f.name, item) if plus else item)
        return "{" + " ".join(parts) + "}"
    if callable(value):
        return "%#x" % id(value)
    return str(value)


def _stringer(value: Any) -> str | None:
    """Go's Stringer / error: a String() or Error() method."""
    for name in ("Error", "String"):
        method = getattr(type(value), name, None)
        if callable(method):
            return str(method(value))
    if isinstance(value, Exception):
        return str(value)
    return None


def _fmt_complex(value: complex, fmt_part: Callable[[float, bool], str]) -> str:
    return "(%s%si)" % (fmt_part(value.real, False), fmt_part(value.imag, True))


def _fmt_g_shortest(value: float, sign: bool = False) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64): shortest digits, %e when exp < -4 or >= 6."""
    prefix = "+" if sign and (value > 0 or (value == 0 and math.copysign(1, value) > 0)) else ""
    if math.isinf(value):
        return ("+Inf" if value > 0 else "-Inf")
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return prefix + ("-0" if math.copysign(1, value) < 0 else "0")
    dec = decimal.Decimal(repr(value))
    sign_, digits, exp = dec.as_tuple()
    digits_s = "".join(map(str, digits)).rstrip("0") or "0"
    nd = len(digits_s)
    point = len(digits) + int(exp)  # decimal point position relative to digits start
    x = point - 1
    neg = "-" if sign_ else prefix
    if x < -4 or x >= 6:
        mant = digits_s[0] + ("." + digits_s[1:] if nd > 1 else "")
        return "%s%se%s%02d" % (neg, mant, "-" if x < 0 else "+", abs(x))
    if point <= 0:
        return neg + "0." + "0" * (-point) + digits_s
    if point >= nd:
        return neg + digits_s + "0" * (point - nd)
    return neg + digits_s[:point] + "." + digits_s[point:]


def go_quote(text: str, ascii_only: bool = False) -> str:
    """strconv.Quote."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif (code < 0x80 or not ascii_only) and ch.isprintable():
            out.append(ch)
        elif code < 0x20 or code == 0x7F:
            out.append("\\x%02x" % code)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            out.append("\\U%08x" % code)
    out.append('"')
    return "".join(out)


def _quote_rune(code: int) -> str:
    ch = chr(code)
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    return "'" + go_quote(ch)[1:-1] + "'"


def go_sprint(*args: Any) -> str:
    """fmt.Sprint: spaces between operands when neither side is a string."""
    out = []
    for i, arg in enumerate(args):
        if i > 0 and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(format_value(arg))
    return "".join(out)


def go_sprintln(*args: Any) -> str:
    return " ".join(format_value(a) for a in args) + "\n"


class _Spec:
    __slots__ = ("minus", "plus", "sharp", "zero", "space", "width", "prec", "verb")

    def __init__(self) -> None:
        self.minus = self.plus = self.sharp = self.zero = self.space = False
        self.width: int | None = None
        self.prec: int | None = None
        self.verb = ""


def go_sprintf(fmt: str, *args: Any) -> str:
    """fmt.Sprintf for the verbs templates use (%v %+v %s %q %d %x %X %o %b %c %U %t %e %f %g %T)."""
    out: list[str] = []
    argi, i, n = 0, 0, len(fmt)
    while i < n:
        j = fmt.find("%", i)
        if j < 0:
            out.append(fmt[i:])
            break
        out.append(fmt[i:j])
        i = j + 1
        if i >= n:
            out.append("%!(NOVERB)")
            break
        spec = _Spec()
        i, argi = _parse_spec(fmt, i, spec, args, argi)
        if spec.verb == "%":
            out.append("%")
            continue
        if argi >= len(args):
            out.append("%!" + spec.verb + "(MISSING)")
            continue
        out.append(_fmt_arg(args[argi], spec))
        argi += 1
    if argi < len(args):
        extra = ", ".join("<nil>" if a is None else "%s=%s" % (go_type(a), format_value(a))
                          for a in args[argi:])
        out.append("%!(EXTRA " + extra + ")")
    return "".join(out)


def _parse_spec(fmt: str, i: int, spec: _Spec, args: tuple, argi: int) -> tuple[int, int]:
    n = len(fmt)
    while i < n and fmt[i] in "-+# 0":
        setattr(spec, {"-": "minus", "+": "plus", "#": "sharp", " ": "space", "0": "zero"}[fmt[i]],
                True)
        i += 1
    i, spec.width, argi = _parse_num(fmt, i, args, argi)
    if i < n and fmt[i] == ".":
        i, prec, argi = _parse_num(fmt, i + 1, args, argi)
        spec.prec = prec or 0
    if spec.width is not None and spec.width < 0:
        spec.minus, spec.width = True, -spec.width
    spec.verb = fmt[i] if i < n else ""
    return i + 1, argi


def _too_large(num: int) -> bool:
    """Go's fmt tooLarge: widths and precisions beyond a million are refused, not honoured."""
    return num > 1000000 or num < -1000000


def _parse_num(fmt: str, i: int, args: tuple, argi: int) -> tuple[int, int | None, int]:
    if i < len(fmt) and fmt[i] == "*":
        if argi < len(args) and isinstance(args[argi], int) and not _too_large(args[argi]):
            return i + 1, args[argi], argi + 1
        return i + 1, None, argi + 1
    start, num = i, 0
    while i < len(fmt) and fmt[i].isdigit():
        if _too_large(num):  # Go's parsenum: "crazy long number", the rest of the format is consumed
            return len(fmt), None, argi
        num = num * 10 + int(fmt[i])
        i += 1
    return i, (num if i > start else None), argi


def _bad_verb(value: Any, spec: "_Spec") -> str:
    """Go's %!verb(type=value), the value printed with %v and the same flags."""
    if value is None:
        return "%!" + spec.verb + "(<nil>)"
    as_v = _Spec()
    for slot in _Spec.__slots__:
        setattr(as_v, slot, getattr(spec, slot))
    as_v.verb = "v"
    return "%!" + spec.verb + "(" + go_type(value) + "=" + _fmt_arg(value, as_v) + ")"


def _fmt_arg(value: Any, spec: _Spec, nested: bool = False) -> str:
    verb = spec.verb
    if verb == "T":
        return _pad(go_type(value), spec)
    if verb == "v" and spec.sharp:
        return _pad(_go_syntax(value), spec)
    if value is None:
        return _pad("<nil>", spec) if verb == "v" or nested else _bad_verb(value, spec)
    if isinstance(value, bool):
        return _pad("true" if value else "false", spec) if verb in "tv" else _bad_verb(value, spec)
    if isinstance(value, int):
        return _fmt_int(value, spec)
    if isinstance(value, float):
        return _fmt_float(value, spec)
    if isinstance(value, complex):
        return _fmt_complex_spec(value, spec)
    if isinstance(value, str):
        return _fmt_str(value, spec)
    if verb in "sv":
        text = _stringer(value)
        if text is not None:
            return _fmt_str(text, spec)
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(_fmt_arg(v, spec, True) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join("%s:%s" % (_fmt_arg(k, spec, True), _fmt_arg(value[k], spec, True))
                                 for k in _sorted_keys(value)) + "]"
    if verb == "v":
        return _pad(format_value(value, plus=spec.plus), spec)
    return _bad_verb(value, spec)


def _go_syntax(value: Any) -> str:
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, float):
        text = _fmt_g_shortest(value)
        return text
    if isinstance(value, (list, tuple)):
        return "[]interface {}{" + ", ".join(_go_syntax(v) for v in value) + "}"
    if isinstance(value, dict):
        return "map[string]interface {}{" + ", ".join(
            "%s:%s" % (_go_syntax(k), _go_syntax(value[k])) for k in _sorted_keys(value)) + "}"
    return format_value(value)


def _pad(text: str, spec: _Spec, zero_ok: bool = False) -> str:
    width = spec.width or 0
    if len(text) >= width:
        return text
    fill = width - len(text)
    if spec.minus:
        return text + " " * fill
    if spec.zero and zero_ok:
        sign = text[0] if text[:1] in "+- " else ""
        return sign + "0" * fill + text[len(sign):]
    return " " * fill + text


def _fmt_int(value: int, spec: _Spec) -> str:
    verb = spec.verb
    if verb == "c":
        return _pad(chr(value), spec)
    if verb == "q":
        return _pad(_quote_rune(value), spec)
    if verb == "U":
        text = "U+%04X" % value
        if spec.sharp:
            text += " '%s'" % chr(value)
        return _pad(text, spec)
    if verb in "eEfFgG":
        return _bad_verb(value, spec)
    bases = {"d": (10, ""), "v": (10, ""), "x": (16, "0x"), "X": (16, "0X"), "o": (8, "0"),
             "O": (8, "0o"), "b": (2, "0b")}
    if verb not in bases:
        return _bad_verb(value, spec)
    base, prefix = bases[verb]
    digits = _int_digits(abs(value), base, verb)
    if spec.prec is not None:
        digits = digits.rjust(spec.prec, "0") if (spec.prec or value) else ""
    if verb == "O" or (spec.sharp and verb in "xXob"):
        if not (verb == "o" and digits.startswith("0")):
            digits = prefix + digits
    sign = "-" if value < 0 else ("+" if spec.plus else (" " if spec.space else ""))
    return _pad(sign + digits, spec, zero_ok=spec.prec is None)


def _int_digits(value: int, base: int, verb: str) -> str:
    if base == 10:
        return str(value)
    text = {16: "%x", 8: "%o", 2: ""}[base] % value if base != 2 else bin(value)[2:]
    return text.upper() if verb == "X" else text


def _fmt_float(value: float, spec: _Spec) -> str:
    verb = spec.verb
    if verb not in "eEfFgGv":
        return _bad_verb(value, spec)
    text = _float_text(value, verb, spec.prec, spec.sharp)
    if spec.plus and not text.startswith(("-", "+")):
        text = "+" + text
    elif spec.space and not text.startswith(("-", "+")):
        text = " " + text
    finite = not (math.isinf(value) or math.isnan(value))
    return _pad(text, spec, zero_ok=finite)


def _float_text(value: float, verb: str, prec: int | None, sharp: bool = False) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if verb in "gGv" and prec is None:
        text = _fmt_g_shortest(value)
        return text.upper() if verb == "G" else text
    if verb in "gG" and prec == 0:
        prec = 1
    pyverb = {"F": "f", "v": "g"}.get(verb, verb)
    text = ("%" + ("#" if sharp else "") + "." + str(6 if prec is None else prec) + pyverb) % value
    return text


def _fmt_complex_spec(value: complex, spec: _Spec) -> str:
    verb = spec.verb
    if verb not in "eEfFgGv":
        return _bad_verb(value, spec)
    text = _fmt_complex(value, lambda f, sign: (
        ("+" if sign and not _float_text(f, verb, spec.prec).startswith("-") else "")
        + _float_text(f, verb, spec.prec)))
    return _pad(text, spec)


def _fmt_str(value: str, spec: _Spec) -> str:
    verb = spec.verb
    if verb in "sv":
        text = value if spec.prec is None else value[:spec.prec]
        return _pad(text, spec)
    if verb == "q":
        if spec.sharp and "`" not in value and all(
                c.isprintable() or c == "\t" for c in value):
            return _pad("`" + value + "`", spec)
        return _pad(go_quote(value, ascii_only=spec.plus), spec)
    if verb in "xX":
        data = value.encode("utf-8")
        if spec.prec is not None:
            data = data[:spec.prec]
        sep = " " if spec.space else ""
        fmt = "%02x" if verb == "x" else "%02X"
        pre = ("0x" if verb == "x" else "0X") if spec.sharp else ""
        text = sep.join(pre + fmt % b for b in data) if sep else pre + "".join(
            fmt % b for b in data)
        return _pad(text, spec)
    return _bad_verb(value, spec)


# --------------------------------------------------------------------------------------------
# Built-in functions (Go: text/template/funcs.go)
# --------------------------------------------------------------------------------------------

def _fn_not(arg: Any) -> bool:
    return not is_true(arg)[0]


def _fn_len(item: Any) -> int:
    if item is None:
        raise _CallError("len of nil pointer")
    if isinstance(item, str):
        return len(item.encode("utf-8"))
    if isinstance(item, (list, tuple, dict)):
        return len(item)
    raise _CallError("len of type %s" % go_type(item))


def _index_of(value: Any, length: int, cap: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if value is None:
            raise _CallError("cannot index slice/array with nil")
        raise _CallError("cannot index slice/array with type %s" % go_type(value))
    limit = length if cap is None else cap
    if value < 0 or value > limit or (cap is None and value == length):
        raise _CallError("index out of range: %d" % value)
    return value


def _fn_index(item: Any, *indexes: Any) -> Any:
    if item is None:
        raise _CallError("index of untyped nil")
    for idx in indexes:
        if isinstance(item, str):
            item = item.encode("utf-8")[_index_of(idx, len(item.encode("utf-8")))]
        elif isinstance(item, (list, tuple)):
            item = item[_index_of(idx, len(item))]
        elif isinstance(item, dict):
            item = _map_index(item, idx)
        elif item is None:
            raise _CallError("index of untyped nil")
        else:
            raise _CallError("can't index item of type %s" % go_type(item))
    return item


def _map_index(item: dict, key: Any) -> Any:
    if key is None:
        raise _CallError("value is nil; should be of type string")
    if item:
        kinds = {_kind(k) for k in item}
        if _kind(key) not in kinds:
            raise _CallError("value has type %s; should be %s"
                             % (go_type(key), go_type(next(iter(item)))))
    if key in item:
        return item[key]
    values = list(item.values())
    kinds = {type(v) for v in values}
    if len(kinds) == 1 and type(values[0]) in (int, float, str, bool):
        return type(values[0])()
    return None


def _fn_slice(item: Any, *indexes: Any) -> Any:
    if item is None:
        raise _CallError("slice of untyped nil")
    if len(indexes) > 3:
        raise _CallError("too many slice indexes: %d" % len(indexes))
    if isinstance(item, str):
        if len(indexes) == 3:
            raise _CallError("cannot 3-index slice a string")
        data = item.encode("utf-8")
        bounds = [_index_of(i, len(data), len(data)) for i in indexes]
        return _slice(data, bounds).decode("utf-8", "replace")
    if isinstance(item, (list, tuple)):
        bounds = [_index_of(i, len(item), len(item)) for i in indexes]
        if len(bounds) == 3 and bounds[1] > bounds[2]:
            raise _CallError("invalid slice index: %d > %d" % (bounds[1], bounds[2]))
        return list(_slice(item, bounds))
    raise _CallError("can't slice item of type %s" % go_type(item))


def _slice(seq: Any, bounds: list[int]) -> Any:
    lo = bounds[0] if bounds else 0
    hi = bounds[1] if len(bounds) > 1 else len(seq)
    if lo > hi:
        raise _CallError("invalid slice index: %d > %d" % (lo, hi))
    return seq[lo:hi]


def _basic_eq(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        if a is None or b is None:
            return a is b
        raise _CallError("incompatible types for comparison")
    if ka == "other":
        if isinstance(a, (list, tuple, dict)) or isinstance(b, (list, tuple, dict)):
            raise _CallError("non-comparable type %s: %s" % (format_value(a), go_type(a)))
        return a == b
    return a == b


def _fn_eq(arg1: Any, *arg2: Any) -> bool:
    if not arg2:
        raise _CallError("missing argument for comparison")
    if isinstance(arg1, (list, tuple, dict)):
        raise _CallError("invalid type for comparison")
    return any(_basic_eq(arg1, b) for b in arg2)


def _fn_ne(arg1: Any, arg2: Any) -> bool:
    return not _fn_eq(arg1, arg2)


def _fn_lt(arg1: Any, arg2: Any) -> bool:
    ka, kb = _kind(arg1), _kind(arg2)
    if ka in ("bool", "complex", "other") or kb in ("bool", "complex", "other"):
        raise _CallError("invalid type for comparison")
    if ka != kb:
        raise _CallError("incompatible types for comparison")
    return arg1 < arg2


def _fn_le(arg1: Any, arg2: Any) -> bool:
    return _fn_lt(arg1, arg2) or _fn_eq(arg1, arg2)


def _fn_gt(arg1: Any, arg2: Any) -> bool:
    return not _fn_le(arg1, arg2)


def _fn_ge(arg1: Any, arg2: Any) -> bool:
    return not _fn_lt(arg1, arg2)


def _eval_args(args: tuple) -> str:
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return go_sprint(*("<no value>" if a is None else a for a in args))


_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "'": "&#39;", '"': "&#34;", "\0": "\uFFFD"}


def _fn_html(*args: Any) -> str:
    return "".join(_HTML.get(c, c) for c in _eval_args(args))


_JS = {"\\": "\\\\", "'": "\\'", '"': '\\"', "<": "\\u003C", ">": "\\u003E", "&": "\\u0026",
       "=": "\\u003D"}


def _fn_js(*args: Any) -> str:
    out = []
    for ch in _eval_args(args):
        if ch in _JS:
            out.append(_JS[ch])
        elif ord(ch) < 0x80 and not ch.isprintable():
            out.append("\\u%04X" % ord(ch))
        elif ord(ch) >= 0x80 and not ch.isprintable():
            out.append("\\u%04X" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def _fn_urlquery(*args: Any) -> str:
    return urllib.parse.quote_plus(_eval_args(args), safe="")


def _fn_print(*args: Any) -> str:
    return go_sprint(*args)


def _fn_printf(format: str, *args: Any) -> str:  # noqa: A002 - Go's parameter name
    return go_sprintf(format, *args)


def _fn_println(*args: Any) -> str:
    return go_sprintln(*args)


def _fn_call(fn: Any, *args: Any) -> Any:  # evaluated by _State.builtin_call
    raise AssertionError("call is evaluated by the executor")


def _fn_and_or(*args: Any) -> Any:  # evaluated lazily by _State.eval_and_or
    raise AssertionError("and/or are evaluated by the executor")


BUILTINS: dict[str, Callable] = {
    "and": _fn_and_or, "or": _fn_and_or, "not": _fn_not, "len": _fn_len, "index": _fn_index,
    "slice": _fn_slice, "print": _fn_print, "printf": _fn_printf, "println": _fn_println,
    "html": _fn_html, "js": _fn_js, "urlquery": _fn_urlquery, "call": _fn_call,
    "eq": _fn_eq, "ne": _fn_ne, "lt": _fn_lt, "le": _fn_le, "gt": _fn_gt, "ge": _fn_ge,
}
_BUILTIN_FUNCS = frozenset(BUILTINS.values())

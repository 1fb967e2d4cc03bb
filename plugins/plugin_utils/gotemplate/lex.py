# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lexer: template text to tokens (Go: text/template/parse/lex.go).

``_Lexer(text, left, right).run()`` returns the token list; a lexical error ends the list with an
``error`` token, which the parser (parse.py) reports.
"""

from __future__ import annotations

from ..errors import MaandError
from .fmt import go_quote


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
            pass  # the lexer stopped at an error token it emitted: the parser reports it
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


class _LexStop(MaandError):
    """Ends the lexing at an error token."""


def _go_rune_repr(ch: str) -> str:
    return "U+%04X %s" % (ord(ch), "'%s'" % ch if ch.isprintable() else "")

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parser and the parse tree (Go: text/template/parse/parse.go, node.go).

``_Parser(name, text, tokens, funcs).parse()`` builds the tree of ``name`` and of every template it
defines; each is a :class:`Tree` (template.py passes its :class:`Template`, a Tree that executes).
``str()`` of a node is Go's ``String()``. :class:`TemplateError` is the one error of the engine,
raised here for parse errors and by exec.py and template.py for execution errors.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import MaandError
from .fmt import go_quote
from .lex import (T_ASSIGN, T_BOOL, T_CHAR, T_CHARCONST, T_COMPLEX, T_DECLARE, T_DOT, T_EOF, T_ERROR,
                  T_FIELD, T_IDENT, T_KEYWORD, T_LEFT, T_LPAREN, T_NIL, T_NUMBER, T_PIPE, T_RAW, T_RIGHT,
                  T_RPAREN, T_SPACE, T_STRING, T_TEXT, T_VAR, Token)


class TemplateError(MaandError):
    """A parse or execution error: ``str()`` is Go's message; name/line/column/cause are fields."""

    def __init__(self, message: str, name: str = "", line: int = 0, column: int | None = None,
                 cause: str = "", context: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.line = line
        self.column = column
        self.cause = cause or message
        self.context = context


class Node:
    pos = 0
    line = 0
    tree: "Tree | None" = None


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


class Tree:
    """A parsed template and the set of templates it defines (Go's parse.Tree and the set it shares)."""

    def __init__(self, name: str, text: str, root: ListNode, trees: dict[str, "Tree"],
                 funcs: dict[str, Callable], parse_name: str) -> None:
        self.name, self.text, self.root = name, text, root
        self.trees, self.funcs, self.parse_name = trees, funcs, parse_name

    def __str__(self) -> str:
        return str(self.root)

    def lookup(self, name: str) -> "Tree | None":
        return self.trees.get(name)


class _Stream:
    """The token stream and its errors (Go's Tree.next/backup/peek/errorf/expect/unexpected);
    _Parser sets name, text, tokens and the position i."""

    name: str
    text: str
    tokens: list[Token]
    i: int

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


class _Pipelines(_Stream):
    """Go's pipeline, command, operand and term: what an action holds; _Parser sets funcs and
    vars (the variables in scope)."""

    funcs: dict[str, Callable]
    vars: list[str]

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


class _Parser(_Pipelines):
    """Go's Tree.parse: the top level, {{define}} and the control structures (if, range, with,
    template, block, break, continue, else, end); trees are made as tree_class."""

    def __init__(self, name: str, text: str, tokens: list[Token], funcs: dict[str, Callable],
                 tree_class: type[Tree] = Tree):
        self.name, self.text, self.tokens, self.funcs = name, text, tokens, funcs
        self.i = 0
        self.vars = ["$"]
        self.range_depth = 0
        self.trees: dict[str, Tree] = {}
        self.tree_name = name
        self.tree_class = tree_class

    def parse(self) -> Tree:
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

    def make_tree(self, name: str, root: ListNode) -> Tree:
        return self.tree_class(name, self.text, root, self.trees, self.funcs, self.name)

    def add_tree(self, tree: Tree) -> None:
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

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The executor: walks a parsed tree over data (Go: text/template/exec.go).

``_State(tree, out).run(data)`` writes the output into ``out`` (an ``_Output``, which enforces
MAX_OUTPUT and MAX_SECONDS); ``_Eval`` is its evaluation half (pipelines, commands, fields, calls).
Errors raise parse.TemplateError with Go's message and the line, column and cause.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable

from ..errors import MaandError
from .fmt import _is_struct, _sorted_keys, format_value, go_quote, go_type
from .funcs import _BUILTIN_FUNCS, MISSING, _CallError, is_true
from .parse import (ActionNode, BoolNode, BranchNode, BreakNode, ChainNode, CommandNode, ContinueNode, DotNode,
                    FieldNode, IdentifierNode, IfNode, ListNode, NilNode, Node, NumberNode, PipeNode, RangeNode,
                    StringNode, TemplateError, TemplateNode, TextNode, Tree, VariableNode, WithNode)


MAX_EXEC_DEPTH = 64  # Go allows 100000 nested {{template}} calls; Python's stack is smaller.
MAX_OUTPUT = 16 << 20  # characters one execution may write (a config file, not a disk filler)
MAX_SECONDS = 30.0  # wall-clock seconds one execution may take (e.g. a range over millions)


class _Invalid:
    """Go's zero reflect.Value inside a field chain: a map key that is absent (not nil)."""

    def __repr__(self) -> str:
        return "<invalid>"


INVALID = _Invalid()


class _Limit(MaandError):
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


class _Break(MaandError):
    """{{break}}: ends the innermost range."""


class _Continue(MaandError):
    """{{continue}}: the next iteration of the innermost range."""


class _Eval:
    """The evaluation half of Go's state (evalPipeline, evalCommand, evalField, evalCall, evalArg);
    _State gives it the template, the functions, the variables and errorf."""

    funcs: dict[str, Callable]

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


class _State(_Eval):
    """Go's state: one execution of one template (its variables, the node being run) and the walk
    over the tree; a {{template}} call runs a nested state."""

    def __init__(self, tmpl: Tree, out: list[str], depth: int = 0,
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
                    pass  # {{continue}}: on to the next element, as Go's walkRange
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

    def print_value(self, node: Node, value: Any) -> None:
        self.at(node)
        if value is None:
            self.out.append("<no value>")
            return
        if callable(value) and not _is_struct(value) and not isinstance(value, (dict, list)):
            self.errorf("can't print %s of type %s" % (node, go_type(value)))
        self.out.append(format_value(value))


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

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built-in functions and Go's truth and comparison rules (Go: text/template/funcs.go, IsTrue).

``BUILTINS`` is the function map every template starts from (and, or, not, len, index, slice, print,
printf, println, html, js, urlquery, call, eq, ne, lt, le, gt, ge); ``and``, ``or`` and ``call`` are
evaluated by the executor (exec.py), which turns a ``_CallError`` into ``error calling NAME: ...``.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable

from ..errors import MaandError
from .fmt import _kind, format_value, go_sprint, go_sprintf, go_sprintln, go_type


class _Missing:
    """Go's missingVal: "no final argument" in a pipeline."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


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


class _CallError(MaandError):
    """A built-in's error; the executor reports it as ``error calling NAME: ...``."""


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


def _fn_call(fn: Any, *args: Any) -> Any:  # evaluated by exec._Eval.builtin_call
    raise AssertionError("call is evaluated by the executor")


def _fn_and_or(*args: Any) -> Any:  # evaluated lazily by exec._Eval.eval_and_or
    raise AssertionError("and/or are evaluated by the executor")


BUILTINS: dict[str, Callable] = {
    "and": _fn_and_or, "or": _fn_and_or, "not": _fn_not, "len": _fn_len, "index": _fn_index,
    "slice": _fn_slice, "print": _fn_print, "printf": _fn_printf, "println": _fn_println,
    "html": _fn_html, "js": _fn_js, "urlquery": _fn_urlquery, "call": _fn_call,
    "eq": _fn_eq, "ne": _fn_ne, "lt": _fn_lt, "le": _fn_le, "gt": _fn_gt, "ge": _fn_ge,
}
_BUILTIN_FUNCS = frozenset(BUILTINS.values())

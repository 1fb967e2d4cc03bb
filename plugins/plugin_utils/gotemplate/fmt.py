# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go's fmt printing for the values a template holds (Go: fmt/print.go, format.go; strconv.Quote).

``format_value`` is ``%v``; ``go_sprint``, ``go_sprintln`` and ``go_sprintf`` are fmt's Sprint, Sprintln
and Sprintf (the verbs templates use); ``go_quote`` is strconv.Quote; ``go_type`` is the Go type name
that ``%T`` and error messages print for a Python value.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any, Callable


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


def _is_struct(value: Any) -> bool:
    if isinstance(value, (str, bytes, int, float, complex, list, tuple, dict, type(None))):
        return False
    return dataclasses.is_dataclass(value) or hasattr(value, "__dict__")


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

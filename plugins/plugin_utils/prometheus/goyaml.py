# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""YAML as maand reads and writes it: gopkg.in/yaml.v3 (v3.0.1) in and out.

In: ``load_yaml`` composes a document with PyYAML's BaseLoader (every scalar a string) and resolves the plain
scalars with yaml.v3's rules (``resolve_plain``: YAML 1.2 booleans, Go integer syntax, timestamps, merge keys).
Out: ``marshal`` writes a value as yaml.v3's ``yaml.Marshal`` does (keys sorted as sorter.go sorts them, the
scalar styles of emitterc.go, best indent 4), byte for byte: tests/data/prometheus/yamlv3_*.json hold the
outputs of maand's own code run with go-yaml v3.0.1. No Ansible imports.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import PrometheusError


# --- YAML in: yaml.v3's scalar resolution (resolve.go) ----------------------------------------

_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_SPECIAL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
            "": None, "~": None, "null": None, "Null": None, "NULL": None,
            ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan}
for _s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"):
    _SPECIAL[_s] = math.inf
for _s in ("-.inf", "-.Inf", "-.INF"):
    _SPECIAL[_s] = -math.inf


_INT_BODY = {16: re.compile(r"[0-9a-fA-F]+"), 10: re.compile(r"[0-9]+"), 8: re.compile(r"[0-7]+"),
             2: re.compile(r"[01]+")}


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), then ParseUint: sign, 0x/0o/0b prefixes, a leading 0 is octal."""
    sign = -1 if text[:1] == "-" else 1
    body = text[1:] if text[:1] in "+-" else text
    base, digits = 10, body
    if len(body) > 2 and body[0] == "0" and body[1] in "xXoObB":
        base, digits = {"x": 16, "o": 8, "b": 2}[body[1].lower()], body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits = 8, body[1:]
    if not _INT_BODY[base].fullmatch(digits):
        return None
    value = sign * int(digits, base)
    return value if -(1 << 63) <= value < (1 << 64) else None


_TIMESTAMP = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:[Tt]| +)(\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?"
                        r" *(Z|[-+]\d{1,2}(?::\d{2})?)?)?")


class Timestamp(str):
    """A plain scalar yaml.v3 reads as a time.Time: maand's KV JSON stores it as RFC 3339 text."""


def _timestamp(text: str) -> Timestamp | None:
    """yaml.v3 parseTimestamp's layouts (date, date time with optional fraction and zone)."""
    match = _TIMESTAMP.fullmatch(text)
    if not match:
        return None
    year, month, day, hour, minute, second, frac, zone = match.groups()
    if hour is None:
        return Timestamp("%s-%02d-%02dT00:00:00Z" % (year, int(month), int(day)))
    frac = (frac or "").rstrip("0").rstrip(".")
    if zone in (None, "Z"):
        zone = "Z"
    else:
        sign, rest = zone[0], zone[1:]
        hours, _x, minutes = rest.partition(":")
        zone = "%s%02d:%s" % (sign, int(hours), minutes or "00")
    return Timestamp("%s-%02d-%02dT%02d:%02d:%02d%s%s" % (year, int(month), int(day), int(hour), int(minute),
                                                          int(second), frac, zone))


def resolve_plain(text: str) -> Any:
    """What yaml.v3 decodes a plain (unquoted, untagged) scalar into interface{} as (a timestamp
    becomes the RFC 3339 text maand's KV JSON turns it into)."""
    if text in _SPECIAL:
        return _SPECIAL[text]
    hint = text[:1]
    if hint == ".":
        return _go_float(text, text)
    if not hint or not (hint in "+-" or hint.isdigit()):
        return text
    stamp = _timestamp(text) if hint.isdigit() else None
    if stamp is not None:
        return stamp
    plain = text.replace("_", "")
    value = _go_int(plain)
    if value is not None:
        return value
    if _FLOAT.match(plain):
        return _go_float(plain, text)
    return text


def _go_float(text: str, original: str) -> Any:
    """strconv.ParseFloat for the decimal forms that reach it (".5", "1.5e3"); else the text."""
    return float(text) if _FLOAT.match(text) else original


def load_yaml(text: str, what: str) -> Any:
    """A YAML document with yaml.v3's plain-scalar rules (``yes`` is a string, ``017`` is 15)."""
    import yaml  # ansible-core's own dependency

    try:
        node = yaml.compose(text, Loader=yaml.BaseLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        raise PrometheusError("%s: invalid YAML: %s" % (what, " ".join(str(exc).split()))) from None
    return None if node is None else _construct(node, what)


def pairs(node: Any, what: str) -> list:
    """A mapping node's (key, value) nodes with YAML merge keys (<<: *a, <<: [*a, *b]) applied as
    yaml.v3 applies them: explicit keys win, then the merged mappings in order."""
    import yaml

    own, merged = [], []
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.style is None and key_node.value == "<<":
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise PrometheusError("%s: map merge requires map or sequence of maps as the value" % what)
                merged.extend(pairs(source, what))
        else:
            own.append((key_node, value_node))
    seen = {k.value for k, dummy in own if isinstance(k, yaml.ScalarNode)}
    for key_node, value_node in merged:
        if not (isinstance(key_node, yaml.ScalarNode) and key_node.value in seen):
            own.append((key_node, value_node))
            seen.add(getattr(key_node, "value", None))
    return own


def _construct(node: Any, what: str) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in pairs(node, what):
            key = _construct(key_node, what)
            if isinstance(key, (dict, list)):
                raise PrometheusError("%s: a mapping key must be a scalar" % what)
            if not isinstance(key, str):
                key = str(key) if not isinstance(key, bool) else ("true" if key else "false")
            out[key] = _construct(value_node, what)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, what) for item in node.value]
    tag = node.tag.rsplit(":", 1)[-1] if node.tag.startswith("tag:yaml.org,2002:") else node.tag
    if node.style is None and tag == "str":
        return resolve_plain(node.value)
    if tag in ("str", "int", "float", "bool", "null"):
        return node.value if tag == "str" else resolve_plain(node.value)
    raise PrometheusError("%s: YAML tag %s is not supported here" % (what, node.tag))


# --- YAML out: yaml.v3's Marshal (encode.go, emitterc.go, sorter.go), best indent 4 -----------

_OLD_BOOL = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO", "off", "Off", "OFF"}
_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_INDICATOR_FIRST = set("#,[]{}&*!|>'\"%@`")


class Ordered(dict):
    """A Go struct for marshal: fields in declaration order, not sorted."""


def marshal(value: Any) -> str:
    """yaml.v3's yaml.Marshal(value) for maps, lists, strings, numbers, booleans and null."""
    lines: list[str] = []
    _emit_node(value, 0, lines, "", in_seq=False)
    return "\n".join(lines) + "\n"


def _next_indent(indent: int, in_seq_item: bool) -> int:
    """yaml_emitter_increase_indent as go-yaml v3 changed it: +2 after "- ", else the next multiple of 4."""
    return indent + 2 if in_seq_item else 4 * ((indent + 4) // 4)


def _emit_node(value: Any, indent: int, lines: list[str], prefix: str, in_seq: bool) -> None:
    """Emit value whose first line starts with prefix (e.g. "key:" or "- "); indent is the block's."""
    if isinstance(value, dict) and value:
        _emit_mapping(value, indent, lines, prefix)
    elif isinstance(value, list) and value:
        _emit_sequence(value, indent, lines, prefix)
    else:  # a document that is one literal block indents it by 4
        _emit_scalar(value, lines, prefix, _next_indent(indent, in_seq) if prefix else 4)


def _emit_scalar(value: Any, lines: list[str], lead: str, block_indent: int) -> None:
    """A scalar after lead ("key:", "- " or nothing), or a literal block whose lines sit at block_indent."""
    scalar = _scalar(value, simple_key=False)
    header, body = scalar if isinstance(scalar, list) else (scalar, ())
    lines.append(_join(lead, header))
    lines.extend((" " * block_indent + line) if line else "" for line in body)


def _join(prefix: str, text: str) -> str:
    if not prefix:
        return text
    return prefix + text if prefix.endswith(" ") else prefix + " " + text


def _emit_mapping(value: dict, indent: int, lines: list[str], prefix: str) -> None:
    for index, key in enumerate(_sorted_keys(value)):
        if "\n" in key:  # yaml.v3 writes a "? |-" complex key; no scrape config has one
            raise PrometheusError("mapping key %s has a line break; rename it" % _double(key))
        key_text = _scalar(key, simple_key=True)
        head = (prefix if index == 0 and prefix else " " * indent) + key_text + ":"
        child = value[key]
        if isinstance(child, (dict, list)) and child:
            lines.append(head)
            _emit_node(child, _next_indent(indent, False), lines, "", in_seq=False)
        else:
            _emit_scalar(child, lines, head, _next_indent(indent, False))


def _emit_sequence(value: list, indent: int, lines: list[str], prefix: str) -> None:
    """Items at indent ("- "); with a "- " prefix the first item shares its line, as yaml.v3's."""
    for index, item in enumerate(value):
        dash = (prefix if index == 0 and prefix else " " * indent) + "- "
        inner = indent + 2
        if isinstance(item, dict) and item:
            _emit_mapping(item, inner, lines, dash)
        elif isinstance(item, list) and item:
            _emit_sequence(item, inner, lines, dash)
        else:
            _emit_scalar(item, lines, dash, _next_indent(indent, True))


def _sorted_keys(mapping: dict) -> list:
    import functools

    if isinstance(mapping, Ordered):
        return list(mapping)

    return sorted(mapping, key=functools.cmp_to_key(_key_cmp))


def _key_cmp(left: str, right: str) -> int:
    """A three-way comparison from _key_less, for sorted()."""
    if _key_less(left, right):
        return -1
    return 1 if _key_less(right, left) else 0


def _key_less(a: str, b: str) -> bool:
    """sorter.go keyList.Less for string keys: letters by code point, digit runs by value (Go's
    unicode.IsDigit is Python's isdecimal; a digit counts as rune - '0', as in Go)."""
    digits = False
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            digits = a[i].isdecimal()
            continue
        al, bl = a[i].isalpha(), b[i].isalpha()
        if al and bl:
            return a[i] < b[i]
        if al or bl:
            return al if digits else bl
        an = bn = 0
        if a[i] == "0" or b[i] == "0":
            j = i - 1
            while j >= 0 and a[j].isdecimal():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdecimal():
            an, ai = an * 10 + (ord(a[ai]) - 48), ai + 1
        bi = i
        while bi < len(b) and b[bi].isdecimal():
            bn, bi = bn * 10 + (ord(b[bi]) - 48), bi + 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return a[i] < b[i]
    return len(a) < len(b)


def go_atom(value: Any) -> str | None:
    """null, true / false or an integer's digits: the same text in Go's YAML and JSON; None for other values."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return None


def _scalar(value: Any, simple_key: bool) -> Any:
    """The text of a scalar, or [header, lines] for a literal block."""
    atom = go_atom(value)
    if atom is not None:
        return atom
    if isinstance(value, float):
        return go_float_text(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _string(str(value), simple_key)


def go_float_text(value: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64) as yaml.v3 writes it (.inf, -.inf, .nan)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    digits, exponent = shortest(value)
    exp = exponent - 1  # digits = d.ddd x 10^exp; Go's shortest 'g' switches to %e at exp >= 6
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = "%se%s%02d" % (mantissa, "-" if exp < 0 else "+", abs(exp))
    elif exp < 0:
        text = "0." + "0" * (-exp - 1) + digits
    elif exp + 1 >= len(digits):
        text = digits + "0" * (exp + 1 - len(digits))
    else:
        text = digits[:exp + 1] + "." + digits[exp + 1:]
    return ("-" if value < 0 else "") + text


def shortest(value: float) -> tuple[str, int]:
    """The shortest decimal digits of abs(value) and the decimal point position (Go's digs.dp)."""
    text = repr(abs(value))
    if "e" in text:
        mant, exp = text.split("e")
        exp_i = int(exp)
    else:
        mant, exp_i = text, 0
    whole, _x, frac = mant.partition(".")
    frac = frac.rstrip("0")
    digits = (whole + frac).lstrip("0")
    lead = len(whole + frac) - len((whole + frac).lstrip("0"))
    point = len(whole) - lead + exp_i
    digits = digits.rstrip("0") or "0"
    return digits, point


def _string(text: str, simple_key: bool) -> Any:
    style = "plain"
    resolved = resolve_plain(text)
    if "\n" in text:
        style = "literal"
    # type(...) is str, not isinstance: a Timestamp (a str subclass) must be quoted
    elif not (type(resolved) is str and not _BASE60.match(text) and text not in _OLD_BOOL):  # pylint: disable=unidiomatic-typecheck
        style = "double"
    if text == "" and style == "plain":
        style = "double"
    allowed = _analyze(text)
    if simple_key and allowed["multiline"]:
        style = "double"
    if style == "plain" and (not allowed["block_plain"] or (not text and simple_key)):
        style = "single"
    if style == "single" and not allowed["single"]:
        style = "double"
    if style == "literal" and (not allowed["block"] or simple_key):
        style = "double"
    if style == "plain":
        return text
    if style == "single":
        return "'" + text.replace("'", "''") + "'"
    if style == "double":
        return _double(text)
    return _literal(text)


def _printable(ch: str) -> bool:
    code = ord(ch)
    return (code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0x7E or code == 0x85 or 0xA0 <= code <= 0xD7FF
            or 0xE000 <= code <= 0xFFFD and code != 0xFEFF or 0x10000 <= code <= 0x10FFFF)


def _analyze(text: str) -> dict:
    """yaml_emitter_analyze_scalar: which styles can carry text."""
    if not text:
        return {"multiline": False, "block_plain": True, "single": True, "block": False}
    block_ind = text.startswith(("---", "..."))
    breaks = special = tabs = lead_space = lead_break = trail_space = trail_break = False
    break_space = space_break = prev_space = prev_break = False
    preceded_ws = True
    for i, ch in enumerate(text):
        followed_ws = i + 1 >= len(text) or text[i + 1] in " \t\r\n\x85\u2028\u2029"
        if i == 0:
            if ch in _INDICATOR_FIRST or (ch in "?:-" and followed_ws):
                block_ind = True
        elif (ch == ":" and followed_ws) or (ch == "#" and preceded_ws):
            block_ind = True
        if ch == "\t":
            tabs = True
        elif not _printable(ch):
            special = True
        if ch == " ":
            lead_space = lead_space or i == 0
            trail_space = trail_space or i == len(text) - 1
            break_space = break_space or prev_break
            prev_space, prev_break = True, False
        elif ch in "\r\n\x85\u2028\u2029":
            breaks = True
            lead_break = lead_break or i == 0
            trail_break = trail_break or i == len(text) - 1
            space_break = space_break or prev_space
            prev_space, prev_break = False, True
        else:
            prev_space = prev_break = False
        preceded_ws = ch in " \t\r\n\x85\u2028\u2029"
    block_plain = not (lead_space or lead_break or trail_space or trail_break or break_space
                       or space_break or tabs or special or breaks or block_ind)
    single = not (break_space or space_break or tabs or special)
    block = not (trail_space or space_break or special)
    return {"multiline": breaks, "block_plain": block_plain, "single": single, "block": block}


_ESCAPES = {"\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
            "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P"}


def _double(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES or not _printable(ch) or ch == "\ufeff":
            code = ord(ch)
            out.append("\\" + _ESCAPES[ch] if ch in _ESCAPES else
                       "\\x%02X" % code if code <= 0xFF else "\\u%04X" % code if code <= 0xFFFF else "\\U%08X" % code)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _literal(text: str) -> list:
    """A literal block as yaml.v3 writes it: the line break a value starts with is lost (go-yaml v3.0.1
    writes the header's break and the value's first break as one), so maand's output drops it too."""
    header = "|"
    if text[:1] in (" ", "\n"):
        header += "4"
    if not text.endswith("\n"):
        header += "-"
    elif text.endswith("\n\n") or len(text) == 1:
        header += "+"
    body = text[1:] if text.startswith("\n") else text
    if not body:
        return [header, []]
    return [header, (body[:-1] if body.endswith("\n") else body).split("\n")]


def v3_copy(value: Any) -> Any:
    """maand's deepCopyMap (yaml.Marshal then Unmarshal): a string written as a literal block that
    starts with a line break comes back without it (see _literal); everything else is kept."""
    if isinstance(value, dict):
        return {k: v3_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v3_copy(v) for v in value]
    if isinstance(value, str) and value.startswith("\n") and isinstance(_string(value, False), list):
        return value[1:]
    return value

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse the bucket's JSON and TOML text defensively: what Go's encoding/json and go-toml refuse is
refused here too, with the field that holds it.

- NaN, Infinity and -Infinity (not JSON; Python accepts them) and numbers that overflow a float64
  (1e400) are refused, naming their JSON path; integers are bounded by the schemas where maand reads
  an int (Go's json fails those; it reads other numbers as float64);
- nesting deeper than MAX_DEPTH levels is refused (a 200,000-deep document would otherwise end in a
  RecursionError somewhere later);
- TOML nan/inf and huge integers likewise.

Pure Python, no Ansible imports. Each function raises InputError(field, message, fix).
"""

from __future__ import annotations

import json
import math
import os
import threading
import tomllib

from ..errors import MaandError

MAX_DEPTH = 64
MAX_FILE_BYTES = 32 << 20
INT64 = 1 << 63


class InputError(MaandError):
    def __init__(self, field, message, fix):
        super().__init__(message, field=field, fix=fix)
        self.message = message


class _Bad(str):
    """Stands for a refused number literal until the walk finds where it is."""


def read_bytes(path, limit=None):
    """The file's bytes; InputError if it is larger than limit (OSError passes through)."""
    limit = MAX_FILE_BYTES if limit is None else limit
    with open(path, "rb") as handle:
        # read(limit + 1) would allocate limit bytes for every small file: ask for the size first
        # (a file of unknown size, st_size 0, or one that grew meanwhile is read on up to the limit)
        size = os.fstat(handle.fileno()).st_size
        want = min(size, limit) + 1 if size else limit + 1
        raw = handle.read(want)
        if len(raw) == want and want <= limit:
            raw += handle.read(limit + 1 - want)
    if len(raw) > limit:
        raise InputError("", "the file is larger than %d MiB" % (limit >> 20), "keep it under %d MiB" % (limit >> 20))
    return raw


_SEEN = threading.local()  # set when a hook met a refused literal during the current parse


def _constant(text):
    _SEEN.bad = True
    return _Bad(text)


def _float(text):
    value = float(text)
    return value if math.isfinite(value) else _constant(text)


# One decoder for every file (json.loads with hooks would build a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def parse_json(text, max_depth=MAX_DEPTH, check_depth=True):
    """json.loads with Go's limits. check_depth=False skips the depth walk (for large files whose
    shape a schema bounds; call check_nesting on their free-form parts)."""
    _SEEN.bad = False
    try:
        document = _DECODER.decode(text)
    except RecursionError:
        raise InputError("", "nesting is too deep to read", "flatten the document (at most %d levels)" % max_depth)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        # int() of more than sys.get_int_max_str_digits() digits
        raise InputError("", "a number is out of range: %s" % exc, "write numbers in range (64-bit)")
    if _SEEN.bad:
        _raise_bad(document, "JSON")
    if check_depth and text.count("[") + text.count("{") >= max_depth:  # fewer brackets cannot nest too deep
        check_nesting(document, max_depth)
    return document


def parse_toml(text, max_depth=MAX_DEPTH):
    _SEEN.bad = False
    try:
        document = tomllib.loads(text, parse_float=lambda t: _float(t.replace("_", "")))
    except RecursionError:
        raise InputError("", "nesting is too deep to read", "flatten the document (at most %d levels)" % max_depth)
    for path, value in _walk(document, max_depth):
        if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
            raise InputError(path, "integer %d is out of range (maand reads 64-bit integers)" % value,
                             "use a smaller number")
    if _SEEN.bad:
        _raise_bad(document, "TOML")
    return document


def check_nesting(value, max_depth=MAX_DEPTH, prefix="", start=1):
    """InputError naming the path when value nests deeper than max_depth. Walks containers only.
    `start` is the level of value in its document (1: value is the document)."""
    stack = [(value, start)]
    while stack:
        item, depth = stack.pop()
        # as _walk counts: a value inside a container at max_depth (a leaf included) is past the limit
        if depth > max_depth or (depth == max_depth and isinstance(item, (dict, list)) and item):
            for dummy in _walk(value, max_depth, prefix, start):  # the slow walk, only to name the path
                pass
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))


def _walk(value, max_depth, prefix="", start=1):
    """Yield (json path, leaf value); InputError past max_depth. Iterative: safe on any depth."""
    stack = [(prefix, value, start)]
    while stack:
        path, item, depth = stack.pop()
        if depth > max_depth:
            raise InputError(path, "nested deeper than %d levels" % max_depth, "flatten this value")
        if isinstance(item, dict):
            stack.extend(("%s.%s" % (path, k) if path else str(k), v, depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(("%s[%d]" % (path, i), v, depth + 1) for i, v in enumerate(item))
        else:
            yield path, item


def _raise_bad(document, fmt):
    for path, leaf in _walk(document, 10 ** 9):
        if isinstance(leaf, _Bad):
            what = "%s is not a number %s allows" % (leaf, "JSON" if fmt == "JSON" else "maand")
            if leaf.lower().lstrip("+-") not in ("nan", "infinity", "inf"):
                what = "number %s is out of range (maand reads 64-bit numbers)" % (leaf if len(leaf) <= 24 else
                                                                                   leaf[:21] + "...")
            raise InputError(path or "$", what, "write a finite number in range, e.g. 512")
    raise InputError("$", "a number is out of range", "write finite numbers in range")  # not reached


# --- Go's encoding/json syntax errors (scanner.go), for maand's wording of a bad file ---------------

_SPACE = b" \t\r\n"
_ESCAPES = b'bfnrt\\/"'
_HEX = b"0123456789abcdefABCDEF"
_DIGITS = b"0123456789"


def _go_quote_char(c):
    """Go's quoteChar: the byte as a quoted character ('\\'' for a quote)."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    text = json.dumps(chr(c))[1:-1] if c < 0x80 else chr(c)
    if c < 0x20 or c == 0x7F:
        named = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}
        text = named.get(c, "\\x%02x" % c)
    return "'%s'" % text


class _GoSyntax(MaandError):
    def __init__(self, message, offset):
        super().__init__(message)
        self.message, self.offset = message, offset


class _GoScanner:
    """A port of Go's JSON scanner (encoding/json/scanner.go, BSD licence) that only finds the first
    syntax error and words it as Go does."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def fail(self, c, context):
        raise _GoSyntax("invalid character %s %s" % (_go_quote_char(c), context), self.pos)

    def peek(self):
        """The next byte, or ' ' at the end (Go's eof() steps a space through the scanner)."""
        if self.pos >= len(self.data):
            raise _GoSyntax("unexpected end of JSON input", self.pos)
        return self.data[self.pos]

    def skip_space(self):
        while self.pos < len(self.data) and self.data[self.pos] in _SPACE:
            self.pos += 1

    def check(self):
        self.value()
        self.skip_space()
        if self.pos < len(self.data):
            self.fail(self.data[self.pos], "after top-level value")

    def value(self, context="looking for beginning of value"):
        self.skip_space()
        c = self.peek()
        if c == 0x7B:
            self.pos += 1
            self.object()
        elif c == 0x5B:
            self.pos += 1
            self.array()
        elif c == 0x22:
            self.pos += 1
            self.string()
        elif c == 0x2D or c in _DIGITS:
            self.number()
        elif c in b"tfn":
            self.literal({0x74: b"true", 0x66: b"false", 0x6E: b"null"}[c])
        else:
            self.fail(c, context)

    def object(self):
        self.skip_space()
        if self.peek() == 0x7D:
            self.pos += 1
            return
        while True:
            self.skip_space()
            c = self.peek()
            if c != 0x22:
                self.fail(c, "looking for beginning of object key string")
            self.pos += 1
            self.string()
            self.skip_space()
            c = self.peek()
            if c != 0x3A:
                self.fail(c, "after object key")
            self.pos += 1
            self.value()
            self.skip_space()
            c = self.peek()
            self.pos += 1
            if c == 0x7D:
                return
            if c != 0x2C:
                self.pos -= 1
                self.fail(c, "after object key:value pair")

    def array(self):
        self.skip_space()
        if self.peek() == 0x5D:
            self.pos += 1
            return
        while True:
            self.value()
            self.skip_space()
            c = self.peek()
            self.pos += 1
            if c == 0x5D:
                return
            if c != 0x2C:
                self.pos -= 1
                self.fail(c, "after array element")

    def string(self):
        while True:
            c = self.peek()
            self.pos += 1
            if c == 0x22:
                return
            if c == 0x5C:
                e = self.peek()
                if e == 0x75:
                    self.pos += 1
                    for _n in range(4):
                        h = self.peek()
                        if h not in _HEX:
                            self.fail(h, "in \\u hexadecimal character escape")
                        self.pos += 1
                elif e in _ESCAPES:
                    self.pos += 1
                else:
                    self.fail(e, "in string escape code")
            elif c < 0x20:
                self.pos -= 1
                self.fail(c, "in string literal")

    def _next_or_space(self):
        return self.data[self.pos] if self.pos < len(self.data) else 0x20

    def number(self):
        if self.data[self.pos] == 0x2D:
            self.pos += 1
            c = self._next_or_space()
            if c not in _DIGITS:
                self.fail(c, "in numeric literal")
        if self.data[self.pos] == 0x30:
            self.pos += 1
        else:
            while self._next_or_space() in _DIGITS:
                self.pos += 1
        if self._next_or_space() == 0x2E:
            self.pos += 1
            c = self._next_or_space()
            if c not in _DIGITS:
                self.fail(c, "after decimal point in numeric literal")
            while self._next_or_space() in _DIGITS:
                self.pos += 1
        if self._next_or_space() in b"eE":
            self.pos += 1
            if self._next_or_space() in b"+-":
                self.pos += 1
            c = self._next_or_space()
            if c not in _DIGITS:
                self.fail(c, "in exponent of numeric literal")
            while self._next_or_space() in _DIGITS:
                self.pos += 1

    def literal(self, word):
        self.pos += 1
        for expected in word[1:]:
            c = self._next_or_space()
            if c != expected:
                self.fail(c, "in literal %s (expecting %s)" % (word.decode(), _go_quote_char(expected)))
            self.pos += 1


def go_json_error(data):
    """Go's json.Unmarshal syntax error text for data (bytes or str), with its byte offset, or None when
    Go's scanner accepts it (a depth beyond Go's 10,000 levels is not checked)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    try:
        _GoScanner(data).check()
    except _GoSyntax as exc:
        return exc.message, exc.offset
    except RecursionError:
        return None
    return None

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""RFC 29 hostlists: "foo[1-3,7]-ib,bar" <-> ["foo1-ib", "foo2-ib", ...].

Pure Python, stdlib only (python-hostlist was evaluated and rejected: it fails
RFC 29's own test vectors, see docs/constraints.md).

RFC 29 in short:
  hostlist   = expression ("," expression)*      commas outside brackets
  expression = prefix? ("[" idlist "]")? suffix?  ONE bracket group at most
  idlist     = id-or-range ("," id-or-range)*    e.g. 5,4,11-13
  prefix/suffix: printable non-whitespace ASCII except "[", "]" and ",".
  The result is an ORDERED list; duplicates are kept ("foo[1,1]" -> foo1,foo1).
  Leading zeros of the FIRST id of an idlist set the width of every id:
  "[005,4,11-13]" -> 005,004,011,012,013 and "[00-2]" -> 00,01,02.
  The empty string is the empty list.

Where we are stricter than the RFC (each is almost always a typo, and the
error says how to fix it):
  * an empty expression inside a list ("a,,b", ",a", "a,") is an error; only
    the whole string "" means the empty list;
  * an id other than the first that has leading zeros of a different width
    than the first ("n[1,05]", "n[001-02]") is an error: the RFC would
    silently re-pad it, which is not what the writer meant;
  * a range of more than MAX_RANGE ids is an error (as in flux-core).
"""

from __future__ import annotations

from typing import Iterable

from ..errors import MaandError

__all__ = ["HostlistError", "expand_hostlist", "compress_hostlist", "MAX_RANGE"]

MAX_RANGE = 1 << 20


class HostlistError(MaandError):
    """A string that is not an RFC 29 hostlist; str(err) says what and where."""


def _check_affix(part: str, text: str) -> None:
    for ch in part:
        if ch == "]":
            raise HostlistError(f"unbalanced brackets in '{text}': ']' without an opening '['")
        if ch == "[":
            raise HostlistError(
                f"more than one bracket group in '{text}': RFC 29 allows one [idlist] per "
                "hostname expression (write separate expressions joined by ',')")
        if not ("!" <= ch <= "~"):  # printable, non-whitespace ASCII
            what = "whitespace" if ch.isspace() else f"character {ch!r}"
            raise HostlistError(f"{what} not allowed in hostlist '{text}': hostnames are printable ASCII without spaces")


def _split_top(text: str) -> list[str]:
    """Split on commas that are outside brackets; check bracket balance."""
    parts, depth, start = [], 0, 0
    for pos, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise HostlistError(f"unbalanced brackets in '{text}': '[' inside '[...]' at position {pos}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"unbalanced brackets in '{text}': ']' without an opening '[' at position {pos}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(text[start:pos])
            start = pos + 1
    if depth:
        raise HostlistError(f"unbalanced brackets in '{text}': '[' without a closing ']'")
    parts.append(text[start:])
    return parts


def _has_leading_zero(digits: str) -> bool:
    return len(digits) > 1 and digits[0] == "0"


def _expand_idlist(idlist: str, expr: str, text: str) -> list[str]:
    """Expand the inside of one [...] into zero-padded id strings, in order."""
    if idlist == "":
        raise HostlistError(f"empty brackets '[]' in '{expr}': put ids inside, e.g. [1-3]")
    width = None  # set by the first id (RFC 29)
    out: list[str] = []
    for elem in idlist.split(","):
        if elem == "":
            raise HostlistError(f"empty element in '[{idlist}]' of '{expr}' (a stray ',')")
        lo_s, dash, hi_s = elem.partition("-")
        for tok in (lo_s, hi_s) if dash else (lo_s,):
            if not tok.isdigit() or not tok.isascii():
                if tok == "" or (dash and "-" in hi_s):
                    raise HostlistError(f"malformed range '{elem}' in '{expr}': a range is START-END, e.g. 1-3")
                raise HostlistError(f"non-numeric id '{tok}' in '{expr}': ids in [...] are non-negative integers")
            if width is None:
                width = len(tok) if _has_leading_zero(tok) else 1
            elif _has_leading_zero(tok) and len(tok) != width:
                raise HostlistError(
                    f"inconsistent zero padding '{tok}' in '{expr}': the first id of the list sets the "
                    f"width ({width}) for all ids (RFC 29); pad every id alike")
        lo = int(lo_s)
        hi = int(hi_s) if dash else lo
        if lo > hi:
            raise HostlistError(f"bad range {elem} in '{expr}': the range start must not exceed its end")
        if hi - lo + 1 > MAX_RANGE:
            raise HostlistError(f"range {elem} in '{expr}' is too large (more than {MAX_RANGE} hosts)")
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand_hostlist(text: str) -> list[str]:
    """Expand an RFC 29 hostlist string into the ordered list of host names.

    >>> expand_hostlist("foo[0-1]-eth2,bar")
    ['foo0-eth2', 'foo1-eth2', 'bar']

    Raises HostlistError (a MaandError) with a message naming the problem.
    """
    if not isinstance(text, str):
        raise HostlistError(f"a hostlist must be a string such as \"node[1-3]\", got {type(text).__name__}")
    if text == "":
        return []
    hosts: list[str] = []
    for expr in _split_top(text):
        if expr == "":
            raise HostlistError(f"empty element in hostlist '{text}' (a stray ',')")
        prefix, bracket, rest = expr.partition("[")
        _check_affix(prefix, text)
        if not bracket:
            hosts.append(expr)
            continue
        idlist, dummy, suffix = rest.partition("]")  # balance already checked
        _check_affix(suffix, text)
        hosts.extend(prefix + i + suffix for i in _expand_idlist(idlist, expr, text))
    return hosts


def _split_host(host: str) -> tuple[str, str, str]:
    """'node07-ib' -> ('node', '07', '-ib'): split at the LAST run of digits."""
    end = len(host)
    while end and not host[end - 1].isdigit():
        end -= 1
    start = end
    while start and host[start - 1].isdigit():
        start -= 1
    return host[:start], host[start:end], host[end:]


def compress_hostlist(hosts: Iterable[str]) -> str:
    """Inverse of expand_hostlist: expand_hostlist(compress_hostlist(h)) == list(h).

    Order and duplicates are kept, so only ADJACENT hosts that differ in their
    last number are merged: ["n1", "n2", "n3", "x", "n5"] -> "n[1-3],x,n5".
    Raises HostlistError for a name that a hostlist cannot hold.
    """
    groups: list[list] = []  # [prefix, suffix, width, [ids]]
    for host in hosts:
        if not isinstance(host, str) or host == "":
            raise HostlistError(f"cannot put {host!r} in a hostlist: host names are non-empty strings")
        for ch in host:
            if ch in "[]," or not ("!" <= ch <= "~"):
                raise HostlistError(f"cannot put '{host}' in a hostlist: character {ch!r} is not allowed")
        prefix, digits, suffix = _split_host(host)
        if not digits:
            groups.append([host, "", 0, None])
            continue
        n = int(digits)
        last = groups[-1] if groups else None
        # A host joins the previous group only if re-expanding with the group's
        # width reproduces its digits exactly (so "n5" never joins "n[01-04]").
        if (last is not None and last[3] is not None and last[0] == prefix and last[1] == suffix
                and str(n).zfill(last[2]) == digits):
            last[3].append(n)
        else:
            groups.append([prefix, suffix, len(digits) if _has_leading_zero(digits) else 1, [n]])
    out = []
    for prefix, suffix, width, ids in groups:
        if ids is None:
            out.append(prefix)
        elif len(ids) == 1:
            out.append(f"{prefix}{str(ids[0]).zfill(width)}{suffix}")
        else:
            out.append(f"{prefix}[{_format_ids(ids, width)}]{suffix}")
    return ",".join(out)


def _format_ids(ids: list[int], width: int) -> str:
    """Ordered ids (duplicates allowed) -> "1-3,3,7": ascending +1 runs become ranges."""
    parts = []
    lo = prev = ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        a, b = str(lo).zfill(width), str(prev).zfill(width)
        parts.append(a if lo == prev else f"{a}-{b}")
        if i is not None:
            lo = prev = i
    return ",".join(parts)

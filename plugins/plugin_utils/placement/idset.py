# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""RFC 22 idset strings: "0-3,7" <-> [0, 1, 2, 3, 7].

Pure Python, stdlib only. Used by the `ranks` constraint operator (RFC 31).

Grammar accepted (RFC 22): optional surrounding "[...]", then comma-separated
elements, each either a decimal id "7" or an inclusive range "0-3". Only the
characters 0-9 , - [ ] are allowed (no whitespace). The empty string and "[]"
are the empty set.

Deliberate leniency (the meaning stays unambiguous): RFC 22 says an idset
string lists ids in ascending order, without duplicates or leading zeros. We
accept "5,1", "1-5,3-7" and "007" (the result is always sorted and unique)
because rejecting them would only annoy; everything else that the RFC does not
allow is an IdsetError.
"""

from __future__ import annotations

from typing import Iterable

from ..errors import MaandError

__all__ = ["IdsetError", "parse_idset", "parse_idset_ranges", "format_idset", "MAX_IDS"]

# A range larger than this is almost certainly a typo, and expanding it would
# eat memory (flux-core rejects [0-1048576] the same way).
MAX_IDS = 1 << 20

_ALLOWED = frozenset("0123456789,-[]")


class IdsetError(MaandError):
    """A string that is not an RFC 22 idset; str(err) says what and where."""


def parse_idset_ranges(text: str) -> list[tuple[int, int]]:
    """Parse an idset string into its inclusive (lo, hi) ranges, in input order.

    Raises IdsetError. Does not expand, so huge ranges cost nothing here.
    """
    if not isinstance(text, str):
        raise IdsetError(f"an idset must be a string such as \"0-3,7\", got {type(text).__name__}")
    body = text
    if body.startswith("["):
        if not body.endswith("]") or len(body) < 2:
            raise IdsetError(f"unbalanced brackets in idset '{text}': '[' without a closing ']'")
        body = body[1:-1]
    elif body.endswith("]"):
        raise IdsetError(f"unbalanced brackets in idset '{text}': ']' without an opening '['")
    for ch in body:
        if ch in "[]":
            raise IdsetError(f"unbalanced brackets in idset '{text}': only one pair surrounding the whole idset is allowed")
        if ch not in _ALLOWED:
            what = "whitespace" if ch.isspace() else f"character {ch!r}"
            raise IdsetError(f"{what} not allowed in idset '{text}': only digits, ',', '-' and surrounding '[ ]' (RFC 22)")
    if body == "":
        return []
    ranges = []
    for elem in body.split(","):
        if elem == "":
            raise IdsetError(f"empty element in idset '{text}' (a stray ',')")
        lo_s, dash, hi_s = elem.partition("-")
        if lo_s == "" and dash:
            raise IdsetError(f"negative or malformed id '{elem}' in idset '{text}': ids are non-negative integers")
        if dash and (hi_s == "" or "-" in hi_s):
            raise IdsetError(f"malformed range '{elem}' in idset '{text}': a range is START-END, e.g. 0-3")
        lo = int(lo_s)
        hi = int(hi_s) if dash else lo
        if lo > hi:
            raise IdsetError(f"bad range {elem} in idset '{text}': the range start must not exceed its end")
        ranges.append((lo, hi))
    return ranges


def parse_idset(text: str) -> list[int]:
    """Parse an RFC 22 idset string into a sorted list of unique ints.

    >>> parse_idset("[0-3,7]")
    [0, 1, 2, 3, 7]
    """
    ranges = parse_idset_ranges(text)
    ids: set[int] = set()
    for lo, hi in ranges:
        if hi - lo + 1 > MAX_IDS:
            raise IdsetError(f"range {lo}-{hi} in idset '{text}' is too large (more than {MAX_IDS} ids)")
        ids.update(range(lo, hi + 1))
        if len(ids) > MAX_IDS:
            raise IdsetError(f"idset '{text}' is too large (more than {MAX_IDS} ids)")
    return sorted(ids)


def format_idset(ids: Iterable[int]) -> str:
    """Format ids as a canonical RFC 22 string: ascending, unique, runs of two
    or more consecutive ids as "lo-hi", no brackets. [] -> "".
    """
    ids = list(ids)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise IdsetError(f"an idset holds non-negative integers, got {i!r}")
    out = []
    run_lo = run_hi = None
    for i in sorted(set(ids)):
        if run_hi is not None and i == run_hi + 1:
            run_hi = i
            continue
        if run_lo is not None:
            out.append(str(run_lo) if run_lo == run_hi else f"{run_lo}-{run_hi}")
        run_lo = run_hi = i
    if run_lo is not None:
        out.append(str(run_lo) if run_lo == run_hi else f"{run_lo}-{run_hi}")
    return ",".join(out)

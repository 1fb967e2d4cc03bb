# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""RFC 31 job constraints, compiled once and evaluated as int bitsets.

Pure Python, stdlib only. See docs/constraints.md for the manifest syntax.

    index = FleetIndex(workers)            # once per build
    c = compile_constraint(job["constraints"], "jobs.api.constraints")
    ok = c.mask(index)                     # bit i set = workers[i] matches
    c.explain(index, i)                    # why workers[i] does not match ([] if it does)

A set of workers is a Python int: bit i = the worker at list index i of the
`workers` given to FleetIndex (workers.json order). and = &, or = |,
not = all_mask & ~x. Big-int ops on 10,000 bits take about a microsecond, so
a thousand constraints evaluate in milliseconds.

RFC 31 rules followed (and where the RFC leaves a choice, ours):
  * A constraint is an object with exactly ONE operator (RFC 31's
    `{"operator": [values]}`; flux-core rejects more: "constraint must only
    contain 1 element"). Several keys are an error that says to use "and".
  * {} , {"and": []}, {"or": []} match every worker; {"not": []} matches none.
  * {"not": [a, b]} is not(a and b) (flux-core does the same; the RFC shows one value).
  * {"properties": []} matches every worker (no property required);
    {"hostlist": []} and {"ranks": []} match no worker (an empty set of
    allowed hosts / ranks, as in flux-core).
  * A `properties` value starting with "^" requires the property to be absent.
  * `null` as the whole constraint (an empty YAML key) means no constraint.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from bisect import bisect_left, bisect_right
from typing import Any, Iterable, Mapping

from .hostlist import HostlistError, expand_hostlist
from .idset import IdsetError, parse_idset_ranges
from ..errors import MaandError

__all__ = ["ConstraintError", "Constraint", "FleetIndex", "compile_constraint",
           "worker_properties", "properties_of", "OPERATORS"]

OPERATORS = ("and", "hostlist", "not", "or", "properties", "ranks")

# Characters flux-core refuses in property names (RFC 20 query syntax), plus
# whitespace; "^" only as the first character (negation).
_BAD_PROPERTY_CHARS = set("!&'\"`|()^")
_BAD_PROPERTY_RE = re.compile(r"[!&'\"`|()^\s]")


class ConstraintError(MaandError):
    """All problems found in one constraint: .errors is [(json_path, message)]."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = list(errors)
        super().__init__("\n".join(f"{p}: {m}" for p, m in self.errors))


def _bits_to_int(indices: Iterable[int], n: int) -> int:
    """Bit positions -> int, in O(n/8 + len(indices)) rather than one big-int OR per bit."""
    buf = bytearray((n + 7) >> 3)
    for i in indices:
        buf[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buf, "little")


def worker_properties(worker: Mapping[str, Any]) -> frozenset[str]:
    """A worker's RFC 31 properties: its labels plus "key=value" per tag, all lower-cased.

    Both tag key and value are lower-cased: constraint property names are
    compared case-insensitively, so a tag value kept in upper case could never
    be matched.
    """
    return properties_of(worker.get("labels"), worker.get("tags"))


def properties_of(labels: Iterable[Any] | None, tags: Mapping[str, Any] | None) -> frozenset[str]:
    """worker_properties from a worker's labels and tags."""
    props = {str(label).lower() for label in (labels or ())}
    if tags:
        props.update(f"{key}={value}".lower() for key, value in tags.items())  # = lower(key) "=" lower(value)
    return frozenset(props)


class FleetIndex:
    """Bitset index over a list of workers (bit i = workers[i]).

    Each worker is a mapping with `host` (str), optional `hostname` (str or
    None), `position` (int; defaults to the list index), `labels` (iterable of
    str) and `tags` (dict). Masks are built lazily and cached, so an index
    should be built once per fleet and shared by all constraints.

    The per-worker accessors (host_of, hostname_of, _properties_at) are what a
    subclass over other worker records overrides (placement/fleet.WorkerIndex reads the
    model's Worker records).
    """

    def __init__(self, workers: Iterable[Mapping[str, Any]]):
        self.workers = list(workers)
        self._setup(len(self.workers), [w.get("position", i) for i, w in enumerate(self.workers)])

    def _setup(self, size: int, positions: list) -> None:
        self.size = size
        self.all_mask = (1 << size) - 1
        self.positions: list[int] = positions
        # every index is built on first use: most fleets never see a property, hostlist or ranks
        self._props: list[frozenset[str]] | None = None
        self._prop_idx: dict[str, list[int]] | None = None
        self._host_idx: dict[str, list[int]] | None = None
        self._rank_idx: dict[int, list[int]] | None = None
        self._prop_cache: dict[str, int] = {}
        self._host_cache: dict[Any, int] = {}
        self._rank_cache: dict[Any, int] = {}
        self._pos_sorted = None
        self._pos_keys: list[int] = []
        self._pos_runs = False
        self._group_cache: dict[tuple, int] = {}

    # --- per-worker data ---------------------------------------------------------------------

    def host_of(self, i: int) -> Any:
        return self.workers[i].get("host")

    def hostname_of(self, i: int) -> Any:
        return self.workers[i].get("hostname")

    def _properties_at(self, i: int) -> frozenset[str]:
        return worker_properties(self.workers[i])

    # --- indexes -----------------------------------------------------------------------------

    def _property_index(self) -> dict[str, list[int]]:
        if self._prop_idx is None:
            self._props = [self._properties_at(i) for i in range(self.size)]
            prop_idx: dict[str, list[int]] = {}
            for i, props in enumerate(self._props):
                for p in props:
                    idx = prop_idx.get(p)
                    if idx is None:
                        prop_idx[p] = [i]
                    else:
                        idx.append(i)
            self._prop_idx = prop_idx
        return self._prop_idx

    def group_mask(self, name: str, group: "Constraint") -> int:
        """A named group's mask, evaluated once per fleet however many jobs use it."""
        key = (name, id(group))
        m = self._group_cache.get(key)
        if m is None:
            m = self._group_cache[key] = group.mask(self)
        return m

    def properties_of(self, i: int) -> frozenset[str]:
        self._property_index()
        return self._props[i]

    def host_names_of(self, i: int) -> tuple[str, ...]:
        """The lower-cased names a hostlist can match for workers[i]: host, then hostname."""
        return tuple(str(x).lower() for x in (self.host_of(i), self.hostname_of(i)) if x)

    def property_mask(self, name: str) -> int:
        m = self._prop_cache.get(name)
        if m is None:
            m = self._prop_cache[name] = _bits_to_int(self._property_index().get(name.lower(), ()), self.size)
        return m

    def host_mask(self, names: Iterable[str]) -> int:
        """Workers whose host or hostname (case-insensitive) is one of names."""
        key = names if isinstance(names, (tuple, frozenset)) else None
        m = self._host_cache.get(key) if key is not None else None
        if m is None:
            idx = self._host_idx
            if idx is None:
                idx = self._host_idx = {}
                for i in range(self.size):
                    own_names = {str(self.host_of(i) or "").lower(), str(self.hostname_of(i) or "").lower()}
                    for name in own_names:
                        if name:
                            idx.setdefault(name, []).append(i)
            m = _bits_to_int((i for nm in names for i in idx.get(nm.lower(), ())), self.size)
            if key is not None:
                self._host_cache[key] = m
        return m

    def rank_mask(self, ids: Iterable[int]) -> int:
        """Workers whose `position` is one of ids."""
        idx = self._rank_idx
        if idx is None:
            idx = self._rank_idx = {}
            for i, pos in enumerate(self.positions):
                idx.setdefault(pos, []).append(i)
        return _bits_to_int((i for r in ids for i in idx.get(r, ())), self.size)

    def rank_ranges_mask(self, ranges: tuple[tuple[int, int], ...]) -> int:
        """Workers whose `position` lies in one of the inclusive (lo, hi) ranges.

        Cost is O(log n + matches) per range, whatever the range's size, so
        "0-1000000" is as cheap as "0"; cached by the ranges tuple.
        """
        m = self._rank_cache.get(ranges)
        if m is None:
            if self._pos_sorted is None:
                self._pos_sorted = sorted((p, i) for i, p in enumerate(self.positions) if isinstance(p, int))
                self._pos_keys = [p for p, dummy in self._pos_sorted]
                # Usual case (workers listed by position): the k-th smallest position is bit k, so a
                # range of positions is a contiguous run of bits: two shifts instead of one op per worker.
                self._pos_runs = all(i == k for k, (dummy, i) in enumerate(self._pos_sorted))
            ps, keys = self._pos_sorted, self._pos_keys
            if self._pos_runs:
                m = 0
                for lo, hi in ranges:
                    a, b = bisect_left(keys, lo), bisect_right(keys, hi)
                    m |= ((1 << b) - 1) ^ ((1 << a) - 1)
            else:
                sel = []
                for lo, hi in ranges:
                    sel.extend(i for dummy, i in ps[bisect_left(keys, lo):bisect_right(keys, hi)])
                m = _bits_to_int(sel, self.size)
            self._rank_cache[ranges] = m
        return m


# --- compiled nodes -------------------------------------------------------
# Each node has .path, .mask(index) -> int (bitset algebra) and
# .explain(index, i) -> [str] computed per worker WITHOUT the masks, so tests
# can check the two against each other.

class _Properties:
    def __init__(self, path, items):
        self.path = path
        self.items = items  # [(item_path, name, negated)]

    def mask(self, index):
        all_ = m = index.all_mask
        for dummy, name, neg in self.items:
            pm = index.property_mask(name)
            m &= (all_ ^ pm) if neg else pm
        return m

    def explain(self, index, i):
        props = index.properties_of(i)
        out = []
        for ipath, name, neg in self.items:
            if neg and name in props:
                out.append(f"{ipath}: property {name} present but excluded (^{name})")
            elif not neg and name not in props:
                out.append(f"{ipath}: property {name} missing")
        return out


class _Hostlist:
    def __init__(self, path, texts, hosts):
        self.path = path
        self.texts = texts            # the hostlist strings as written
        self.hosts = frozenset(hosts)  # expanded, lower-cased

    def mask(self, index):
        return index.host_mask(self.hosts)

    def explain(self, index, i):
        names = index.host_names_of(i)
        if any(n in self.hosts for n in names):
            return []
        hostname = index.hostname_of(i)
        who = f"host {index.host_of(i)}" + (f" (hostname {hostname})" if hostname else "")
        if not self.hosts:
            return [f"{self.path}: empty hostlist matches no worker ({who})"]
        return [f"{self.path}: {who} not in hostlist {', '.join(self.texts)}"]


class _Ranks:
    def __init__(self, path, texts, ranges):
        self.path = path
        self.texts = texts
        self.ranges = _merge_ranges(ranges)  # sorted, disjoint (lo, hi) tuple

    def mask(self, index):
        return index.rank_ranges_mask(self.ranges)

    def explain(self, index, i):
        pos = index.positions[i]
        if isinstance(pos, int) and any(lo <= pos <= hi for lo, hi in self.ranges):
            return []
        if not self.ranges:
            return [f"{self.path}: empty ranks match no worker (position {pos})"]
        return [f"{self.path}: position {pos} not in ranks {', '.join(self.texts)}"]


def _merge_ranges(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


class _Logic:
    """and / or / not over child constraints."""

    def __init__(self, path, children):
        self.path = path
        self.children = children

    def _all_of(self, index):
        m = index.all_mask
        for c in self.children:
            m &= c.mask(index)
        return m


class _And(_Logic):
    def mask(self, index):
        return self._all_of(index)

    def explain(self, index, i):
        return [msg for c in self.children for msg in c.explain(index, i)]


class _Or(_Logic):
    def mask(self, index):
        if not self.children:
            return index.all_mask  # RFC 31: {"or": []} matches anything
        m = 0
        for c in self.children:
            m |= c.mask(index)
        return m

    def explain(self, index, i):
        why = []
        for c in self.children:
            msgs = c.explain(index, i)
            if not msgs:
                return []
            why.extend(msgs)
        if not self.children:
            return []
        return [f"{self.path}: no alternative matched ({'; '.join(why)})"]


class _Not(_Logic):
    """not(c1 and c2 ...); {"not": []} = not(true) = matches nothing (RFC 31)."""

    def mask(self, index):
        return index.all_mask ^ self._all_of(index)

    def explain(self, index, i):
        if any(c.explain(index, i) for c in self.children):
            return []  # some operand fails, so the negation holds
        if not self.children:
            return [f"{self.path}: empty not [] matches no worker"]
        if len(self.children) == 1:
            return [f"{self.children[0].path}: matched but must not"]
        paths = ", ".join(c.path for c in self.children)
        return [f"{self.path}: all of {paths} matched but must not (not [...] negates their and)"]


class _Group:
    """maand extension: {"group": ["fast-network", ...]} = and of named, precompiled constraints
    (maand.conf [constraint_groups]). Only compiled when compile_constraint() is given `groups`,
    so plain RFC 31 input never sees it."""

    def __init__(self, path, items):
        self.path = path
        self.items = items  # [(item_path, name, Constraint)]

    def mask(self, index):
        m = index.all_mask
        for dummy, name, group in self.items:
            m &= index.group_mask(name, group)
        return m

    def explain(self, index, i):
        out = []
        for ipath, name, group in self.items:
            msgs = group.explain(index, i)
            if msgs:
                out.append(f"{ipath}: group {name} not matched ({'; '.join(msgs)})")
        return out


class Constraint:
    """A compiled constraint. .expr is the source object, .path its JSON path."""

    def __init__(self, node, expr, path):
        self._node = node
        self.expr = expr
        self.path = path

    def mask(self, index: FleetIndex) -> int:
        """Bitset of the workers in index that satisfy the constraint."""
        return self._node.mask(index)

    def explain(self, index: FleetIndex, i: int) -> list[str]:
        """Why workers[i] fails, one string per failing leaf / sub-expression,
        each starting with its JSON path; [] when the worker matches."""
        return self._node.explain(index, i)

    def matches(self, index: FleetIndex, i: int) -> bool:
        return not self._node.explain(index, i)

    def __repr__(self):
        return f"Constraint({self.expr!r}, path={self.path!r})"


# --- compilation ----------------------------------------------------------

# JSON type names for errors, first match wins (a bool is an int to isinstance)
_JSON_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (Mapping, "object"), ((list, tuple), "list"))


def _tname(v: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(v, kind)), type(v).__name__)


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


def _compile(expr, path, errors, groups=None):
    """Compile expr; on problems append (path, message) to errors and return None."""
    if not isinstance(expr, (dict, Mapping)):  # dict first: ABC checks are slow
        errors.append((path, f"must be a constraint object such as {{\"properties\": [\"ssd\"]}}, got {_tname(expr)}"))
        return None
    if not expr:
        return _And(path, [])  # RFC 31: {} matches anything
    if len(expr) > 1:
        keys = ", ".join(sorted(str(k) for k in expr))
        errors.append((path, f"a constraint object has exactly one operator (RFC 31), got {len(expr)}: {keys}; "
                             "combine them with {\"and\": [{...}, {...}]}"))
    nodes = [_compile_op(op, values, path, errors, groups) for op, values in expr.items()]
    return nodes[0] if len(nodes) == 1 else None


def _compile_op(op, values, path, errors, groups=None):
    opath = _key_path(path, op)
    known = OPERATORS if groups is None else tuple(sorted(OPERATORS + ("group",)))
    if op not in known:
        errors.append((opath, f"unknown operator {op!r} (known: {', '.join(known)})"))
        return None
    if not isinstance(values, (list, tuple)):
        hint = f"; write [{json.dumps(values)}]" if isinstance(values, str) and op != "and" else ""
        errors.append((opath, f"{op} takes a list, got {_tname(values)}{hint}"))
        return None
    nerr = len(errors)
    if op in ("and", "or", "not"):
        children = [_compile(v, f"{opath}[{k}]", errors, groups) for k, v in enumerate(values)]
        node = {"and": _And, "or": _Or, "not": _Not}[op](opath, children)
    elif op == "properties":
        node = _Properties(opath, _compile_properties(values, opath, errors))
    elif op == "group":
        node = _Group(opath, _compile_groups(values, opath, errors, groups))
    elif op == "hostlist":
        hosts = _parse_each(values, opath, errors, _expand_lower, HostlistError,
                            lambda v: f"must be an RFC 29 hostlist string such as \"node[1-3]\", got {_tname(v)}")
        node = _Hostlist(opath, [str(v) for v in values], _frozen(tuple(hosts)))
    else:  # ranks
        ranges = _parse_each(values, opath, errors, parse_idset_ranges, IdsetError, _not_an_idset)
        node = _Ranks(opath, [str(v) for v in values], ranges)
    return node if len(errors) == nerr else None


def _parse_each(values, opath, errors, parse, parse_error, not_a_string):
    """What parse returns for each string of values, concatenated; an error per item that is not a string
    (worded by not_a_string(item)) or does not parse."""
    out = []
    for k, v in enumerate(values):
        if not isinstance(v, str):
            errors.append((f"{opath}[{k}]", not_a_string(v)))
            continue
        try:
            out.extend(parse(v))
        except parse_error as e:
            errors.append((f"{opath}[{k}]", str(e)))
    return out


def _not_an_idset(v):
    hint = f"; write \"{v}\"" if isinstance(v, int) and not isinstance(v, bool) else ""
    return f"must be an RFC 22 idset string such as \"0-3,7\", got {_tname(v)}{hint}"


@lru_cache(maxsize=1024)
def _frozen(hosts):
    return frozenset(hosts)


@lru_cache(maxsize=1024)  # a thousand jobs often repeat the same few hostlists
def _expand_lower(text):
    return tuple(h.lower() for h in expand_hostlist(text))


def _compile_groups(values, opath, errors, groups):
    items = []
    for k, v in enumerate(values):
        ipath = f"{opath}[{k}]"
        if not isinstance(v, str):
            errors.append((ipath, f"a group name must be a string, got {_tname(v)}"))
        elif v not in groups:
            known = ", ".join(sorted(groups)) or "none defined"
            errors.append((ipath, f"unknown constraint group {v!r} (known: {known})"))
        elif groups[v] is None:
            errors.append((ipath, f"constraint group {v!r} is itself invalid (see its own error)"))
        else:
            items.append((ipath, v, groups[v]))
    return items


def _compile_properties(values, opath, errors):
    items = []
    for k, v in enumerate(values):
        ipath = f"{opath}[{k}]"
        if not isinstance(v, str):
            errors.append((ipath, f"a property must be a string, got {_tname(v)}"))
            continue
        neg = v.startswith("^")
        name = (v[1:] if neg else v).lower()
        if not name:
            errors.append((ipath, f"empty property name in {v!r}"))
            continue
        found = _BAD_PROPERTY_RE.search(name)  # one C-level scan instead of a Python loop per character
        bad = found.group(0) if found else None
        if bad is not None:
            errors.append((ipath, f"character {bad!r} not allowed in property {v!r}"
                                  " ('^' only as the first character, meaning 'must not have')"))
            continue
        items.append((ipath, name, neg))
    return items


def compile_constraint(expr: Any, path: str = "constraints", groups: Mapping | None = None) -> Constraint:
    """Validate and compile an RFC 31 constraint object.

    path names the constraint in messages: "constraints" -> "$.constraints"
    (a path already starting with "$" is used as is). Raises ConstraintError
    listing every problem found, each as (json_path, message).

    groups (maand extension): name -> compiled Constraint (or None for a group
    that failed to compile). Only when given is the extra operator
    {"group": [names]} accepted; without it the input is plain RFC 31.
    """
    root = path if path.startswith("$") else f"$.{path}"
    if expr is None:  # an empty YAML key: no constraint
        return Constraint(_And(root, []), expr, root)
    errors: list[tuple[str, str]] = []
    node = _compile(expr, root, errors, groups)
    if errors:
        raise ConstraintError(errors)
    return Constraint(node, expr, root)

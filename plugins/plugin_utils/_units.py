# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's resource units and job versions, exactly as the Go tool parses them.

Memory: mb, gb, tb (1 gb = 1024 mb); cpu: mhz, ghz, thz (1 ghz = 1000 mhz); case-insensitive,
optional space; plain numbers are MB / MHz; empty means 0 (no bound).
Versions: "1" -> 1.0.0, "v2.1" -> 2.1.0, "2.0.0-rc1" valid, "1.2.3.4" invalid.
"""

from __future__ import annotations

import functools
import re

MEMORY_UNITS = {"mb": 1.0, "gb": 1024.0, "tb": 1024.0 * 1024.0}
CPU_UNITS = {"mhz": 1.0, "ghz": 1000.0, "thz": 1000000.0}

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_VERSION = re.compile(r"^v?(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?(?:\.(0|[1-9][0-9]*))?(?:-([0-9A-Za-z][0-9A-Za-z.-]*))?$")


def _parse_quantity(value, units, example):
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise ValueError("expected a string like %r, got a boolean" % example)
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("must not be negative, got %r" % value)
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a string like %r, got %s" % (example, type(value).__name__))
    return _parse_text(value, example)


@functools.lru_cache(maxsize=4096)  # fleets repeat the same few strings ("64 gb") thousands of times
def _parse_text(value, example):
    units = MEMORY_UNITS if example.endswith("mb") else CPU_UNITS
    if not value.strip():
        return 0.0
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError("cannot parse %r: expected a number with an optional unit, like %r" % (value, example))
    unit = match.group(2).lower() or next(iter(units))
    if unit not in units:
        raise ValueError(
            "unknown unit %r in %r: use one of %s" % (match.group(2), value, ", ".join(units))
        )
    return float(match.group(1)) * units[unit]


def parse_memory_mb(value):
    """'2 gb' -> 2048.0. Raises ValueError with a readable reason."""
    return _parse_quantity(value, MEMORY_UNITS, "512 mb")


def parse_cpu_mhz(value):
    """'1.5 ghz' -> 1500.0. Raises ValueError with a readable reason."""
    return _parse_quantity(value, CPU_UNITS, "2000 mhz")


class Version:
    """A parsed semver-like version, ordered as semver orders them (a prerelease sorts first)."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, major, minor, patch, pre=""):
        self.major, self.minor, self.patch, self.pre = major, minor, patch, pre

    def __str__(self):
        return "%d.%d.%d%s" % (self.major, self.minor, self.patch, "-" + self.pre if self.pre else "")

    def _key(self):
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre.split(".")) if self.pre else ()
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other):
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other):
        return self._key() < other._key()

    def __le__(self, other):
        return self._key() <= other._key()

    def __hash__(self):
        return hash(self._key())


def parse_version(value):
    """Parse a manifest or demand version. Integers are accepted (2 -> 2.0.0). Raises ValueError."""
    if isinstance(value, bool) or value is None:
        raise ValueError("expected a version string like '1.2.0', got %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a version must not be negative, got %r" % value)
        return Version(value, 0, 0)
    if not isinstance(value, str):
        raise ValueError("expected a version string like '1.2.0', got %s" % type(value).__name__)
    match = _VERSION.match(value.strip())
    if not match:
        raise ValueError(
            "invalid version %r: use major[.minor[.patch]] with an optional leading 'v' and '-prerelease'" % value
        )
    major, minor, patch, pre = match.groups()
    return Version(int(major), int(minor or 0), int(patch or 0), pre or "")

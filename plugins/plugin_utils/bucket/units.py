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
import math
import re
from typing import Any

MEMORY_UNITS = {"mb": 1.0, "gb": 1024.0, "tb": 1024.0 * 1024.0}
CPU_UNITS = {"mhz": 1.0, "ghz": 1000.0, "thz": 1000000.0}

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*\Z")


# Above this a quantity is a typo, and sums of such values would overflow to infinity (which the
# catalog, being JSON, cannot hold): 1e15 MB is about a thousand exabytes.
MAX_QUANTITY = 1e15


def _parse_quantity(value, units, example):
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise ValueError("expected a string like %r, got a boolean" % example)
    if isinstance(value, (int, float)):
        if not value >= 0:  # also refuses NaN
            raise ValueError("must not be negative, got %r" % value)
        number = float(value) if abs(value) < 1e300 else math.inf
    elif isinstance(value, str):
        number = _parse_text(value, example)
    else:
        raise ValueError("expected a string like %r, got %s" % (example, type(value).__name__))
    if not number <= MAX_QUANTITY:
        raise ValueError("%r is out of range (at most %g %s)" % (value, MAX_QUANTITY, next(iter(units))))
    return number


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
    """A parsed job version, ordered as maand orders them (workspace/version.go Compare): major, minor,
    patch as numbers; a prerelease sorts before the release; two prereleases compare as strings."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, major, minor, patch, pre=""):
        self.major, self.minor, self.patch, self.pre = major, minor, patch, pre

    def __str__(self):
        return "%d.%d.%d%s" % (self.major, self.minor, self.patch, "-" + self.pre if self.pre else "")

    def _key(self):
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, self.pre)

    def __eq__(self, other):
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other):
        return self._key() < other._key()

    def __le__(self, other):
        return self._key() <= other._key()

    def __hash__(self):
        return hash(self._key())


def parse_version(value):
    """Parse a manifest or demand version as maand's workspace.ParseVersion does: trimmed, a leading
    'v' or 'V' dropped, 1 to 3 dot-separated non-negative integers, an optional non-empty '-prerelease';
    "unknown" is refused. Integers are accepted (demand bounds may be JSON numbers). Raises ValueError."""
    if isinstance(value, bool) or value is None:
        raise ValueError("expected a version string like '1.2.0', got %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a version must not be negative, got %r" % value)
        return Version(value, 0, 0)
    if not isinstance(value, str):
        raise ValueError("expected a version string like '1.2.0', got %s" % type(value).__name__)
    raw = value.strip()
    if not raw:
        raise ValueError("invalid job version: version is empty")
    if raw.lower() == "unknown":
        raise ValueError("invalid job version: version %r is not allowed" % raw)
    raw = raw[1:] if raw[:1] == "v" else raw
    raw = raw[1:] if raw[:1] == "V" else raw
    pre = ""
    if "-" in raw:
        raw, pre = raw.split("-", 1)
        pre = pre.strip()
        if not pre:
            raise ValueError("invalid job version: empty prerelease suffix in %r" % value)
    parts = raw.split(".")
    if len(parts) > 3:
        raise ValueError("invalid job version: %r (use major[.minor[.patch]][-prerelease])" % value)
    numbers = [0, 0, 0]
    for i, part in enumerate(parts):
        part = part.strip()
        if not part:
            raise ValueError("invalid job version: empty segment in %r" % value)
        digits = part[1:] if part[:1] == "+" else part  # Go's strconv.Atoi takes one leading sign
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError("invalid job version: invalid segment %r in %r" % (part, value))
        numbers[i] = int(part)
    return Version(numbers[0], numbers[1], numbers[2], pre)


# Juju's architecture names, and the `uname -m` names facts probes, mapped onto them.
ARCHES = ("amd64", "arm64", "armhf", "i386", "ppc64el", "riscv64", "s390x")
ARCH_ALIASES = {"x86_64": "amd64", "x64": "amd64", "aarch64": "arm64", "armv8l": "arm64", "armv7l": "armhf",
                "armv6l": "armhf", "arm": "armhf", "i686": "i386", "i586": "i386", "i486": "i386", "x86": "i386",
                "ppc64le": "ppc64el"}


def normalize_arch(value: Any):
    """'x86_64' -> 'amd64', 'ARM64' -> 'arm64'; None/'' -> None. Raises ValueError for an unknown name."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected an architecture name such as amd64, got {type(value).__name__}")
    name = value.strip().lower()
    name = ARCH_ALIASES.get(name, name)
    if name not in ARCHES:
        raise ValueError(f"unknown architecture {value!r}: use one of {', '.join(ARCHES)}")
    return name

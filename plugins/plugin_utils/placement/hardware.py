# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Juju-style generic hardware constraints: mem, cpu, cores, storage, arch.

Pure Python, stdlib only. See docs/constraints.md.

    hw = merge_hardware(parse_hardware(bucket_value, "bucket.hardware"),
                        parse_hardware(job_value, "jobs.api.hardware"))
    hx = HardwareIndex(workers)                 # once per fleet
    ok = hardware_mask(hw, hx, candidates)      # candidates: int bitset
    hardware_shortfalls(hw, workers[i], hardware_maxima(hw, hx, candidates))

Values (each key is a MINIMUM the worker must have):
  mem (alias ram), storage  MB; "3G"/"3g"/"3gb"/"3 GB" = 3072 (binary, as Juju);
                            suffixes M/MB, G/GB, T/TB, any case; plain number = MB
  cpu                       MHz; units mhz/ghz/thz (x1000 steps), plain number = MHz
  cores                     a whole number
  0                         don't care: no constraint on that key (Juju)
  max                       only the candidates with the greatest value (Juju's
                            "max" enhancement); several max keys must all hold
  arch                      the worker's architecture must be this one (Juju's
                            arch=amd64|arm64|armhf|i386|ppc64el|riscv64|s390x);
                            uname -m names (x86_64, aarch64, ...) are accepted for
                            it and for the worker's "arch" in workers.json
  "" / null                 in a job: forget the bucket's value, back to the
                            built-in default, which is "no constraint"
A worker whose value for a constrained key is unknown (None in workers.json)
does NOT satisfy it: we cannot prove it has enough.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from .bits import iter_bits
from ..bucket.units import ARCHES, normalize_arch  # noqa: F401 (re-exported in __all__: the hardware vocabulary)
from ..errors import MaandError

__all__ = ["HardwareError", "HardwareIndex", "HardwareMasks", "parse_hardware", "merge_hardware",
           "hardware_mask", "hardware_maxima", "hardware_shortfalls", "format_hardware",
           "KEYS", "MATCH_KEYS", "ALL_KEYS", "ARCHES", "normalize_arch", "FIELDS"]

KEYS = ("mem", "cpu", "cores", "storage")  # minimums (numbers)
MATCH_KEYS = ("arch",)  # the worker's value must equal the constraint's
ALL_KEYS = KEYS + MATCH_KEYS
ALIASES = {"ram": "mem"}
# The worker record fields (catalog / workers.json model) each key reads.
FIELDS = {"mem": "memory_mb", "cpu": "cpu_mhz", "cores": "cores", "storage": "storage_mb", "arch": "arch"}
_UNIT = {"mem": " MB", "cpu": " MHz", "cores": "", "storage": " MB"}
_SIZE_UNITS = {"": 1, "m": 1, "mb": 1, "g": 1024, "gb": 1024, "t": 1024 ** 2, "tb": 1024 ** 2}
_CPU_UNITS = {"": 1, "mhz": 1, "ghz": 1000, "thz": 1000 ** 2}
_NUM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)")
_KNOWN = "mem (alias ram), cpu, cores, storage, arch"


class HardwareError(MaandError):
    """All problems in one hardware value: .errors is [(json_path, message)]."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = list(errors)
        super().__init__("\n".join(f"{p}: {m}" for p, m in self.errors))


def _parse_value(key: str, raw: Any):
    """One value -> float (MB / MHz), int (cores), "max", or None (reset to default).

    Raises ValueError with a message (without the path).
    """
    if raw is None or raw == "":
        return None
    if key == "arch":
        return normalize_arch(raw)
    if isinstance(raw, bool):
        raise ValueError(f"expected a number, got boolean {raw!r}")
    if isinstance(raw, (int, float)):
        num, unit = float(raw), ""
        if not math.isfinite(num):
            raise ValueError(f"expected a finite number, got {raw!r}")
        if num < 0:
            raise ValueError(f"must not be negative, got {raw!r}")
    elif isinstance(raw, str):
        text = raw.strip()
        if text.lower() == "max":
            return "max"
        m = _NUM.fullmatch(text)
        if m is None:
            if text.startswith("-"):
                raise ValueError(f"must not be negative, got {raw!r}")
            raise ValueError(f"bad value {raw!r}: {_expect(key)}")
        num, unit = float(m.group(1)), m.group(2).lower()
    else:
        raise ValueError(f"expected a number or a string, got {type(raw).__name__}")
    if key == "cores":
        if unit or num != int(num):
            raise ValueError(f"bad value {raw!r}: cores is a whole number (or max, or 0)")
        return int(num)
    units = _CPU_UNITS if key == "cpu" else _SIZE_UNITS
    if unit not in units:
        raise ValueError(f"bad unit {unit!r} in {raw!r}: {_expect(key)}")
    return num * units[unit]


def _expect(key: str) -> str:
    if key == "cpu":
        return "expected MHz as a number or with mhz/ghz/thz, e.g. 2000 or 2.5ghz, or max, or 0"
    if key == "cores":
        return "expected a whole number, or max, or 0"
    return "expected MB as a number or with M/G/T (MB/GB/TB, 1G = 1024 MB), e.g. 3G or 512, or max, or 0"


def _string_items(text: str, root: str, errors: list) -> list[tuple[str, str]]:
    """'mem=3 gb cores=2' -> [('mem', '3 gb'), ('cores', '2')]; a unit word may
    follow its number after a space, as maand's units allow."""
    items: list[list[str]] = []
    for tok in text.split():
        if "=" in tok:
            key, dummy, val = tok.partition("=")
            if not key:
                errors.append((root, f"expected key=value, got {tok!r}"))
                continue
            if "=" in val:
                errors.append((f"{root}.{key}", f"bad value {val!r}: separate key=value pairs with spaces"))
                continue
            items.append([key, val])
        elif tok.isalpha() and items and items[-1][1][-1:].isdigit():
            items[-1][1] += " " + tok  # "3 gb"
        else:
            errors.append((root, f"expected key=value (e.g. mem=3G cores=2), got {tok!r}"))
    return [tuple(item) for item in items]


def parse_hardware(value: Any, path: str = "hardware") -> dict:
    """Parse a hardware constraint from its string or object form.

    "mem=3G cores=2 storage=20G cpu=2000" or {"mem": "3G", "cores": 2}
    -> {"mem": 3072.0, "cores": 2, "storage": 20480.0, "cpu": 2000.0}

    Values: float MB/MHz, int cores, "max", 0 (don't care) or None (reset to
    the built-in default; see merge_hardware). None or "" as the whole value
    -> {}. Raises HardwareError listing every problem as (json_path, message).
    """
    root = path if path.startswith("$") else f"$.{path}"
    errors: list[tuple[str, str]] = []
    if value is None:
        return {}
    if isinstance(value, str):
        items = _string_items(value, root, errors)
    elif isinstance(value, Mapping):
        items = list(value.items())
    else:
        raise HardwareError([(root, "expected a string such as \"mem=3G cores=2\" or an object such as "
                                    f"{{\"mem\": \"3G\"}}, got {type(value).__name__}")])
    out: dict = {}
    seen: dict[str, str] = {}
    for key_raw, raw in items:
        kpath = f"{root}.{key_raw}"
        key = ALIASES.get(key_raw.lower(), key_raw.lower()) if isinstance(key_raw, str) else key_raw
        if key not in ALL_KEYS:
            errors.append((kpath, f"unknown hardware key {key_raw!r} (known: {_KNOWN})"))
            continue
        if key in seen:
            errors.append((kpath, f"duplicate key {key_raw!r}: {key} is already set by {seen[key]!r}"))
            continue
        seen[key] = key_raw
        try:
            out[key] = _parse_value(key, raw)
        except ValueError as e:
            errors.append((kpath, str(e)))
    if errors:
        raise HardwareError(errors)
    return out


def merge_hardware(bucket_default: dict | None, job: dict | None) -> dict:
    """The effective constraint: the job's keys override the bucket's one by one.

    A job value None (written "" or null) drops the bucket's value for that
    key, which restores the built-in default: no constraint. The result only
    holds real constraints: 0 ("don't care") and None are left out.
    """
    out = {k: v for k, v in (bucket_default or {}).items() if v is not None}
    for k, v in (job or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return {k: out[k] for k in ALL_KEYS if k in out and out[k] != 0}


def format_hardware(hw: Mapping) -> str:
    """{"mem": 3072.0, "cores": 2} -> "mem=3072 cores=2" (parse_hardware reads it back)."""
    return " ".join(f"{k}={_num(hw[k])}" for k in ALL_KEYS if hw.get(k) is not None)


def _num(v) -> str:
    if isinstance(v, str):
        return v
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}".rstrip("0")


def _bits_to_int(indices: Iterable[int], n: int) -> int:
    buf = bytearray((n + 7) >> 3)
    for i in indices:
        buf[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buf, "little")


class HardwareMasks:
    """Cached "value == name" and "value >= threshold" masks over `self.values` (key -> list, one
    value per worker, None = unknown) and `self.size`; the class using it sets `_eq` and `_ge` to {}.
    Shared by HardwareIndex and the one worker index (placement/fleet.WorkerIndex)."""

    def equal_mask(self, key: str, value: str) -> int:
        m = self._eq.get((key, value))
        if m is None:
            m = self._eq[(key, value)] = _bits_to_int(
                (i for i, v in enumerate(self.values[key]) if v == value), self.size)
        return m

    def at_least_mask(self, key: str, threshold: float) -> int:
        m = self._ge.get((key, threshold))
        if m is None:
            vals = self.values[key]
            m = self._ge[(key, threshold)] = _bits_to_int(
                (i for i, v in enumerate(vals) if v is not None and v >= threshold), self.size)
        return m


class HardwareIndex(HardwareMasks):
    """Per-key value arrays over a list of workers (bit i = workers[i]), with
    cached "value >= threshold" masks (jobs tend to share thresholds).

    Each worker is a mapping with memory_mb, cpu_mhz, cores, storage_mb
    (number or None = unknown).
    """

    def __init__(self, workers: Iterable[Mapping[str, Any]]):
        workers = list(workers)
        self.size = len(workers)
        self.values: dict[str, list] = {k: [w.get(f) for w in workers] for k, f in FIELDS.items()}
        self.values["arch"] = [worker_arch(v) for v in self.values["arch"]]
        self._ge: dict[tuple[str, float], int] = {}
        self._eq: dict[tuple[str, str], int] = {}


def worker_arch(value):
    """A worker's arch as the Juju name constraints use (normalize_arch), or as written when unknown."""
    try:
        return normalize_arch(value)
    except ValueError:
        return value  # the model reports it; an unknown name matches no constraint


def _resolve(hw: Mapping, hx: HardwareIndex, candidates: int) -> tuple[int, dict]:
    # Minimums first; then each "max" key is resolved among the candidates
    # that meet them, all against the same set (so cpu=max mem=max needs one
    # worker that is greatest in both, as Juju describes).
    m = candidates
    for key in KEYS:
        want = hw.get(key)
        if want is not None and want != 0 and want != "max":
            m &= hx.at_least_mask(key, want)
    for key in MATCH_KEYS:
        if hw.get(key):
            m &= hx.equal_mask(key, hw[key])
    maxima: dict[str, Any] = {}
    max_keys = [k for k in KEYS if hw.get(k) == "max"]
    if max_keys and m:
        base = list(iter_bits(m))
        for key in max_keys:
            vals = hx.values[key]
            known = [vals[i] for i in base if vals[i] is not None]
            best = maxima[key] = max(known) if known else None
            m &= _bits_to_int((i for i in base if best is not None and vals[i] == best), hx.size)
    elif max_keys:
        maxima = {k: None for k in max_keys}
    return m, maxima


def hardware_mask(hw: Mapping, hx: HardwareIndex, candidates_mask: int) -> int:
    """The candidates (int bitset) that satisfy hw (an effective constraint from
    merge_hardware). Minimums use cached masks (a few big-int ANDs); "max"
    costs O(candidates meeting the minimums)."""
    return _resolve(hw, hx, candidates_mask)[0]


def hardware_maxima(hw: Mapping, hx: HardwareIndex, candidates_mask: int) -> dict:
    """For each "max" key of hw: the greatest value among the candidates that
    meet the minimums (None if none is known). For hardware_shortfalls."""
    return _resolve(hw, hx, candidates_mask)[1]


def hardware_shortfalls(hw: Mapping, worker: Mapping[str, Any], maxima: Mapping | None = None) -> list[str]:
    """Why worker does not meet hw, e.g. ["mem 2048 MB < 3072 MB", "cores 1 < 2",
    "storage unknown (workers.json has no storage)"]; [] if it does.
    "max" keys are checked only when maxima (from hardware_maxima) is given."""
    out = []
    for key in KEYS:
        want = hw.get(key)
        if want is None or want == 0:
            continue
        have = worker.get(FIELDS[key])
        unit = _UNIT[key]
        if have is None:
            out.append(f"{key} unknown (workers.json has no {key})")
        elif want == "max":
            best = (maxima or {}).get(key)
            if best is not None and have < best:
                out.append(f"{key} {_num(have)}{unit} < {_num(best)}{unit} (max among candidates)")
        elif have < want:
            out.append(f"{key} {_num(have)}{unit} < {_num(want)}{unit}")
    for key in MATCH_KEYS:
        want = hw.get(key)
        if not want:
            continue
        have = worker_arch(worker.get(FIELDS[key]))
        if have is None:
            out.append(f"{key} unknown (workers.json has no {key}; ansible-playbook maand.core.facts writes it)")
        elif have != want:
            out.append(f"{key} {have} != {want}")
    return out

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's Prometheus support for job templates (maand-sh/maand promconfig/, deploy/templates.go).

A job opts in to monitoring with a ``_prometheus/`` folder (``scrape.yaml`` or ``scrape.yaml.tpl``,
``alerts/*.yaml``, ``runbooks/*.md``, ``dashboards/``). maand gives every job template two more
functions, used by the Prometheus server job's ``prometheus.yml.tpl``:

* ``{{ scrapeConfigs }}``: every job's scrape configs with ``maand:port/<port>`` expanded to
  ``<worker_ip>:<port>`` of its active allocations and ``maand:job`` to the job's name, as an
  indented YAML fragment (yaml.v3's layout, each line prefixed with a newline and two spaces);
  a job whose placeholders expand to no target is left out;
* ``{{ ruleFiles }}``: a ``rule_files:`` block listing ``rules/<job>/<file>`` of every alert file
  (and ``rules/maand/certs.yaml`` when the job named ``prometheus`` ships a server config).

This module reads the ``_prometheus/`` folders (``collect``), expands and writes the YAML
(``expand_scrape_configs``, ``scrape_configs_yaml``, ``rule_files_yaml``) and gives the function
map for one bucket (``template_funcs``) and the ``maand/prometheus`` KV build writes (``compute_kv``).
YAML is read with yaml.v3's scalar rules (``load_yaml``) and written as yaml.v3's Marshal writes it
(``marshal``), so the output is maand's byte for byte (tests/unit/plugin_utils/kv/test_prometheus.py holds outputs
of maand's own code run with yaml.v3 v3.0.1).

No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Any, Callable, Iterable, Mapping

from . import gotemplate as _gotemplate, functions as _functions

FUNC_NAMES = ("scrapeConfigs", "ruleFiles")
KV_NAMESPACE = "maand/prometheus"
FOLDER = "_prometheus"
SCRAPE_FILE = "scrape.yaml"
SCRAPE_TPL = "scrape.yaml.tpl"
SERVER_FILES = ("prometheus.yml", "prometheus.yml.tpl")
SERVER_JOB = "prometheus"  # maand's ruleFiles asks this job name whether it ships a server config
MAAND_ALERTS_JOB = "maand"
MAAND_CERT_ALERTS_FILE = "certs.yaml"
PORT_PREFIX = "maand:port/"
JOB_PLACEHOLDER = "maand:job"
IMPLICIT_PORT = "_implicit"
MAX_FILE_BYTES = 4 << 20


class PrometheusError(Exception):
    """A _prometheus/ file or a scrape expansion maand would refuse; the message names it.

    file: the bucket-relative file at fault when known (build reports it), else ""."""

    def __init__(self, message: str, file: str = "") -> None:
        super().__init__(message)
        self.file = file


class NoActiveTargets(PrometheusError):
    """maand's ErrNoActiveScrapeTargets: placeholders expanded to zero targets (the job is skipped)."""


def _not_at_build(name: str) -> Callable[[], str]:
    def func() -> str:
        raise PrometheusError("%s is rendered at deploy, with the catalog (template_funcs)" % name)
    func.__name__ = name
    return func


# The names build parses job templates with (maand's deploy FuncMap has them for every job).
PARSE_FUNCS: dict[str, Callable] = {name: _not_at_build(name) for name in FUNC_NAMES}


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


def _pairs(node: Any, what: str) -> list:
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
                merged.extend(_pairs(source, what))
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
        for key_node, value_node in _pairs(node, what):
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


def parse_scrape(text: str, what: str = SCRAPE_FILE) -> list[dict]:
    """maand's ParseScrapeFile: a non-empty YAML list of scrape_config mappings."""
    if not text.strip():
        raise PrometheusError("%s is empty" % what)
    data = load_yaml(text, what)
    if data is None:
        data = []
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise PrometheusError("%s: expected a YAML list of scrape_config mappings (- job_name: ...)" % what)
    if not data:
        raise PrometheusError("%s must contain at least one scrape item" % what)
    return data


# --- placeholders (scrape.go) ------------------------------------------------------------------

def resolve_job_name(job: str, value: str) -> str:
    """maand:job -> the maand job's name; anything else as it is."""
    return job if value == JOB_PLACEHOLDER else value


def resolve_metrics_port_key(job: str, ports: Iterable[str]) -> str:
    """maand:port/_implicit: <job>_metrics_port, then metrics_port, then the only *_metrics_port."""
    ports = set(ports)
    for name in (job + "_metrics_port", "metrics_port"):
        if name in ports:
            return name
    matches = sorted(p for p in ports if p.endswith("_metrics_port"))
    if not matches:
        raise PrometheusError("job %s scrape.yaml uses maand:port/_implicit but no metrics port is declared"
                              " in manifest" % job)
    if len(matches) > 1:
        raise PrometheusError("job %s ambiguous metrics ports [%s]; set an explicit port in scrape.yaml"
                              % (job, " ".join(matches)))
    return matches[0]


def _targets(config: Mapping[str, Any]) -> Iterable[Any]:
    static = config.get("static_configs")
    for block in static if isinstance(static, list) else []:
        targets = block.get("targets") if isinstance(block, dict) else None
        yield from targets if isinstance(targets, list) else []


def requires_active_allocations(configs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a target uses maand:port/ (the job is scraped only with active allocations)."""
    return any(isinstance(t, str) and t.startswith(PORT_PREFIX) for c in configs for t in _targets(c))


@dataclasses.dataclass(frozen=True)
class ScrapeJob:
    """What one job's scrape configs expand with: its ports and its active allocations."""

    name: str
    configs: tuple  # unexpanded scrape_config mappings, as the file has them
    ports: Mapping[str, int]  # declared port name -> assigned number
    active_workers: tuple[str, ...]


def expand_scrape_configs(job: ScrapeJob) -> list[dict]:
    """maand's ExpandScrapeConfigs (copies; raises NoActiveTargets or PrometheusError)."""
    out = []
    for index, config in enumerate(job.configs):
        try:  # maand stores scrape/<job> as JSON in the KV, then copies each config through YAML
            copy = _v3_copy(json.loads(json.dumps(config, allow_nan=False)))
        except ValueError:
            raise PrometheusError("job %s scrape.yaml[%d]: json: unsupported value (.inf or .nan): maand stores scrape"
                                  " configs as JSON; quote it" % (job.name, index)) from None
        if isinstance(copy.get("job_name"), str):
            copy["job_name"] = resolve_job_name(job.name, copy["job_name"])
        try:
            copy["static_configs"] = _expand_static(job, copy)
        except NoActiveTargets:
            raise
        except PrometheusError as exc:
            raise PrometheusError("job %s scrape.yaml[%d]: %s" % (job.name, index, exc)) from None
        out.append(copy)
    return out


def _expand_static(job: ScrapeJob, config: dict) -> list:
    if "static_configs" not in config:
        raise PrometheusError("static_configs is required")
    static = config["static_configs"]
    if not isinstance(static, list) or not static:
        raise PrometheusError("static_configs must be a non-empty list")
    blocks = []
    for index, block in enumerate(static):
        if not isinstance(block, dict):
            raise PrometheusError("static_configs[%d] must be a mapping" % index)
        labels = block.get("labels")
        if isinstance(labels, dict):
            block["labels"] = {k: resolve_job_name(job.name, v) if isinstance(v, str) else v
                               for k, v in labels.items()}
        if "targets" not in block:
            raise PrometheusError("static_configs[%d].targets is required" % index)
        targets = block["targets"]
        if not isinstance(targets, list) or not targets:
            raise PrometheusError("static_configs[%d].targets must be a non-empty list" % index)
        if not all(isinstance(t, str) for t in targets):
            raise PrometheusError("static_configs[%d].targets entries must be strings" % index)
        block = _v3_copy(block)  # maand copies each static block through YAML once more
        block["targets"] = [item for target in block["targets"] for item in _expand_target(job, target)]
        if not block["targets"]:
            raise NoActiveTargets("no active allocation targets after expanding scrape config: job %s" % job.name)
        blocks.append(block)
    return blocks


def _expand_target(job: ScrapeJob, target: str) -> list[str]:
    if not target.startswith(PORT_PREFIX):
        return [target]
    parts = target[len(PORT_PREFIX):].split("/")
    key = parts[0]
    if not key:
        raise PrometheusError("invalid maand port placeholder %s" % _gotemplate.go_quote(target))
    if key == IMPLICIT_PORT:
        key = resolve_metrics_port_key(job.name, job.ports)
    if key not in job.ports:
        raise PrometheusError("port %s is not declared in manifest resources.ports" % _gotemplate.go_quote(key))
    number = job.ports[key]
    if number is None:
        raise PrometheusError("port %s has no assigned number (run maand build)" % _gotemplate.go_quote(key))
    workers = list(job.active_workers)
    if len(parts) > 1 and parts[1]:
        if parts[1] not in workers:
            raise PrometheusError("worker %s is not an active allocation for job %s"
                                  % (_gotemplate.go_quote(parts[1]), job.name))
        workers = [parts[1]]
    return ["%s:%d" % (ip, int(number)) for ip in workers]


# --- YAML out: yaml.v3's Marshal (encode.go, emitterc.go, sorter.go), best indent 4 -----------

_OLD_BOOL = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO", "off", "Off", "OFF"}
_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_INDICATOR_FIRST = set("#,[]{}&*!|>'\"%@`")


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

    if isinstance(mapping, _Ordered):
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


def _go_atom(value: Any) -> str | None:
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
    atom = _go_atom(value)
    if atom is not None:
        return atom
    if isinstance(value, float):
        return _go_float_text(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _string(str(value), simple_key)


def _go_float_text(value: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64) as yaml.v3 writes it (.inf, -.inf, .nan)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    digits, exponent = _shortest(value)
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


def _shortest(value: float) -> tuple[str, int]:
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


def _v3_copy(value: Any) -> Any:
    """maand's deepCopyMap (yaml.Marshal then Unmarshal): a string written as a literal block that
    starts with a line break comes back without it (see _literal); everything else is kept."""
    if isinstance(value, dict):
        return {k: _v3_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_v3_copy(v) for v in value]
    if isinstance(value, str) and value.startswith("\n") and isinstance(_string(value, False), list):
        return value[1:]
    return value


def scrape_configs_yaml(configs: list) -> str:
    """maand's ScrapeConfigsYAML: the YAML of configs, every line as "\\n  " + line ("" when none)."""
    if not configs:
        return ""
    return "".join("\n  " + line for line in marshal(configs).rstrip("\n").split("\n") if line)


def rule_files_yaml(alert_files: Iterable[tuple[str, str]], server_config: bool) -> str:
    """maand's RenderRuleFilesYAML: alert_files are (job, path under _prometheus/), sorted by job and path."""
    entries = sorted(alert_files)
    if not entries and not server_config:
        return ""
    lines = ["rule_files:"]
    if server_config:
        lines.append("  - rules/%s/%s" % (MAAND_ALERTS_JOB, MAAND_CERT_ALERTS_FILE))
    lines.extend("  - rules/%s/%s" % (job, rel.rsplit("/", 1)[-1]) for job, rel in entries)
    return "\n".join(lines) + "\n"


# --- JSON as Go's encoding/json writes it (the KV's scrape/<job> and scrape_configs) ------------

def go_json(value: Any) -> str:
    """json.Marshal: compact, keys sorted, <, >, & and U+2028/2029 escaped, floats as Go writes them."""
    if isinstance(value, dict):
        return "{" + ",".join(go_json(str(k)) + ":" + go_json(value[k]) for k in sorted(value, key=str)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    atom = _go_atom(value)
    if atom is not None:
        return atom
    if isinstance(value, float):
        return _go_json_float(value)
    text = json.dumps(str(value), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _go_json_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise PrometheusError("json: unsupported value: %s" % _go_float_text(value))
    digits, point = _shortest(value)
    exp = point - 1
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = "%se%s%d" % (mantissa, "-" if exp < 0 else "+", abs(exp))
    elif point <= 0:
        text = "0." + "0" * (-point) + digits if digits != "0" else "0"
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if value < 0 else "") + text


# --- the bucket's _prometheus/ folders ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class JobFolder:
    """One job's _prometheus/ folder: its scrape file (if any) and its alert files."""

    job: str
    rel: str  # bucket-relative path of the folder (workspace/jobs/<job>/_prometheus)
    root: str  # its absolute path
    scrape_file: str | None  # "scrape.yaml" or "scrape.yaml.tpl"
    alerts: tuple[str, ...]  # paths under _prometheus/ (alerts/slo.yaml), sorted
    both: bool = False  # scrape.yaml and scrape.yaml.tpl: refused where maand refuses it (a server job exists)

    def check(self) -> None:
        if self.both:
            raise PrometheusError("job %s cannot define both %s and %s; keep one" % (self.job, SCRAPE_FILE, SCRAPE_TPL),
                                  self.rel)


def _live_jobs(catalog: Mapping[str, Any]) -> list[dict]:
    return sorted((j for j in catalog.get("jobs", []) if not j.get("removed")), key=lambda j: j["name"])


def _job_rel(job: Mapping[str, Any]) -> str:
    return job.get("path") or "workspace/jobs/%s" % job["name"]


def collect(bucket_dir: str, catalog: Mapping[str, Any]) -> list[JobFolder]:
    """The _prometheus/ folders of the catalog's jobs, by job name."""
    out = []
    for job in _live_jobs(catalog):
        rel = "%s/%s" % (_job_rel(job), FOLDER)
        root = os.path.join(bucket_dir, rel)
        if not os.path.isdir(root):
            continue
        scrape = [name for name in (SCRAPE_TPL, SCRAPE_FILE) if os.path.isfile(os.path.join(root, name))]
        out.append(JobFolder(job["name"], rel, root, scrape[0] if scrape else None, _alert_files(root),
                             len(scrape) > 1))
    return out


def _alert_files(root: str) -> tuple[str, ...]:
    """alerts/**.yaml|.yml under root (maand lists every such file of the job's _prometheus/alerts/)."""
    found = []
    base = os.path.join(root, "alerts")
    for current, dirs, files in os.walk(base):
        dirs.sort()
        for name in files:
            if name.endswith((".yaml", ".yml")):
                found.append(os.path.relpath(os.path.join(current, name), root).replace(os.sep, "/"))
    return tuple(sorted(found))


def server_jobs(bucket_dir: str, catalog: Mapping[str, Any]) -> list[str]:
    """The jobs that ship prometheus.yml or prometheus.yml.tpl (maand's Prometheus server jobs)."""
    return [j["name"] for j in _live_jobs(catalog)
            if any(os.path.isfile(os.path.join(bucket_dir, _job_rel(j), f)) for f in SERVER_FILES)]


def _read(path: str, rel: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PrometheusError("%s: cannot be read: %s" % (rel, exc.strerror)) from None
    if len(data) > MAX_FILE_BYTES:
        raise PrometheusError("%s: larger than %d MB" % (rel, MAX_FILE_BYTES >> 20))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PrometheusError("%s: not UTF-8 text" % rel) from None


# --- scrape.yaml.tpl (scrape_template.go): job-level templates at build ----------------------

SCRAPE_TEMPLATE_FUNCS = ("get", "keys", "getSecret", "split", "upper", "lower", "join", "add", "sub", "mul", "div",
                         "int")


def scrape_template_namespaces(job: str, upstream_jobs: Iterable[str] = ()) -> list[str]:
    """maand's BuildScrapeTemplateNamespaces: bucket, the job's own and those of the jobs it demands."""
    out = [_functions.BUCKET_NS, _functions.BUCKET_VARS_NS, _functions.job_ns(job), _functions.job_bucket_vars_ns(job), _functions.job_vars_ns(job),
           _functions.job_secrets_ns(job)]
    for up in upstream_jobs:
        out.extend(ns for ns in (_functions.job_ns(up), _functions.job_vars_ns(up), _functions.job_secrets_ns(up)) if ns not in out)
    return out


@dataclasses.dataclass(frozen=True)
class _ScrapeReader(_functions.KVReader):
    @property
    def allowed(self) -> frozenset:  # type: ignore[override]
        return frozenset(scrape_template_namespaces(self.job, self.upstream_jobs))

    def check(self, namespace: str) -> None:
        if namespace not in self.allowed:
            raise _functions.KVError("%s namespace is not available for job %s scrape template" % (namespace, self.job))


@dataclasses.dataclass
class ScrapeTemplateData:
    """The dot of scrape.yaml.tpl (maand ScrapeTemplateData): no per-allocation fields."""

    Job: str  # noqa: N815 - Go field names are the template's
    CurrentVersion: str  # noqa: N815
    NewVersion: str  # noqa: N815


def render_scrape_template(text: str, job: str, version: str, kv: Mapping[str, Mapping[str, str]],
                           upstream_jobs: Iterable[str] = ()) -> str:
    """Render scrape.yaml.tpl as maand's build does; raises _gotemplate.TemplateError."""
    reader = _ScrapeReader(kv, job, "", tuple(upstream_jobs))
    funcs = {name: func for name, func in _functions.template_funcs(reader).items() if name in SCRAPE_TEMPLATE_FUNCS}
    funcs["int"] = _functions._atoi  # scrape_template.go's int does not trim, unlike deploy's templateInt
    data = ScrapeTemplateData(job, version or "0.0.0", version or "0.0.0")
    return _gotemplate.parse(text, SCRAPE_TPL, funcs).execute(data, funcs=funcs)


def job_scrape_configs(folder: JobFolder, job: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                       upstream_jobs: Iterable[str] = ()) -> list[dict]:
    """The job's scrape configs as written (scrape.yaml) or rendered (scrape.yaml.tpl), unexpanded."""
    folder.check()
    rel = "%s/%s" % (folder.rel, folder.scrape_file)
    text = _read(os.path.join(folder.root, folder.scrape_file), rel)
    if folder.scrape_file == SCRAPE_TPL:
        try:
            text = render_scrape_template(text, folder.job, str(job.get("version") or ""), kv, upstream_jobs)
        except _gotemplate.TemplateError as exc:
            raise PrometheusError("job %s %s: %s" % (folder.job, SCRAPE_TPL, exc), rel) from None
    try:
        configs = parse_scrape(text, folder.scrape_file)
        validate_configs(folder.job, folder.scrape_file, configs, (job.get("ports") or {}).keys())
    except PrometheusError as exc:
        raise PrometheusError("job %s: %s" % (folder.job, exc) if not str(exc).startswith("job ") else str(exc),
                              rel) from None
    return configs


FORBIDDEN_SD = (
    "kubernetes_sd_configs", "dns_sd_configs", "file_sd_configs", "consul_sd_configs", "ecs_sd_configs",
    "ec2_sd_configs", "openstack_sd_configs", "azure_sd_configs", "gce_sd_configs", "hetzner_sd_configs",
    "ionos_sd_configs", "linode_sd_configs", "digitalocean_sd_configs", "docker_sd_configs",
    "dockerswarm_sd_configs", "eureka_sd_configs", "http_sd_configs", "kuma_sd_configs", "marathon_sd_configs",
    "nerve_sd_configs", "serverset_sd_configs", "triton_sd_configs", "uyuni_sd_configs",
)


def validate_configs(job: str, what: str, configs: list[dict], ports: Iterable[str]) -> None:
    """maand's ValidateScrapeConfigs and ValidateScrapePortReferences (build time)."""
    ports = set(ports)
    for index, config in enumerate(configs):
        bad = [key for key in FORBIDDEN_SD if key in config]
        if bad:
            raise PrometheusError("job %s %s[%d] %s is not supported (use static_configs with maand:port placeholders)"
                                  % (job, what, index, bad[0]))
        if not _text(config.get("job_name")).strip():
            raise PrometheusError("job %s %s[%d] missing job_name" % (job, what, index))
        static = config.get("static_configs")
        for bi, block in enumerate(static if isinstance(static, list) else []):
            targets = block.get("targets") if isinstance(block, dict) else None
            for ti, target in enumerate(targets if isinstance(targets, list) else []):
                if isinstance(target, str) and target.startswith(PORT_PREFIX):
                    _check_placeholder(job, "%s[%d].static_configs[%d].targets[%d]" % (what, index, bi, ti),
                                       target, ports)


def _check_placeholder(job: str, where: str, target: str, ports: set) -> None:
    key = target[len(PORT_PREFIX):].split("/")[0]
    if not key:
        raise PrometheusError("job %s %s invalid placeholder %s" % (job, where, _gotemplate.go_quote(target)))
    if key == IMPLICIT_PORT:
        key = resolve_metrics_port_key(job, ports)
    if key not in ports:
        raise PrometheusError("job %s %s port '%s' is not declared in manifest resources.ports" % (job, where, key))


# --- the scrape catalog: build's maand/prometheus KV, deploy's scrapeConfigs ----------------------

def active_workers(catalog: Mapping[str, Any], job: str) -> tuple[str, ...]:
    """The job's active allocations, in worker position order."""
    position = {w["host"]: (w.get("position") is None, w.get("position") or 0, w["host"])
                for w in catalog.get("workers", [])}
    hosts = [a["worker"] for a in catalog.get("allocations", []) if a.get("job") == job and a.get("state") == "active"]
    return tuple(sorted(hosts, key=lambda h: position.get(h, (True, 0, h))))


def _job_record(catalog: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return next((j for j in _live_jobs(catalog) if j["name"] == name), {"name": name})


def scrape_job(catalog: Mapping[str, Any], name: str, configs: Iterable[dict]) -> ScrapeJob:
    job = _job_record(catalog, name)
    return ScrapeJob(name, tuple(configs), dict(job.get("ports") or {}), active_workers(catalog, name))


def compute_kv(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
               upstream: Callable[[str], Iterable[str]] | None = None) -> dict[str, dict[str, str]]:
    """maand's BuildCatalog KV: maand/prometheus {scrape_configs, scrape/<job>, scrape_jobs,
    scrape_jobs_length} and maand/job/<job> job_name; raises PrometheusError (file named)."""
    if not server_jobs(bucket_dir, catalog):
        return {KV_NAMESPACE: {"scrape_configs": "[]", "scrape_jobs": "", "scrape_jobs_length": "0"}}
    upstream = upstream or (lambda name: _functions.upstream_jobs(catalog, name))
    prom: dict[str, str] = {}
    out: dict[str, dict[str, str]] = {KV_NAMESPACE: prom}
    names: list[str] = []
    aggregate: list[dict] = []
    owners: dict[str, str] = {}
    for folder in collect(bucket_dir, catalog):
        if folder.scrape_file is None:
            continue
        configs = job_scrape_configs(folder, _job_record(catalog, folder.job), kv, upstream(folder.job))
        for config in configs:
            resolved = resolve_job_name(folder.job, _text(config.get("job_name")))
            owner = owners.setdefault(resolved, folder.job)
            if owner != folder.job:
                raise PrometheusError("duplicate prometheus job_name '%s' (jobs %s and %s)" % (resolved, owner, folder.job),
                                      "%s/%s" % (folder.rel, folder.scrape_file))
        out[_functions.job_ns(folder.job)] = {"job_name": resolve_job_name(folder.job, _text(configs[0].get("job_name")))}
        prom["scrape/%s" % folder.job] = go_json(configs)
        job = scrape_job(catalog, folder.job, configs)
        if requires_active_allocations(configs) and not job.active_workers:
            continue
        names.append(folder.job)
        aggregate.extend(configs)
    prom.update({"scrape_configs": go_json(aggregate), "scrape_jobs": ",".join(names),
                 "scrape_jobs_length": str(len(names))})
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def render_scrape_configs(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                          only: Iterable[str] = ()) -> str:
    """{{ scrapeConfigs }}: the scrape configs build stored in maand/prometheus (scrape_jobs), expanded
    with the catalog's ports and active allocations; without them, the workspace's scrape files.
    only: just these jobs (maand cat prometheus scrape --jobs); empty: all."""
    only = set(only)
    stored = kv.get(KV_NAMESPACE) or {}
    names = [n.strip() for n in str(stored.get("scrape_jobs") or "").split(",")
             if n.strip() and (not only or n.strip() in only)]
    jobs: list[ScrapeJob] = []
    for name in names:
        raw = stored.get("scrape/%s" % name)
        if raw is None:
            raise PrometheusError("key scrape/%s not found in namespace %s; build the bucket again" % (name, KV_NAMESPACE))
        try:
            jobs.append(scrape_job(catalog, name, json.loads(raw)))
        except ValueError:
            raise PrometheusError("%s scrape/%s is not JSON; build the bucket again" % (KV_NAMESPACE, name)) from None
    text = _expand_all(jobs)
    if text.strip() or names:
        return text
    jobs = [scrape_job(catalog, f.job, job_scrape_configs(f, _job_record(catalog, f.job), kv,
                                                          _functions.upstream_jobs(catalog, f.job)))
            for f in collect(bucket_dir, catalog) if f.scrape_file and (not only or f.job in only)]
    return _expand_all(jobs)


def _expand_all(jobs: Iterable[ScrapeJob]) -> str:
    configs: list[dict] = []
    for job in jobs:
        try:
            configs.extend(expand_scrape_configs(job))
        except NoActiveTargets:
            continue
    return scrape_configs_yaml(configs)


def render_rule_files(bucket_dir: str, catalog: Mapping[str, Any]) -> str:
    """{{ ruleFiles }}: rules/<job>/<file> of every alert file, rules/maand/certs.yaml first when the
    job named prometheus ships a server config (maand's RenderRuleFilesYAML)."""
    entries = [(f.job, rel) for f in collect(bucket_dir, catalog) for rel in f.alerts]
    return rule_files_yaml(entries, SERVER_JOB in server_jobs(bucket_dir, catalog))


def template_funcs(bucket_dir: str, catalog: Mapping[str, Any],
                   kv: Mapping[str, Mapping[str, str]]) -> dict[str, Callable[[], str]]:
    """maand's scrapeConfigs and ruleFiles for the job templates of one deploy (each computed once)."""
    cache: dict[str, str] = {}

    def once(name: str, make: Callable[[], str]) -> Callable[[], str]:
        def func() -> str:
            if name not in cache:
                cache[name] = make()
            return cache[name]
        func.__name__ = name
        return func

    return {"scrapeConfigs": once("scrapeConfigs", lambda: render_scrape_configs(bucket_dir, catalog, kv)),
            "ruleFiles": once("ruleFiles", lambda: render_rule_files(bucket_dir, catalog))}


# --- the server job's rules/ (deploy/prometheus_rules.go, promconfig/alerts.go InjectRunbookURLs) --

SERVER_PORT = "prometheus_port_http"  # maand reads it from the job named prometheus for runbook URLs
# maand's promconfig/maand_certs_alerts.yaml (maand-sh/maand, MIT licence), shipped as maand ships it.
MAAND_CERT_ALERTS_YAML = """groups:
  - name: maand_certs
    rules:
      - alert: maand cert expiring soon
        expr: maand_cert_expiring == 1 and maand_cert_not_after_seconds > time()
        for: 1h
        labels:
          severity: warning
        annotations:
          summary: "TLS cert {{ $labels.cert }} expiring ({{ $labels.job }} on {{ $labels.worker }})"
          description: "Certificate {{ $labels.cert }} for job {{ $labels.job }} on {{ $labels.worker }} is within the maand renewal buffer."

      - alert: maand cert expired
        expr: maand_cert_not_after_seconds < time()
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "TLS cert {{ $labels.cert }} expired ({{ $labels.job }} on {{ $labels.worker }})"
          description: "Certificate {{ $labels.cert }} for job {{ $labels.job }} on {{ $labels.worker }} is past NotAfter. Run maand build && maand deploy."

      - alert: maand ca cert expiring soon
        expr: maand_cert_expiring{scope="ca"} == 1 and maand_cert_not_after_seconds{scope="ca"} > time()
        for: 1h
        labels:
          severity: critical
        annotations:
          summary: "maand CA certificate expiring soon"
          description: "Bucket CA is within the maand renewal buffer. Run maand build to rotate."

      - alert: maand ca cert expired
        expr: maand_cert_not_after_seconds{scope="ca"} < time()
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "maand CA certificate expired"
          description: "Bucket CA is past NotAfter. Run maand build && maand deploy immediately."
"""
RULE_FIELDS = ("alert", "record", "expr", "for", "labels", "annotations")  # maand's alertRule, in order


class _Ordered(dict):
    """A Go struct for marshal: fields in declaration order, not sorted."""


def _scalar_text(node: Any, where: str) -> str:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return "" if node.style is None and node.value in ("", "~", "null", "Null", "NULL") else node.value
    raise PrometheusError("%s must be a scalar" % where)


def _string_map(node: Any, where: str) -> _Ordered | dict:
    import yaml

    if isinstance(node, yaml.ScalarNode) and _scalar_text(node, where) == "":
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise PrometheusError("%s must be a mapping" % where)
    return {_scalar_text(k, where): _scalar_text(v, where) for k, v in _pairs(node, where)}


def _fields(node: Any, where: str) -> dict:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise PrometheusError("%s must be a mapping" % where)
    return {_scalar_text(k, where): v for k, v in _pairs(node, where)}


def _items(node: Any, where: str) -> list:
    import yaml

    if node is None or isinstance(node, yaml.ScalarNode) and _scalar_text(node, where) == "":
        return []
    if not isinstance(node, yaml.SequenceNode):
        raise PrometheusError("%s must be a list" % where)
    return node.value


def parse_alert_file(text: str, what: str) -> _Ordered:
    """yaml.Unmarshal into maand's alertRuleFile: only groups[].name and rules[].alert/record/expr/for/
    labels/annotations survive (maand re-marshals that struct when it injects runbook URLs)."""
    import yaml

    if not text.strip():
        raise PrometheusError("%s is empty" % what)
    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        raise PrometheusError("%s: invalid YAML: %s" % (what, " ".join(str(exc).split()))) from None
    groups = []
    for gi, group_node in enumerate(_items(_fields(root, what).get("groups"), what + " groups")):
        group = _fields(group_node, "%s groups[%d]" % (what, gi))
        rules = []
        for ri, rule_node in enumerate(_items(group.get("rules"), "%s groups[%d].rules" % (what, gi))):
            where = "%s groups[%d].rules[%d]" % (what, gi, ri)
            fields = _fields(rule_node, where)
            rule = _Ordered()
            for name in RULE_FIELDS:
                node = fields.get(name)
                if name in ("labels", "annotations"):
                    rule[name] = _string_map(node, "%s.%s" % (where, name)) if node is not None else {}
                else:
                    rule[name] = _scalar_text(node, "%s.%s" % (where, name)) if node is not None else ""
            rules.append(rule)
        name = _scalar_text(group["name"], what) if "name" in group else ""
        groups.append(_Ordered(name=name, rules=rules))
    if not groups:
        raise PrometheusError("%s must define at least one group" % what)
    return _Ordered(groups=groups)


def inject_runbook_urls(job: str, text: str, base_url: str, what: str = "alerts") -> str:
    """maand's InjectRunbookURLs: an alert's annotations.runbook becomes runbook_url (unless set) on the
    server's console page; the file is re-marshalled only when something changed."""
    parsed = parse_alert_file(text, what)
    changed = False
    for group in parsed["groups"]:
        for rule in group["rules"]:
            runbook = rule["annotations"].get("runbook", "").strip()
            if not rule["alert"].strip() or not runbook:
                continue
            if not rule["annotations"].get("runbook_url", "").strip():
                rule["annotations"]["runbook_url"] = "%s/consoles/runbooks/%s/%s.html" % (
                    base_url.strip().rstrip("/"), job, runbook)
            del rule["annotations"]["runbook"]
            changed = True
    if not changed:
        return text
    for group in parsed["groups"]:  # maand writes `for: ""`, which Prometheus refuses: left out (docs/templates.md)
        for rule in group["rules"]:
            if rule["for"] == "":
                del rule["for"]
    return marshal(parsed)


def rule_files(bucket_dir: str, catalog: Mapping[str, Any], job: str, host: str) -> dict[str, bytes]:
    """The files maand's deploy adds to a server job's tree on host: rules/<job>/<file> for every alert
    file (runbook URLs on host's Prometheus) and rules/maand/certs.yaml. {} for any other job."""
    if job not in server_jobs(bucket_dir, catalog):
        return {}
    port = (_job_record(catalog, SERVER_JOB).get("ports") or {}).get(SERVER_PORT)
    if port is None:
        raise PrometheusError("job %s has no port %s: maand links runbooks to http://<worker>:<%s>; declare it"
                              " in workspace/jobs/%s/manifest.json resources.ports" % (SERVER_JOB, SERVER_PORT,
                                                                                       SERVER_PORT, SERVER_JOB))
    base = "http://%s:%d" % (host, int(port))
    out: dict[str, bytes] = {}
    for folder in collect(bucket_dir, catalog):
        for rel in folder.alerts:
            path_rel = "%s/%s" % (folder.rel, rel)
            text = inject_runbook_urls(folder.job, _read(os.path.join(folder.root, rel), path_rel), base, path_rel)
            out["rules/%s/%s" % (folder.job, rel.rsplit("/", 1)[-1])] = text.encode("utf-8")
    out["rules/%s/%s" % (MAAND_ALERTS_JOB, MAAND_CERT_ALERTS_FILE)] = MAAND_CERT_ALERTS_YAML.encode("utf-8")
    return out


def rules_provider(bucket_dir: str, catalog: Mapping[str, Any]) -> Callable[[str, str], dict[str, bytes]]:
    """For a deploy's overlays: (job, host) -> {rel: content} of rule_files (empty for non-server jobs)."""
    servers = set(server_jobs(bucket_dir, catalog))

    def provide(job: str, host: str) -> dict[str, bytes]:
        return rule_files(bucket_dir, catalog, job, host) if job in servers else {}
    return provide

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job spec's environment after Maelstrom: ``$env{V}``/``$prev{V}`` substitution and the element list.

Semantics follow Maelstrom's own source (maelstrom-software/maelstrom):
crates/maelstrom-client-base/src/spec/substitute.rs (``substitute``) and
crates/maelstrom-client-base/src/spec.rs (``environment_eval``). ``SpecError`` (every job-spec
problem) and ``SubstituteError`` live here, the lowest module of the package. Pure Python, no Ansible
imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..errors import MaandError


class SpecError(MaandError):
    """A job spec problem; the message names the variable, field, parent or chain."""


class SubstituteError(SpecError):
    """Maelstrom's substitute::Error: kind is one of the four below, var the variable (or None)."""

    UNTERMINATED_BRACE = "UnterminatedBrace"
    INVALID_VARIABLE = "InvalidVariable"
    UNKNOWN_VARIABLE = "UnknownVariable"
    LOOKUP_ERROR = "LookupError"

    def __init__(self, kind: str, var: Optional[str] = None, detail: str = "", source: str = "env"):
        self.kind, self.var, self.detail, self.source = kind, var, detail, source
        super().__init__(self._describe())

    def _describe(self) -> str:
        if self.kind == self.UNTERMINATED_BRACE:
            return "unterminated { (write $env{NAME} or $prev{NAME})"
        if self.kind == self.INVALID_VARIABLE:
            return '$ must be followed by "$", "env{", or "prev{" (write $$ for a literal $)'
        if self.kind == self.UNKNOWN_VARIABLE:
            where = "the controller's environment" if self.source == "env" else "an earlier environment element"
            return (f"unknown variable {self.var!r} (set it in {where}, or give a default: "
                    f"${self.source}{{{self.var}:-value}})")
        return f"error looking up variable {self.var!r}: {self.detail}"


Lookup = Callable[[str], Optional[str]]


def _handle_variable(out: list, text: str, lookup: Lookup, source: str) -> None:
    """One ``NAME}rest`` or ``NAME:-default}rest`` after ``$env{``/``$prev{``."""
    var, brace, rest = text.partition("}")
    if not brace:
        raise SubstituteError(SubstituteError.UNTERMINATED_BRACE)
    var, sep, default = var.partition(":-")
    try:
        value = lookup(var)
    except SubstituteError:
        raise
    except Exception as exc:  # the lookup's own failure, wrapped as Maelstrom's LookupError
        raise SubstituteError(SubstituteError.LOOKUP_ERROR, var, str(exc), source) from None
    if sep and not value:  # default applies when unset or empty
        value = default
    if value is None:
        raise SubstituteError(SubstituteError.UNKNOWN_VARIABLE, var, source=source)
    out.append(value)
    out.append(rest)


def substitute(text: str, env_lookup: Lookup, prev_lookup: Lookup) -> str:
    """Replace ``$env{V}``, ``$prev{V}``, ``${...:-default}`` and ``$$`` in ``text``."""
    parts = text.split("$")
    if len(parts) == 1:
        return text
    out = [parts[0]]
    it = iter(parts[1:])
    for piece in it:
        if piece == "":
            nxt = next(it, None)
            if nxt is None:
                raise SubstituteError(SubstituteError.INVALID_VARIABLE)
            out.append("$")
            out.append(nxt)
        elif piece.startswith("env{"):
            _handle_variable(out, piece[4:], env_lookup, "env")
        elif piece.startswith("prev{"):
            _handle_variable(out, piece[5:], prev_lookup, "prev")
        else:
            raise SubstituteError(SubstituteError.INVALID_VARIABLE)
    return "".join(out)


@dataclass(frozen=True)
class EnvironmentSpec:
    """One element of an ``environment`` list: ``extend`` true merges, false replaces."""

    vars: Mapping[str, str] = field(default_factory=dict)
    extend: bool = True
    origin: str = field(default="", compare=False)  # file and JSON path, for error messages


def parse_environment(value, where: str = "environment") -> list:
    """Manifest ``environment`` (a list of {vars, extend}, or a map) -> [EnvironmentSpec].

    Raises SpecError naming the JSON path and the fix.
    """
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [EnvironmentSpec(_parse_vars(value, where), True, where)]
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of {{\"vars\": {{...}}, \"extend\": true|false}} or a map "
                        f"of NAME: value, not {type(value).__name__}")
    return [_parse_element(elem, f"{where}[{i}]") for i, elem in enumerate(value)]


def _parse_element(elem, where: str) -> EnvironmentSpec:
    if isinstance(elem, EnvironmentSpec):
        return elem
    if not isinstance(elem, Mapping):
        raise SpecError(f"{where}: must be {{\"vars\": {{NAME: value}}, \"extend\": true|false}}, "
                        f"not {type(elem).__name__}")
    unknown = sorted(set(elem) - {"vars", "extend"})
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                        "an element has only \"vars\" and \"extend\"")
    if "vars" not in elem:
        raise SpecError(f"{where}: missing \"vars\" (a map of NAME: value)")
    extend = elem.get("extend", True)
    if not isinstance(extend, bool):
        raise SpecError(f"{where}.extend: must be true or false, not {extend!r}")
    return EnvironmentSpec(_parse_vars(elem["vars"], f"{where}.vars"), extend, where)


def _parse_vars(vars_, where: str) -> dict:
    if not isinstance(vars_, Mapping):
        raise SpecError(f"{where}: must be a map of NAME: value, not {type(vars_).__name__}")
    out = {}
    for key, val in vars_.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise SpecError(f"{where}: invalid variable name {key!r} (a non-empty string without '=')")
        if not isinstance(val, str):
            raise SpecError(f"{where}.{key}: value must be a string, not {type(val).__name__} "
                            f"(quote it: \"{val}\")")
        out[key] = val
    return out


def environment_eval(initial: Mapping[str, str], specs, env_lookup: Lookup) -> dict:
    """Maelstrom's environment_eval: apply each element in turn to the running map.

    Every value of an element is substituted against the map as it was before that element
    (``$prev``); ``extend`` true merges the result into the map, false replaces the map. The initial
    map is not substituted. Returns the final map, keys sorted.
    """
    running = dict(initial)
    for index, spec in enumerate(parse_environment(specs)):
        prev = dict(running)
        new = {}
        for key in sorted(spec.vars):
            try:
                new[key] = substitute(spec.vars[key], env_lookup, prev.get)
            except SubstituteError as exc:
                raise _named(exc, f"{spec.origin or f'environment[{index}]'}.vars.{key}") from None
        running = {**running, **new} if spec.extend else new
    return dict(sorted(running.items()))


def environment_check(initial: Mapping[str, str], specs) -> list:
    """Build-time check of an environment whose controller variables are not known yet.

    Evaluates with every ``$env{V}`` standing for an empty value, so malformed elements, malformed
    ``$`` and unknown ``$prev`` variables raise SpecError/SubstituteError now; returns the sorted
    names of the ``$env`` variables referenced (deploy checks them against the controller).
    """
    seen = set()

    def placeholder(name: str) -> str:
        seen.add(name)
        return ""

    environment_eval(initial, specs, placeholder)
    return sorted(seen)


def _named(exc: SubstituteError, where: str) -> SubstituteError:
    err = SubstituteError(exc.kind, exc.var, exc.detail, exc.source)
    err.args = (f"{where}: {exc}",)
    err.where = where
    return err

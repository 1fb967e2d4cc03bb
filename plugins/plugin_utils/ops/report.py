# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a verb reports, once, for every reader (pure, no Ansible imports).

A verb's action returns one ``Report`` in its task result (``maand_report``): the lines an operator
reads at a terminal (its table or summary), the JSON document ``-e maand_format=json`` prints, the
counts and the outcome. The stdout callback maand.core.deploy prints the lines (or the document alone
on stdout); the same report goes into the run's custom stats as ``maand_<verb>`` (``set_stats``), so
an AWX job, whose stdout callback is AWX's own, carries it in its artifacts. Without the callback the
action prints the lines itself, as before.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from typing import Any, Iterable, Mapping

FORMATS = ("table", "json")
KEY = "maand_report"


@dataclasses.dataclass
class Report:
    """One verb's verdict: what the terminal shows (lines), what scripts read (data)."""

    verb: str
    outcome: str = "ok"  # ok | changed | failed | check
    summary: str = ""
    lines: list = dataclasses.field(default_factory=list)
    counts: dict = dataclasses.field(default_factory=dict)
    data: dict = dataclasses.field(default_factory=dict)
    format: str = "table"
    problems: list = dataclasses.field(default_factory=list)  # what failed, one line each (else the summary)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Report":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in dict(data or {}).items() if k in fields})

    def document(self) -> dict:
        """The JSON document of -e maand_format=json: the verb's data with its outcome, summary and counts."""
        doc = dict(self.data)
        doc.setdefault("verb", self.verb)
        doc.setdefault("outcome", self.outcome)
        doc.setdefault("summary", self.summary)
        doc.setdefault("counts", dict(self.counts))
        if self.problems:
            doc.setdefault("errors", list(self.problems))
        return doc

    def stats(self) -> dict:
        """The custom stats of the run (set_stats, per_host false): {"maand_<verb>": document}."""
        return {"maand_" + self.verb.replace(".", "_"): self.document()}

    def screen(self) -> list[str]:
        """What the terminal shows: the JSON document in json format, else the lines."""
        if self.format == "json":
            return [dumps(self.document())]
        return [str(line) for line in self.lines]


def dumps(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, default=str)


def check_format(value: Any) -> str:
    """'table' or 'json' from maand_format (anything else: ValueError naming the choices)."""
    text = str(value or "table").strip().lower()
    if text not in FORMATS:
        raise ValueError("maand_format=%s is not known; use -e maand_format=table or -e maand_format=json" % value)
    return text


def counted(items: Iterable[str]) -> dict:
    """{item: how many times}."""
    out: dict = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def format_from_extra_vars(extra_vars: Iterable[str]) -> str:
    """maand_format from the command line's -e values (key=value or JSON/YAML mappings; files are not read):
    the callback needs it before any task has reported."""
    found = "table"
    for raw in extra_vars or ():
        text = str(raw or "").strip()
        if not text or text.startswith("@"):
            continue
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict) and "maand_format" in data:
                found = str(data["maand_format"])
            continue
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        for word in words:
            key, sep, value = word.partition("=")
            if sep and key.strip() == "maand_format":
                found = value.strip()
    return "json" if found.strip().lower() == "json" else "table"


def failure_document(verb: str, errors: Iterable[str]) -> dict:
    """The JSON document of a run that failed before its verb reported (an extra var, the inventory)."""
    errors = [str(e) for e in errors]
    return {"verb": verb or "maand", "outcome": "failed", "summary": errors[0] if errors else "failed",
            "errors": errors, "counts": {"errors": len(errors)}}

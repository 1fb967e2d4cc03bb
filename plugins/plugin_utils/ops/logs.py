# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.logs``: the bucket logs with maand's filters (ops/log_lines.py), or the past deploy runs from
their records (maand's ``maand logs show``; pure, no Ansible).

The bucket logs (``logs/``, as maand writes them) are shown when the format is ``raw`` or ``human`` or when a
filter only they have is given (phase, event, tail); ``json`` with one of those gives them as JSON. Otherwise:

Without a run: one line per kept run, newest last (start, duration, who and where, outcome, update_seq,
plan hash, results), narrowed to the runs that planned a change for the given jobs / workers. With a run
(its id, a unique prefix or ``last``): the run in full, one row per allocation (action, result, tree hash,
versions, gate and make-target seconds, reason) and its problems. ``json`` gives the same as one JSON
document (the stored record). The records are written by the deploy's finish (deploy/record.py) and the
state store keeps the newest ``deploy/record.KEEP``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..bucket import storage
from ..bucket.problems import did_you_mean
from ..deploy import record
from . import cat, log_lines
from ..errors import MaandError

FORMATS = ("table", "json")
LINE_FORMATS = log_lines.FORMATS
DEFAULT_LIMIT = 20


class LogsError(MaandError):
    """What cannot be shown; the message names the cause and the fix."""


@dataclasses.dataclass
class Request(log_lines.Filters):
    """The bucket logs' filters (log_lines.Filters) and the number of runs to list."""

    format: str = ""  # "": table for the runs, raw for the bucket logs
    limit: int = DEFAULT_LIMIT

    def of_lines(self) -> bool:
        """The bucket logs rather than the deploy records (module docstring)."""
        return self.format in ("raw", "human") or bool(self.phase or self.event or self.tail)


@dataclasses.dataclass
class Shown:
    """The lines to print (the table, or the JSON text), the JSON form, and a one-line summary."""

    lines: list
    data: dict
    msg: str


def _check(request: Request) -> None:
    if request.format not in FORMATS + LINE_FORMATS:
        raise LogsError("maand_format %r is not a format%s; use table or json (the deploy runs), raw, human or json "
                        "(the bucket logs)" % (request.format, did_you_mean(str(request.format), FORMATS + LINE_FORMATS)))
    if not isinstance(request.limit, int) or isinstance(request.limit, bool) or request.limit < 0:
        raise LogsError("maand_limit %r is not a number of runs (0 = every kept run)" % (request.limit,))


def _check_names(records: list, request: Request) -> None:
    """A job or worker no kept run knows is an error (a typo would show nothing)."""
    for kind, asked, known in (("job", request.jobs, {a.job for r in records for a in r.allocations}),
                               ("worker", request.workers, {a.worker for r in records for a in r.allocations})):
        for name in asked:
            if name not in known:
                raise LogsError("no kept deploy run has the %s %s%s; the %ss in the records: %s" % (
                    kind, name, did_you_mean(name, sorted(known)), kind, ", ".join(sorted(known)) or "(none)"))


def logs(bucket_dir: str, request: Request) -> Shown:
    """The bucket logs, the list of runs, or one run; LogsError for bad options, unknown names and runs."""
    if request.of_lines():
        if request.format == "table":
            raise LogsError("maand_format table lists the deploy runs; the bucket logs (maand_phase, maand_event, "
                            "maand_tail) are raw, human or json")
        filters = log_lines.Filters(request.run, tuple(request.workers), tuple(request.jobs), request.phase,
                                    request.event, request.tail, request.format or "raw")
        try:
            lines, data, msg = log_lines.show(bucket_dir, filters)
        except log_lines.LogLinesError as exc:
            raise LogsError(str(exc)) from None
        return Shown(lines, data, msg)
    request = dataclasses.replace(request, format=request.format or "table")
    _check(request)
    try:
        records, bad = record.read_all(bucket_dir)
    except storage.StateStoreError as exc:
        raise LogsError(str(exc)) from None
    _check_names(records, request)
    if request.run:
        try:
            return _show(record.find(records, request.run), request, bad)
        except record.RecordError as exc:
            raise LogsError(str(exc)) from None
    return _list(bucket_dir, records, request, bad)


def _changed(rec: record.DeployRecord, request: Request) -> bool:
    return any(a.action != "skip" for a in rec.touched(request.jobs, request.workers))


def _by(rec: record.DeployRecord) -> str:
    return "%s@%s" % (rec.user, rec.controller)


def _seq(rec: record.DeployRecord) -> str:
    if rec.update_seq is None:
        return "-"
    if rec.previous_update_seq not in (None, rec.update_seq):
        return "%s -> %s" % (rec.previous_update_seq, rec.update_seq)
    return str(rec.update_seq)


def _list(bucket_dir: str, records: list, request: Request, bad: list) -> Shown:
    filtered = request.jobs or request.workers
    chosen = [r for r in records if not filtered or _changed(r, request)]
    shown = chosen[-request.limit:] if request.limit else chosen
    header = ("RUN", "STARTED", "SECONDS", "BY", "OUTCOME", "UPDATE_SEQ", "PLAN_HASH", "RESULTS")
    table = cat.Table("Deploy runs of %s" % bucket_dir, header)
    for r in shown:
        table.rows.append((r.run_id, r.started, "%.1f" % r.seconds, _by(r), r.outcome, _seq(r),
                           r.plan_hash[:16] or "-", r.summary))
    if len(shown) < len(chosen):
        table.notes.append("the newest %d of %d runs (-e maand_limit=0 lists every kept run)"
                           % (len(shown), len(chosen)))
    if filtered:
        table.notes.append("runs that planned a change for %s" % ", ".join(request.jobs + request.workers))
    table.notes.append("the state store keeps the newest %d deploy records; -e maand_run=RUN shows one run"
                       % record.KEEP)
    table.notes += bad
    data = {"bucket": bucket_dir, "kept": len(records), "keep": record.KEEP, "warnings": bad,
            "runs": [_summary(r) for r in shown]}
    msg = "%d run%s" % (len(shown), "" if len(shown) == 1 else "s")
    return Shown(_format(table.lines(), data, request), data, msg)


def _summary(rec: record.DeployRecord) -> dict:
    out = rec.to_dict()
    for key in ("allocations", "rollout", "format"):
        out.pop(key, None)
    return out


def _seconds(value: Any) -> str:
    return "-" if value is None else "%.1f" % float(value)


def _show(rec: record.DeployRecord, request: Request, bad: list) -> Shown:
    rows = rec.touched(request.jobs, request.workers)
    lines = ["run %s of bucket %s: %s" % (rec.run_id, rec.bucket_id, rec.outcome),
             "by %s (pid %s); started %s, finished %s (%.1f s)"
             % (_by(rec), rec.pid or "-", rec.started, rec.finished, rec.seconds),
             "plan hash %s; update_seq %s; options: %s"
             % (rec.plan_hash[:16] or "-", _seq(rec), _options(rec.options)),
             "results: %s" % rec.summary]
    table = cat.Table("", ("JOB", "WORKER", "ACTION", "RESULT", "HASH", "VERSION", "GATE", "SECONDS", "REASON"))
    for a in rows:
        version = a.to_version if a.from_version == a.to_version else "%s -> %s" % (a.from_version, a.to_version)
        table.rows.append((a.job, a.worker, a.action, a.result, (a.hash or "-")[:cat.HASH_CHARS], version,
                           _seconds(a.gate_seconds), _seconds(a.seconds), _cut(a.reason)))
    lines += table.lines()[1:]
    if rec.problems:
        lines.append("problems:")
        lines += ["  - %s" % p for p in rec.problems]
    lines += bad
    data = rec.to_dict()
    keys = {a.key for a in rows}
    data["allocations"] = [dataclasses.asdict(a) for a in rows]
    data["rollout"] = {k: v for k, v in data["rollout"].items() if k in keys}
    msg = "run %s: %s (%s)" % (rec.run_id, rec.outcome, rec.summary)
    return Shown(_format(lines, data, request), data, msg)


def _cut(text: str, most: int = 70) -> str:
    text = " ".join(str(text or "-").split())
    return text if len(text) <= most else text[:most - 3] + "..."


def _options(options: dict) -> str:
    parts = []
    for key, value in sorted(options.items()):
        if value in (None, False, [], ""):
            continue
        parts.append(key if value is True else "%s=%s" % (key, ",".join(value) if isinstance(value, list) else value))
    return " ".join(parts) or "-"


def _format(lines: list, data: dict, request: Request) -> list:
    if request.format == "json":
        return json.dumps(data, indent=2, sort_keys=True).splitlines()
    return lines

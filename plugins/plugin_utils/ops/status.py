# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.status``: job x worker x catalog state x deployed version x running x last deploy
(pure, no Ansible imports).

Each worker answers once (``status_ops`` -> the worker agent's ``status`` ops: the promoted record's
version and time, then ``make status``, exit code 0 = running); ``rows`` joins the answers with the
catalog's allocations; ``table_lines`` and ``as_json`` print them.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from typing import Any, Callable, Iterable, Mapping

from . import cat
from ..catalog import catalog
from .. import jobspec
from ..deploy import plan
from ..hooks import commands
from ..bucket.problems import did_you_mean
from ..errors import MaandError

FORMATS = ("table", "json")
NO_FOLDER = "no job folder on the worker"


class StatusError(MaandError):
    """A request that cannot be answered; the message says what to do."""


@dataclasses.dataclass
class Row:
    """One allocation as the catalog has it and as its worker reports it."""

    job: str
    worker: str
    state: str
    version: str
    deployed: str | None = None
    running: str = "?"
    last_deploy: str | None = None
    note: str = ""

    def cells(self) -> tuple[str, ...]:
        return (self.job, self.worker, self.state, self.version or "-", self.deployed or "-", self.running,
                self.last_deploy or "-", self.note)


HEADER = ("JOB", "WORKER", "STATE", "VERSION", "DEPLOYED", "RUNNING", "LAST DEPLOY", "NOTE")


def split_jobs(value: Any) -> tuple[str, ...]:
    """maand_jobs as a tuple of names ("api,web", a list, or empty)."""
    return cat.split_names(value)


def check_format(value: Any) -> str:
    text = str(value or "table").strip().lower()
    if text not in FORMATS:
        raise StatusError("maand_format=%s is not known; use -e maand_format=table or -e maand_format=json" % value)
    return text


def check_jobs(doc: Mapping[str, Any], jobs: Iterable[str]) -> None:
    """StatusError naming an unknown job (with "did you mean")."""
    known = sorted({j.get("name") for j in doc.get("jobs") or []} | {a.get("job") for a in doc.get("allocations") or []})
    for name in jobs:
        if name not in known:
            raise StatusError("maand_jobs: job %s is not in the catalog%s; jobs: %s"
                              % (name, did_you_mean(name, known), ", ".join(known) or "(none)"))


def status_ops(doc: Mapping[str, Any], host: str, allocations: Iterable[Mapping[str, Any]],
               jobs: Iterable[str] = (), spec_op: Callable[[dict, str], dict] | None = None) -> list[dict]:
    """One agent ``status`` op per allocation of `host` (only `jobs` when given). A job with job_control
    commands gets no make target: its status is not its Makefile's (docs/hooks.md)."""
    wanted = set(jobs)
    records = {j.get("name"): j for j in doc.get("jobs") or []}
    ops = []
    for alloc in allocations:
        job = alloc.get("job")
        if wanted and job not in wanted:
            continue
        version = (records.get(job) or {}).get("version") or alloc.get("version") or "0.0.0"
        control = commands.has_event(doc, job, "job_control")
        op = {"id": job, "kind": "status", "job": job, "host": host, "target": None if control else "status",
              "env": plan.catalog_allocation_env(doc, job, host, version, version)}
        ops.append(spec_op(op, job) if spec_op else op)
    return ops


def load_catalog(bucket: str) -> dict:
    """The bucket's catalog: StatusError when there is none (build first); CatalogError when unreadable."""
    doc = catalog.read_catalog(bucket) if bucket else None
    if doc is None:
        raise StatusError("%s/data/catalog.json does not exist: run maand.core.build first" % bucket)
    return doc


def spec_op(catalog_jobs: Mapping[str, Any] | None) -> Callable[[dict, str], dict]:
    """op -> op with the job spec's environment and run fields, as the deploy runs make."""
    def add(op, job):
        spec = ((catalog_jobs or {}).get(job) or {}).get("spec")
        if not isinstance(spec, dict):
            return op
        op["spec"] = jobspec.op_spec(spec)
        try:
            return jobspec.runtime_op(op, os.environ.get)
        except jobspec.EnvError as exc:  # make status would not get its environment: do not run it
            op = {k: v for k, v in op.items() if k != "spec"}
            op.update(target=None, env_error=str(exc))
            return op
    return add


def worker_ops(bucket: str, host: str, allocations: Iterable[Mapping[str, Any]], jobs: Iterable[str],
               catalog_jobs: Mapping[str, Any] | None) -> list[dict]:
    """status_ops of one worker from the bucket's catalog, with the job specs' environments (the
    maand.core.status_worker task); StatusError when the catalog is missing or unreadable."""
    try:
        doc = load_catalog(bucket)
    except catalog.CatalogError as exc:
        raise StatusError("%s: %s" % (bucket, exc)) from None
    return status_ops(doc, host, allocations, jobs, spec_op(catalog_jobs))


def when(epoch: Any) -> str | None:
    """A promoted record's mtime as UTC ISO 8601 (seconds), or None."""
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool):
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running(outcome: Mapping[str, Any], control: bool) -> tuple[str, str]:
    """(RUNNING cell, note) of one worker outcome."""
    note = outcome.get("note") or ("" if outcome.get("ok", True) else outcome.get("msg") or "")
    if control:
        return "n/a", note or "job_control job: maand.core.job -e maand_target=status"
    running = outcome.get("running")
    if running is True:
        return "yes", note
    if running is False:
        tail = [line for line in outcome.get("output_tail") or []
                if line.strip() and not line.startswith(("make: ***", "make["))]  # make's own "Error 1"
        return "no", note or (tail[-1].strip()[:80] if tail else "make status exit code != 0")
    if note == NO_FOLDER:
        return "-", "not deployed"
    return "?", note


def rows(doc: Mapping[str, Any], answers: Mapping[str, Mapping[str, Any]], jobs: Iterable[str] = ()) -> list[Row]:
    """The catalog's allocations on the answering workers (keys of `answers`; only `jobs` when given),
    with what each worker said. An answer is a registered task result: {"answered": true, "jobs": {job:
    outcome}}, or {"unreachable": true, "msg"}, or anything else with a "msg" (a failure)."""
    wanted = set(jobs)
    records = {j.get("name"): j for j in doc.get("jobs") or []}
    out = []
    for alloc in doc.get("allocations") or []:
        job, host = alloc.get("job"), alloc.get("worker")
        if host not in answers or (wanted and job not in wanted):
            continue
        row = Row(job, host, alloc.get("state") or "?", (records.get(job) or {}).get("version") or "")
        answer = answers[host] or {}
        if answer.get("unreachable"):
            row.running, row.note = "unreachable", _first_line(answer.get("msg"))
        elif not _answered(answer):
            row.running, row.note = "?", _first_line(answer.get("msg") or "no answer from the worker")
        else:
            outcome = answer["jobs"].get(job)
            if outcome is None:
                row.note = "not asked"
            else:
                row.deployed = outcome.get("version")
                row.last_deploy = when(outcome.get("deployed_at"))
                row.running, row.note = _running(outcome, commands.has_event(doc, job, "job_control"))
                if row.state != "active" and row.running == "no":  # meant to be stopped: not a failure
                    row.running = row.state
                if outcome.get("pending"):
                    row.note = ("start not promoted yet; " + row.note).rstrip("; ")
                row.note = "; ".join(n for n in history_notes(outcome) + [row.note] if n)
        out.append(row)
    return out


def history_notes(outcome: dict) -> list[str]:
    """What the worker's records say about the last deploys: a version reverted (auto_revert, or
    maand_rollback after a failed gate), rolled back, or shipped and never promoted."""
    notes = []
    if outcome.get("unpromoted"):
        notes.append("%s not promoted (failed)" % outcome["unpromoted"])
    if outcome.get("reverted_from"):
        notes.append("reverted from %s" % outcome["reverted_from"])
    if outcome.get("rolled_back_from"):
        notes.append("rolled back from %s" % outcome["rolled_back_from"])
    return notes


def _first_line(text: Any) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0][:120] if lines else ""


def unreachable(answers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return sorted(h for h, a in answers.items() if (a or {}).get("unreachable"))


def _answered(answer: Mapping[str, Any]) -> bool:
    """A status_worker result with its jobs (a failed one is registered too: the playbook ignores failures)."""
    return bool(answer.get("answered")) and isinstance(answer.get("jobs"), Mapping) and not answer.get("unreachable")


def failed(answers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Workers that were reached but gave no usable answer."""
    return sorted(h for h, a in answers.items() if not (a or {}).get("unreachable") and not _answered(a or {}))


def summary(table_rows: list[Row], answers: Mapping[str, Mapping[str, Any]]) -> str:
    """One line: `status: 5 running, 1 not running, 1 n/a, 2 unreachable (1 worker)`."""
    counts: dict[str, int] = {}
    for row in table_rows:
        counts[row.running] = counts.get(row.running, 0) + 1
    names = (("yes", "running"), ("no", "not running"), ("n/a", "n/a"), ("-", "not deployed"), ("?", "unknown"),
             ("unreachable", "unreachable"), ("disabled", "disabled"), ("removed", "removed"))
    parts = ["%d %s" % (counts[key], label) for key, label in names if counts.get(key)]
    down = unreachable(answers)
    text = "status: %s" % (", ".join(parts) or "no allocations")
    if down:
        text += "; unreachable worker%s: %s" % ("" if len(down) == 1 else "s", ", ".join(down))
    return text


def not_running(table_rows: list[Row]) -> list[Row]:
    """The active allocations whose worker answered that the job is not running (status fails on them)."""
    return [r for r in table_rows if r.state == "active" and r.running == "no"]


def counts(table_rows: list[Row], answers: Mapping[str, Mapping[str, Any]]) -> dict:
    """{running, not_running, disabled, unreachable_workers, ...}: the numbers of the summary line."""
    labels = {"yes": "running", "no": "not_running", "n/a": "n_a", "-": "not_deployed", "?": "unknown",
              "unreachable": "unreachable"}
    out = {"allocations": len(table_rows)}
    for row in table_rows:
        key = labels.get(row.running, row.running)
        out[key] = out.get(key, 0) + 1
    out["unreachable_workers"] = len(unreachable(answers))
    return out


def table_lines(table_rows: list[Row], answers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The status table (aligned text), then the summary line."""
    table = cat.Table("maand status", HEADER, [r.cells() for r in table_rows])
    return table.lines() + [summary(table_rows, answers)]


def as_json(table_rows: list[Row], answers: Mapping[str, Mapping[str, Any]]) -> dict:
    """The same, for scripts: rows (running as true/false/null, unreachable as a flag), workers."""
    def running(cell: str) -> Any:
        return {"yes": True, "no": False}.get(cell)

    return {
        "rows": [{"job": r.job, "worker": r.worker, "state": r.state, "version": r.version or None,
                  "deployed_version": r.deployed, "running": running(r.running),
                  "unreachable": r.running == "unreachable", "status": r.running, "last_deploy": r.last_deploy,
                  "note": r.note} for r in table_rows],
        "unreachable": unreachable(answers),
        "failed": failed(answers),
        "summary": summary(table_rows, answers),
        "counts": counts(table_rows, answers),
        "not_running": ["%s@%s" % (r.job, r.worker) for r in not_running(table_rows)],
    }

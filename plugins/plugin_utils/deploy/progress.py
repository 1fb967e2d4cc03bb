# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy's controller tasks say while they run: progress records (no Ansible imports).

Health gates run inside one controller task, so no task event shows their progress. The gate code
appends one JSON object per line to <run_dir>/progress.jsonl; the stdout callback
maand.core.deploy follows that file from a thread while the task runs, and the finish action reads
the gate times from it. Records (every one has "kind" and "t", seconds since the epoch):

    {"kind": "gate", "state": "wait", "job", "batch", "host", "check", "attempt", "attempts",
     "elapsed", "error"}                               a probe that has not passed yet
    {"kind": "gate", "state": "pass" | "fail", "job", "batch", "hosts", "elapsed", "attempts"}
    {"kind": "say", "msg", "color"}                    a line the task would have printed

A reader keeps its offset and returns only complete lines, so a record half written when it reads
comes whole the next time. A line that is not JSON is skipped (the file is only advice for the
screen: the run state decides the outcome).
"""

from __future__ import annotations

import json
import os
import time

PROGRESS_FILE = "progress.jsonl"


def progress_path(run_dir):
    return os.path.join(run_dir, PROGRESS_FILE)


class Writer:
    """Appends records to <run_dir>/progress.jsonl; never raises (progress is only for the screen)."""

    def __init__(self, run_dir, clock=time.time):
        self.path = progress_path(run_dir) if run_dir else ""
        self.clock = clock

    def write(self, record):
        if not self.path:
            return
        line = json.dumps(dict(record, t=round(self.clock(), 3)), sort_keys=True) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError:  # progress is only for the screen: a record that cannot be written is dropped
            pass

    def say(self, msg, color=None):
        self.write({"kind": "say", "msg": str(msg), "color": color})


def parse_lines(text):
    """(records, rest): the JSON objects of the complete lines of text, and the incomplete tail."""
    records = []
    *lines, rest = text.split("\n")
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "kind" in data:
            records.append(data)
    return records, rest


class Reader:
    """Follows a progress file: read() returns the records appended since the last call."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.rest = ""

    def read(self):
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        records, self.rest = parse_lines(self.rest + data.decode("utf-8", "replace"))
        return records


def read_all(run_dir):
    """Every record of the run's progress file ([] when there is none)."""
    return Reader(progress_path(run_dir)).read() if run_dir else []


def gate_times(records):
    """{(job, host): seconds} from the gates that ended (the last end of a gate wins)."""
    out = {}
    for rec in records:
        if rec.get("kind") == "gate" and rec.get("state") in ("pass", "fail"):
            for host in rec.get("hosts") or []:
                out[(rec.get("job"), host)] = float(rec.get("elapsed") or 0.0)
    return out


# --- what the gate code writes -------------------------------------------------------------------

def check_label(check):
    """'http :30000/health', 'https :8443/', 'tcp :30000'."""
    if check.get("type") == "http":
        return "%s :%s%s" % (check.get("scheme") or "http", check.get("port"), check.get("path") or "/")
    return "%s :%s" % (check.get("type"), check.get("port"))


def batch_label(plan, gate):
    """The rolling batch a gate closes ("api start batch 1/3"): the plan's own label of the gate when it
    has one (the gate after a job's last start batch, a revert's gate), else from the plan's rows."""
    if gate.get("label"):
        return gate["label"]
    hosts = set(gate.get("hosts") or [])
    for row in plan.get("rows") or []:
        if row.get("job") == gate.get("job") and row.get("worker") in hosts and row.get("batch"):
            return row["batch"]
    return "%s gate" % gate.get("job")


class GateWatch:
    """The watch of one gate for deploy/gate.run_gate (deploy/gate.GateRunner): writes wait / pass / fail records."""

    def __init__(self, writer, gate, batch):
        self.writer = writer
        self.gate = gate
        self.batch = batch
        self.rounds = None  # the attempts the gate made (set when it ends)

    def waiting(self, host, check, attempt, elapsed, error):
        self.writer.write({"kind": "gate", "state": "wait", "job": self.gate["job"], "batch": self.batch,
                           "host": host, "check": check_label(check), "attempt": attempt,
                           "attempts": self.gate.get("attempts"), "elapsed": round(elapsed, 2),
                           "error": str(error or "")})

    def ended(self, passed, elapsed, attempts):
        self.rounds = attempts
        self.writer.write({"kind": "gate", "state": "pass" if passed else "fail", "job": self.gate["job"],
                           "batch": self.batch, "hosts": list(self.gate.get("hosts") or []),
                           "elapsed": round(elapsed, 2), "attempts": attempts})


def mark(run_dir):
    """The current end of the run's progress file (0 when there is none), for read_since."""
    try:
        return os.path.getsize(progress_path(run_dir)) if run_dir else 0
    except OSError:
        return 0


def read_since(run_dir, offset):
    """The records appended after offset (a task returns those it wrote, in case the file goes away)."""
    if not run_dir:
        return []
    reader = Reader(progress_path(run_dir))
    reader.offset = offset
    return reader.read()

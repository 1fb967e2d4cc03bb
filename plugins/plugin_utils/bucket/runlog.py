# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's bucket logs, written and read as maand does (no Ansible imports).

maand (maand-sh/maand bucket/runtime.go, log_format.go, log_context.go, logs/parse.go;
docs/reference/observability/logging.md) appends one line per event to ``logs/<worker_ip>.log`` (every
command aimed at that worker), ``logs/maand.log`` (bucket-local commands and job-level events,
``worker=-``) and the same line to ``logs/runs/<run_id>/<same file>`` (one invocation). A command is a
``command_begin`` line (run, maand, seq, worker, job, phase, action, cmd), one line per line of its
stdout or stderr (``stream=stdout|stderr msg=...``) and a ``command_end`` line (``exit``,
``duration_ms``); events (``deploy_skip``, ``reconcile_skip_stop``) are one line. ``log_format`` in
maand.conf chooses ``kv`` (the default: ``key=value`` in maand's key order) or ``json`` / ``jsonl``
(one object per line, keys sorted, seq/exit/duration_ms as numbers: Go's encoding/json).

``RunLog`` is one invocation (a verb run): the run id (the deploy's own run id, else a UUID as maand's),
the verb in maand's words (``maand=deploy``, ``run_command``, ``job``, ``jobcommand``, ``healthcheck``,
``build``) and update_seq. It keeps nothing open: every line is one ``write`` of an ``O_APPEND`` file, so
the tasks of one run (each its own process) and its threads write side by side as maand's goroutines do.
``parse_line`` reads a line back as maand's ``ParseLine`` (kv, json, or a legacy ``| msg`` / ``! msg`` line).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import time
import tomllib
import uuid
from typing import Any, Iterable, Mapping

LOGS_DIR = "logs"
RUNS_DIR = "runs"
BUCKET_FILE = "maand.log"
FORMATS = {"kv": "kv", "json": "json", "jsonl": "json"}  # log_format -> encoding (maand's parseLogFormat)
KV_ORDER = ("ts", "level", "event", "run", "maand", "seq", "worker", "job", "phase", "action", "cmd", "stream",
            "exit", "duration_ms", "reason", "msg")
JSON_NUMBERS = ("seq", "exit", "duration_ms")
MAX_CMD = 200  # maand's maxCommandSummaryLen
_INT = re.compile(r"^[+-]?[0-9]+\Z")


def timestamp(when: float | None = None) -> str:
    """maand's ts: UTC to the millisecond, 2026-06-02T22:07:01.123Z (Go's 2006-01-02T15:04:05.000Z07:00)."""
    when = time.time() if when is None else when
    stamp = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (stamp.microsecond // 1000)


def summarize(commands: Iterable[str]) -> str:
    """maand's SummarizeCommands: the commands joined with " && ", whitespace collapsed, cut to 200 chars."""
    summary = " ".join(" && ".join(commands).split())
    return summary if len(summary) <= MAX_CMD else summary[:MAX_CMD - 3] + "..."


def _quote(value: str) -> str:
    """maand's quoteKVValue: quoted when it holds a space, a tab, "=" or a quote; only quotes are escaped."""
    if any(c in value for c in ' \t="'):
        return '"' + value.replace('"', '\\"') + '"'
    return value


def kv_line(fields: Mapping[str, str]) -> str:
    """maand's formatKVLine: the known keys in maand's order, then the others (sorted), empty values left out."""
    parts = ["%s=%s" % (k, _quote(fields[k])) for k in KV_ORDER if fields.get(k)]
    parts += ["%s=%s" % (k, _quote(v)) for k, v in sorted(fields.items()) if v and k not in KV_ORDER]
    return " ".join(parts)


def json_line(fields: Mapping[str, str]) -> str:
    """maand's formatJSONLine as Go's json.Marshal writes it: keys sorted, no spaces, seq/exit/duration_ms as
    numbers, <, >, & and U+2028/U+2029 escaped."""
    payload = {k: (int(v) if k in JSON_NUMBERS and _INT.match(v) else v) for k, v in fields.items() if v}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def encode(log_format: str, fields: Mapping[str, str]) -> str:
    return json_line(fields) if FORMATS.get(log_format) == "json" else kv_line(fields)


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*\Z")  # a worker or a run id: never a path


def file_name(worker: str) -> str:
    """maand's workerLogFileName: <worker_ip>.log, or maand.log for bucket-local lines (OSError for a worker
    that is not a name: a log never lands outside logs/)."""
    if not worker or worker == "-":
        return BUCKET_FILE
    if not _NAME.match(worker):
        raise OSError("%r is not a worker name; its lines were not written" % (worker,))
    return "%s.log" % worker


@dataclasses.dataclass(frozen=True)
class Command:
    """maand's CommandContext: one command of a run (job, phase, action, cmd summary)."""

    job: str = ""
    phase: str = ""
    action: str = ""
    cmd: str = ""

    def fields(self) -> dict:
        return {"job": self.job, "phase": self.phase, "action": self.action, "cmd": self.cmd}


@dataclasses.dataclass(frozen=True)
class RunLog:
    """One invocation's log (module docstring); ``bucket`` is the bucket folder, ``log_format`` kv or json."""

    bucket: str
    run_id: str
    maand: str
    seq: int = 0
    log_format: str = "kv"

    @classmethod
    def open(cls, bucket: str, maand: str, seq: Any = 0, run_id: str = "", log_format: str | None = None) -> "RunLog":
        """The log of a new run (run_id: the deploy's; else a fresh UUID) in the bucket's log_format."""
        if log_format is None:
            log_format = conf_format(bucket)
        try:
            seq = int(seq or 0)
        except (TypeError, ValueError):
            seq = 0
        if not (run_id and _NAME.match(run_id)):
            run_id = str(uuid.uuid4())
        return cls(bucket, run_id, maand, seq, FORMATS.get(log_format, "kv"))

    def base(self, worker: str, when: float | None = None) -> dict:
        """maand's baseLogFields."""
        return {"ts": timestamp(when), "level": "INFO", "run": self.run_id, "maand": self.maand,
                "seq": str(self.seq) if self.seq > 0 else "", "worker": worker or "-"}

    def line(self, worker: str, fields: Mapping[str, Any], when: float | None = None) -> str:
        out = self.base(worker, when)
        out.update({k: "" if v is None else str(v) for k, v in fields.items()})
        return encode(self.log_format, out)

    def append(self, worker: str, lines: Iterable[str]) -> None:
        """Append lines to logs/<worker>.log and logs/runs/<run>/<worker>.log (one write per file)."""
        data = "".join(line + "\n" for line in lines).encode("utf-8", "replace")
        if not data:
            return
        logs = os.path.join(self.bucket, LOGS_DIR)
        run_dir = os.path.join(logs, RUNS_DIR, self.run_id)
        os.makedirs(run_dir, exist_ok=True)
        for folder in (logs, run_dir):
            _append(os.path.join(folder, file_name(worker)), data)

    def event(self, worker: str, event: str, **extra: Any) -> None:
        """maand's LogEvent: one event line (worker "" = job-level, maand.log)."""
        self.append(worker, [self.line(worker, dict(extra, event=event))])

    def begin(self, worker: str, command: Command, when: float | None = None) -> str:
        return self.line(worker, dict(command.fields(), event="command_begin"), when)

    def stream(self, worker: str, command: Command, stream: str, text: str, when: float | None = None) -> str:
        return self.line(worker, dict(command.fields(), stream=stream, msg=text), when)

    def end(self, worker: str, command: Command, exit_code: Any, seconds: float, when: float | None = None) -> str:
        return self.line(worker, dict(command.fields(), event="command_end", exit=exit_code,
                                      duration_ms=int(max(0.0, seconds) * 1000)), when)

    def command(self, worker: str, command: Command, began: float, seconds: float, exit_code: Any,
                lines: Iterable[tuple]) -> None:
        """A command that already ran (on a worker, through the agent): begin, its lines ((when, stream, text);
        when None: stamped with the command's end), end, in one append."""
        out = [self.begin(worker, command, began)]
        out += [self.stream(worker, command, stream, text, began + seconds if when is None else when)
                for when, stream, text in lines]
        out.append(self.end(worker, command, exit_code, seconds, began + seconds))
        self.append(worker, out)

    def agent_op(self, worker: str, job: str, phase: str, outcome: Mapping[str, Any]) -> None:
        """The make targets one worker agent op ran (its outcome's "commands": target, began, seconds, rc and
        every line), each as one command of phase; a target that could not start ends with exit -1 and the
        op's message on stderr."""
        for entry in outcome.get("commands") or ():
            lines = [tuple(item) for item in entry.get("lines") or ()]
            rc = entry.get("rc")
            if rc is None:
                lines.append((None, "stderr", str(outcome.get("msg") or "the command did not run")))
            target = str(entry.get("target") or "")
            self.command(worker, Command(job, phase, target, "make %s" % target), float(entry.get("began") or 0),
                         float(entry.get("seconds") or 0), -1 if rc is None else rc, lines)

    def live(self, worker: str, command: Command) -> "Live":
        """A command running now: begin written at once, then each line as it comes, then end."""
        return Live(self, worker, command)


class Live:
    """RunLog.live: one command's lines as they come (hooks on the controller); thread-safe (one write a line)."""

    def __init__(self, log: RunLog, worker: str, command: Command):
        self.log, self.worker, self.command = log, worker, command
        self.began = time.time()
        self.problem = ""  # why a line could not be written (the command goes on: it must not block)
        log.append(worker, [log.begin(worker, command, self.began)])

    def _write(self, line: str) -> None:
        if self.problem:
            return
        try:
            self.log.append(self.worker, [line])
        except OSError as exc:
            self.problem = str(exc)

    def line(self, stream: str, text: str) -> None:
        self._write(self.log.stream(self.worker, self.command, stream, text))

    def end(self, exit_code: Any) -> None:
        self._write(self.log.end(self.worker, self.command, exit_code, time.time() - self.began))


LogCommand = Command  # the door's name (bucket/__init__.py)


def _append(path: str, data: bytes) -> None:
    """One O_APPEND write, never through a symlink (a link planted in logs/ is refused, not followed)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def conf_format(bucket: str) -> str:
    """The bucket's log_format (maand.conf), kv when unset or unreadable; the build checks the value."""
    try:
        with open(os.path.join(bucket, "maand.conf"), "rb") as handle:
            value = tomllib.load(handle).get("log_format")
    except (OSError, ValueError):
        return "kv"
    return FORMATS.get(str(value or "kv").strip().lower(), "kv")


def format_problem(value: Any) -> str | None:
    """Why maand.conf's log_format is not a format (None when it is one)."""
    if isinstance(value, str) and value.strip().lower() in FORMATS:
        return None
    return "log_format %r is not a log format: use \"kv\" (key=value lines, the default), \"json\" or \"jsonl\"" % (value,)


# --- reading (maand's logs/parse.go) ---------------------------------------------------------------

def parse_line(line: str) -> dict:
    """maand's ParseLine: the fields of one line (kv, json, or a legacy payload line "| msg" / "! msg")."""
    line = line.strip()
    if not line:
        return {}
    if line.startswith("{"):
        try:
            payload = json.loads(line)
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            return {k: _json_text(v) for k, v in payload.items()}
    if line.startswith("| ") or line.startswith("! "):
        return {"stream": "stdout" if line[0] == "|" else "stderr", "msg": line[2:]}
    return parse_kv(line)


def _json_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def parse_kv(line: str) -> dict:
    """maand's parseKVLine: key=value pairs, a value quoted when it starts with a quote (backslash escapes)."""
    fields = {}
    while line:
        eq = line.find("=")
        if eq <= 0:
            break
        key, line = line[:eq], line[eq + 1:]
        value, line = _kv_value(line)
        fields[key] = value
        line = line.strip()
    return fields


def _kv_value(line: str) -> tuple:
    if not line:
        return "", ""
    if line[0] == '"':
        out, escaped = [], False
        for i in range(1, len(line)):
            char = line[i]
            if escaped:
                out.append(char)
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                return "".join(out), line[i + 1:].strip()
            else:
                out.append(char)
        return "".join(out), ""
    space = line.find(" ")
    return (line[:space], line[space + 1:]) if space >= 0 else (line, "")

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.logs`` over the bucket logs, as maand's ``maand logs show`` (maand-sh/maand logs/show.go,
human.go; pure, no Ansible imports).

Which files: with a run, ``logs/runs/<run>/`` (the run's id, a unique prefix of it, or ``last``: the newest
run folder), else ``logs/``; with workers, only their ``<worker>.log``, else every ``*.log`` (sorted). Which
lines: maand's filters, run (a prefix), worker, job (a prefix, or one of a comma-separated list: an rsync's
jobs), phase and event (exact); a legacy payload line (``| msg``) only when nothing is filtered. ``tail``
keeps the last N lines (raw, json) or command blocks (human). ``raw`` prints the lines as stored; ``human``
maand's grouped view (events, then one block per command: header, phase/action/target, ``$ cmd``, the
stream lines as ``job@worker | msg`` (``!`` for stderr), ``ok`` / ``FAIL`` with exit and duration); ``json``
one JSON document (the parsed lines). Every file is read without following a symlink (O_NOFOLLOW relative
to the folder opened O_DIRECTORY|O_NOFOLLOW, then fstat'ed: a regular file), as the health tails read a job's logs.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import re
import stat

from ..bucket import did_you_mean, parse_line
from ..errors import MaandError

FORMATS = ("raw", "human", "json")
MAX_READ = 64 * 1024 * 1024  # the most of one log file read (its newest bytes)
_DEPLOY_RUN = re.compile(r"^[0-9]{8}T[0-9]{6}")  # a deploy's run id (deploy/run.new_run_id): its start first


class LogLinesError(MaandError):
    """What cannot be read; the message names the cause and the fix."""


@dataclasses.dataclass
class Filters:
    run: str = ""
    workers: tuple = ()
    jobs: tuple = ()
    phase: str = ""
    event: str = ""
    tail: int = 0
    format: str = "raw"


def _open_dir(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        if exc.errno == errno.ELOOP:
            raise LogLinesError("%s is a symlink: not read (the bucket logs are a folder of the bucket); remove the "
                                "link" % path) from None
        raise LogLinesError("%s: cannot read it (%s)" % (path, exc)) from None


def read_file(dir_fd: int, name: str, where: str) -> list[str]:
    """The lines of one log file in the folder dir_fd; [] when missing. A symlink or a file that is not regular is
    refused (LogLinesError), never followed."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        if exc.errno == errno.ELOOP:
            raise LogLinesError("%s/%s is a symlink: not read; remove it" % (where, name)) from None
        raise LogLinesError("%s/%s: cannot read it (%s)" % (where, name, exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogLinesError("%s/%s is not a regular file: not read; remove it" % (where, name))
        os.lseek(fd, max(0, info.st_size - MAX_READ), 0)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return [line for line in b"".join(chunks).decode("utf-8", "replace").splitlines() if line.strip()]


def _runs(logs: str) -> list[str]:
    """The run folders of logs/runs/, oldest first (by modification time, then name)."""
    root = os.path.join(logs, "runs")
    try:
        names = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [e.name for e in sorted(names, key=lambda e: (e.stat(follow_symlinks=False).st_mtime_ns, e.name))]


def resolve_run(logs: str, run: str) -> str:
    """The run folder's name for a run id, a unique prefix of one, or ``last``."""
    runs = _runs(logs)
    if not runs:
        raise LogLinesError("%s/runs has no run yet: the bucket logs are written by deploy, run_command, job, "
                            "job_command, health_check and build; run one first" % logs)
    if run == "last":
        return runs[-1]
    if run in runs:
        return run
    if "/" in run:
        raise LogLinesError("maand_run: %r is not a run id; give a run id, a prefix of one, or last" % run)
    matches = [r for r in runs if r.startswith(run)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LogLinesError("run %s is a prefix of %d runs (%s); give more of its id" % (
            run, len(matches), ", ".join(matches[-5:])))
    raise LogLinesError("no run %s in %s/runs%s; the newest runs: %s (or -e maand_run=last)" % (
        run, logs, did_you_mean(run, runs), ", ".join(runs[-5:])))


def paths(bucket: str, filters: Filters) -> tuple[str, list[str]]:
    """(folder, file names) to read, as maand's logPaths."""
    logs = os.path.join(bucket, "logs")
    folder = os.path.join(logs, "runs", resolve_run(logs, filters.run)) if filters.run else logs
    if filters.workers:
        bad = [w for w in filters.workers if "/" in w or w.startswith(".")]
        if bad:
            raise LogLinesError("maand_workers: %s is not a worker (a worker's log is logs/<worker>.log); name the "
                                "workers as workers.json does" % ", ".join(bad))
        return folder, ["%s.log" % w for w in filters.workers]
    fd = _open_dir(folder)
    if fd is None:
        return folder, []
    try:
        names = sorted(n for n in os.listdir(fd) if n.endswith(".log"))
    finally:
        os.close(fd)
    return folder, names


def _matches(value: str, want: str) -> bool:
    """maand's fieldMatches: equal, a prefix, or so for one part of a comma-separated value."""
    if not value:
        return False
    return any(part == want or part.startswith(want) for part in [value] + [p.strip() for p in value.split(",")])


def matches(fields: dict, filters: Filters, run_id: str = "") -> bool:
    """maand's entryMatchesFilters (run given as the resolved folder name); a payload-only line only unfiltered."""
    if "stream" in fields and "event" not in fields and "ts" not in fields:
        return not (filters.event or run_id or filters.workers or filters.jobs or filters.phase)
    if run_id and not _matches(fields.get("run", ""), run_id):
        return False
    if filters.workers and not any(_matches(fields.get("worker", ""), w) for w in filters.workers):
        return False
    if filters.jobs and not any(_matches(fields.get("job", ""), j) for j in filters.jobs):
        return False
    if filters.phase and fields.get("phase") != filters.phase:
        return False
    return not filters.event or fields.get("event") == filters.event


def read(bucket: str, filters: Filters) -> tuple[str, str, list]:
    """(folder, run id, [(line, fields)] of every file in order). LogLinesError when no file matched."""
    folder, names = paths(bucket, filters)
    run_id = os.path.basename(folder) if filters.run else ""
    fd = _open_dir(folder)
    entries: list = []
    found = 0
    if fd is not None:
        try:
            for name in names:
                lines = read_file(fd, name, folder)
                found += bool(lines)
                entries += [(line, parse_line(line)) for line in lines]
        finally:
            os.close(fd)
    if not found:
        raise LogLinesError("no log files matched in %s%s; the bucket logs are written by deploy, run_command, job, "
                            "job_command, health_check and build" % (
                                folder, " for %s" % ", ".join(filters.workers) if filters.workers else ""))
    return folder, run_id, entries


# --- maand's human view (logs/human.go) ------------------------------------------------------------

def _human_time(ts: str) -> str:
    try:
        when = datetime.datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return ts
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _header(f: dict) -> str:
    parts = [_human_time(f["ts"])] if f.get("ts") else []
    parts += [f["maand"]] if f.get("maand") else []
    parts += ["seq=" + f["seq"]] if f.get("seq") else []
    parts += ["run=" + _short_run(f["run"])] if f.get("run") else []
    return "  ".join(parts)


def _short_run(run: str) -> str:
    """maand's shortRunID (a UUID's first 8 characters); a deploy's own run id (its start time first) whole."""
    return run if _DEPLOY_RUN.match(run) else run[:8]


def _target(f: dict) -> str:
    worker, job = f.get("worker", ""), f.get("job", "")
    if worker and worker != "-":
        return "%s@%s" % (job, worker) if job else worker
    return job


def _duration(ms: str) -> str:
    try:
        value = int(ms)
    except ValueError:
        return ms + "ms"
    return "%dms" % value if value < 1000 else "%.1fs" % (value / 1000.0)


def _event_detail(f: dict) -> str:
    event = f.get("event", "")
    if event in ("deploy_skip", "reconcile_skip_stop"):
        parts = [event] + ["%s=%s" % (k, f[k]) for k in ("job", "reason") if f.get(k)]
        if f.get("worker") and f["worker"] != "-":
            parts.append("worker=" + f["worker"])
        return "  ".join(parts)
    return f.get("msg") or event


def group(entries: list) -> tuple[list, list]:
    """maand's groupEntries: ([block {begin, streams, end}], [event fields])."""
    blocks, events, current = [], [], None
    for dummy, f in entries:
        event = f.get("event", "")
        if event == "command_begin":
            if current:
                blocks.append(current)
            current = {"begin": f, "streams": [], "end": None}
        elif event == "command_end":
            if current:
                current["end"] = f
                blocks.append(current)
                current = None
            else:
                events.append(f)
        elif not event and (f.get("msg") or f.get("stream")) and current:
            current["streams"].append(f)
        elif event or f:
            if event and current:
                blocks.append(current)
                current = None
            events.append(f)
    if current:
        blocks.append(current)
    return blocks, events


def human(blocks: list, events: list) -> list[str]:
    """maand's RenderHuman: the events, then the command blocks, a blank line after each."""
    out = []
    for f in events:
        head, detail = _header(f), _event_detail(f)
        out += ([head] if head else []) + (["  " + detail] if detail else []) + ([""] if head or detail else [])
    for b in blocks:
        begin = b["begin"]
        out += [_header(begin)] if _header(begin) else []
        sub = "  ".join(x for x in (begin.get("phase", ""), begin.get("action", ""), _target(begin)) if x)
        out += ["  " + sub] if sub else []
        out += ["  $ " + begin["cmd"]] if begin.get("cmd") else []
        for s in b["streams"]:
            if s.get("msg"):
                target = _target(s) or _target(begin)
                out.append("  %s%s %s" % (target + " " if target else "", "!" if s.get("stream") == "stderr" else "|",
                                          s["msg"]))
        if b["end"] is not None:
            code = b["end"].get("exit", "")
            parts = ["FAIL" if code not in ("", "0") else "ok"] + (["exit=" + code] if code else [])
            parts += [_duration(b["end"]["duration_ms"])] if b["end"].get("duration_ms") else []
            out.append("  " + "  ".join(parts))
        out.append("")
    while out and not out[-1]:
        out.pop()
    return out


def show(bucket: str, filters: Filters) -> tuple[list[str], dict, str]:
    """(lines to print, JSON form, one-line summary) of the bucket logs under the filters."""
    if filters.format not in FORMATS:
        raise LogLinesError("maand_format %r is not a format of the bucket logs%s; use raw, human or json" % (
            filters.format, did_you_mean(str(filters.format), FORMATS)))
    if not isinstance(filters.tail, int) or isinstance(filters.tail, bool) or filters.tail < 0:
        raise LogLinesError("maand_tail %r is not a number of lines (0 = all)" % (filters.tail,))
    folder, run_id, entries = read(bucket, filters)
    chosen = [(line, f) for line, f in entries if matches(f, filters, run_id)]
    if filters.format == "human":
        blocks, events = group(entries)
        blocks = sorted((b for b in blocks if matches(b["begin"], filters, run_id)), key=lambda b: b["begin"].get("ts", ""))
        events = sorted((e for e in events if matches(e, filters, run_id)), key=lambda e: e.get("ts", ""))
        if filters.tail:
            blocks, events = blocks[-filters.tail:], events[-filters.tail:]
        lines = human(blocks, events)
        count = "%d command(s), %d event(s)" % (len(blocks), len(events))
    else:
        if filters.tail:
            chosen = chosen[-filters.tail:]
        lines = [line for line, dummy in chosen]
        count = "%d line(s)" % len(chosen)
    data = {"folder": folder, "run": run_id, "lines": [f for dummy, f in chosen]}
    if filters.format == "json":
        lines = json.dumps(data, indent=2, sort_keys=True).splitlines()
    notes = _notes(entries, filters) if not chosen else []
    return lines + notes, data, "%s from %s%s" % (count, folder, "; " + notes[0] if notes else "")


def _notes(entries: list, filters: Filters) -> list[str]:
    """Why nothing matched: the values the lines have for each field filtered on."""
    out = []
    for key, wanted in (("worker", filters.workers), ("job", filters.jobs), ("phase", (filters.phase,)),
                        ("event", (filters.event,))):
        known = sorted({f.get(key) for dummy, f in entries if f.get(key)})
        for want in (w for w in wanted if w):
            if not any(_matches(k, want) for k in known):
                out.append("no line has the %s %s%s (the %ss in these logs: %s)" % (
                    key, want, did_you_mean(want, known), key, ", ".join(known) or "none"))
    return out

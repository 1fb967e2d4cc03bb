# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand run_command: choose the workers, the command and the batches, and report each worker's output
(no Ansible imports).

maand (docs/reference/cli/run-command.md, runcommand/execute.go) runs a shell command on the workers (all
by default, `--workers` and `--labels` narrow it) in `/opt/worker/$BUCKET_ID` (the login folder when the
bucket was never deployed there), with BUCKET_ID and WORKER_IP exported; without a command it runs
`workspace/command.sh`. `-c N` runs it N workers at a time, batch after batch, and stops at the first
batch where it failed; `--health_check` health-checks every job after each batch and stops when one is
unhealthy. Here `-e maand_workers=h1,h2`, `-e maand_labels=web` and `--limit` choose the workers,
`-e maand_batch=N` and `-e maand_health_check=true` are maand's `-c N` and `--health_check`; an unknown
worker or label is refused with a "did you mean"; the report has a header per worker, its stdout and
stderr and its exit status, and the run fails when the command failed, or could not run, anywhere.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Iterable, Mapping, Sequence

from ..bucket import LogCommand, RunLog, summarize
from ..bucket.problems import did_you_mean
from ..errors import MaandError


class RunCommandError(MaandError):
    """Bad input (the message names the extra var and the fix)."""


def split_names(value: Any) -> list:
    """A comma-separated string or a list -> names, trimmed, empty ones dropped, order kept."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        name = str(item).strip()
        if name and name not in out:
            out.append(name)
    return out


COMMAND_FILE = "workspace/command.sh"  # maand's default command (runcommand/execute.go defaultCommandFile)


@dataclasses.dataclass(frozen=True)
class Command:
    """The script to run and how the report names it (the command itself, or workspace/command.sh)."""

    script: str
    label: str


def load_command(cmd: Any, bucket_dir: str | None) -> Command:
    """maand_cmd when given, else the bucket's workspace/command.sh (maand's default). Raises RunCommandError
    when neither is there, or the file is empty or unreadable."""
    if isinstance(cmd, str) and cmd.strip():
        return Command(cmd, "`%s`" % cmd.strip())
    if cmd not in (None, "") and not isinstance(cmd, str):
        raise RunCommandError("maand_cmd must be a shell command (a string), not %s; nothing was run"
                              % type(cmd).__name__)
    path = os.path.join(bucket_dir or ".", COMMAND_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            script = handle.read()
    except FileNotFoundError:
        raise RunCommandError("no command: pass it as -e maand_cmd='uptime', or write it to %s (maand's default "
                              "command when none is given); it runs with bash in /opt/worker/<bucket_id> on every "
                              "chosen worker, BUCKET_ID and WORKER_IP set; nothing was run" % path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunCommandError("%s: cannot read it (%s); nothing was run. Fix: make it a readable UTF-8 text file, "
                              "or pass the command as -e maand_cmd='...'" % (path, exc)) from None
    if not script.strip():
        raise RunCommandError("%s is empty, and no maand_cmd was given; nothing was run. Fix: write the command "
                              "into it, or pass -e maand_cmd='...'" % path)
    return Command(script, COMMAND_FILE)


def check_batch(value: Any) -> int:
    """maand_batch (maand's `-c`): how many workers run the command at a time, a positive integer;
    0 when not given (every chosen worker in one batch). Raises RunCommandError otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    size = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and value.strip().isdigit():
        size = int(value.strip())
    if size is None or size < 1:
        raise RunCommandError("maand_batch must be a whole number of workers, at least 1 (maand's -c), not %r; "
                              "nothing was run. Fix: -e maand_batch=1 runs the command one worker at a time"
                              % (value,))
    return size


def check_delay(value: Any) -> int:
    """maand_health_check_delay: whole seconds between a batch and its health check (maand: 10), >= 0."""
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not text.isdigit():
        raise RunCommandError("maand_health_check_delay must be a whole number of seconds, 0 or more, not %r "
                              "(maand waits 10 s); nothing was run" % (value,))
    return int(text)


def batches(hosts: Sequence[str], size: int) -> list:
    """The chosen workers cut into batches of `size` in order, the last one shorter (maand's
    utils.NewBatchIterator and Ansible's `serial`: 10 workers by 3 run 3, 3, 3, 1); size 0 = one batch."""
    hosts = list(hosts)
    if size <= 0 or size >= len(hosts):
        return [hosts] if hosts else []
    return [hosts[i:i + size] for i in range(0, len(hosts), size)]


@dataclasses.dataclass(frozen=True)
class Batch:
    """Where one batch stands among all: its number (from 1), how many there are, its workers and the
    workers of the batches after it (not run when this one fails)."""

    number: int
    total: int
    hosts: tuple
    later: tuple

    def name(self) -> str:
        return "batch %d of %d" % (self.number, self.total)


def locate(chosen: Sequence[str], batch_hosts: Sequence[str], size: int) -> Batch:
    """The batch of `chosen` (cut by `size`) that holds the hosts of `batch_hosts` (Ansible's
    ansible_play_batch). Raises RunCommandError when they are not one of its batches."""
    cut = batches(chosen, size)
    wanted = set(batch_hosts)
    for number, hosts in enumerate(cut, 1):
        if wanted and wanted <= set(hosts):
            later = tuple(h for rest in cut[number:] for h in rest)
            return Batch(number, len(cut), tuple(hosts), later)
    raise RunCommandError("internal: the play's batch %s is not a batch of the chosen workers %s (maand_batch %s)"
                          % (", ".join(batch_hosts) or "(empty)", ", ".join(chosen), size or "all"))


def check_split(raw_extra_vars: Iterable[str]) -> None:
    """Refuse `-e maand_cmd=echo hi` (shell quotes already gone): Ansible reads a key=value -e at the
    spaces, so maand_cmd would be `echo` and the rest dropped without a word."""
    for raw in raw_extra_vars or ():
        if not isinstance(raw, str):
            continue
        text = raw.strip()
        if not text.startswith("maand_cmd="):
            continue
        rest = text[len("maand_cmd="):]
        words = rest.split()
        if rest[:1] not in ("'", '"') and len(words) > 1 and any("=" not in w for w in words[1:]):
            raise RunCommandError("-e %s is read by Ansible as key=value pairs split at the spaces, so maand_cmd "
                                  "would be only %r; nothing was run. Fix: quote the command inside the -e value: "
                                  "-e \"maand_cmd='%s'\" (or -e '{\"maand_cmd\": \"...\"}')" % (raw, words[0], rest))


def select(workers: Mapping[str, Sequence[str]], play_hosts: Iterable[str], names: Sequence[str],
           labels: Sequence[str]) -> list:
    """The chosen workers, in play order: the play's hosts (--limit), narrowed to `names` when given
    and to the workers holding any of `labels` when given. `workers` maps every catalog worker to its
    labels. Raises RunCommandError naming unknown workers or labels, or an empty choice."""
    known = sorted(workers)
    problems = ["maand_workers: unknown worker %s%s" % (name, did_you_mean(name, known))
                for name in names if name not in workers]
    all_labels = sorted({str(label).lower() for ls in workers.values() for label in ls})
    problems += ["maand_labels: no worker has the label %s%s" % (label, did_you_mean(label, all_labels))
                 for label in labels if label.lower() not in all_labels]
    if problems:
        raise RunCommandError("%s; nothing was run (workers: %s; labels: %s)" % (
            "; ".join(problems), ", ".join(known) or "none", ", ".join(all_labels) or "none"))
    wanted = {label.lower() for label in labels}
    chosen = [h for h in play_hosts if h in workers and (not names or h in names)
              and (not wanted or wanted & {str(label).lower() for label in workers[h]})]
    if not chosen:
        raise RunCommandError("no worker is chosen (maand_workers: %s; maand_labels: %s; the play's hosts after "
                              "--limit: %s); nothing was run. Fix: name workers of this bucket (%s)" % (
                                  ", ".join(names) or "all", ", ".join(labels) or "any",
                                  ", ".join(play_hosts) or "none", ", ".join(known) or "none"))
    return chosen


@dataclasses.dataclass
class Outcome:
    host: str
    status: str  # ok, failed, unreachable, not run
    rc: Any = None
    stdout: str = ""
    stderr: str = ""
    msg: str = ""


def outcome(host: str, reg: Mapping[str, Any] | None) -> Outcome:
    """One worker's outcome from its registered ansible.builtin.shell result."""
    if not isinstance(reg, Mapping) or not reg or reg.get("skipped"):  # {}: no result was registered
        return Outcome(host, "not run", msg="the command did not run on this worker (it failed or was skipped earlier)")
    if reg.get("unreachable"):
        return Outcome(host, "unreachable", msg=str(reg.get("msg") or "unreachable").strip())
    rc = reg.get("rc")
    status = "ok" if rc == 0 and not reg.get("failed") else "failed"
    return Outcome(host, status, rc, str(reg.get("stdout") or ""), str(reg.get("stderr") or ""),
                   "" if "rc" in reg else str(reg.get("msg") or "").strip())


def report(outcomes: Sequence[Outcome], cmd: str, batch: Batch | None = None) -> tuple:
    """(lines, problems): a header per worker, its stdout and stderr, its exit status; a problem per
    worker where the command failed or did not run (with the fix for an unreachable worker), and, when
    a batch failed with batches after it, one naming the workers left alone."""
    lines, problems = [], []
    for item in outcomes:
        status = "exit %s" % item.rc if item.rc is not None else item.status
        lines.append("=== %s (%s) ===" % (item.host, status))
        if item.stdout:
            lines.extend(item.stdout.splitlines())
        if item.stderr:
            lines.append("--- stderr ---")
            lines.extend(item.stderr.splitlines())
        if item.msg:
            lines.append(item.msg)
        if item.status == "unreachable":
            problems.append("worker %s is unreachable: %s; fix: check that it is up and that SSH works "
                            "(ansible -i <bucket>/maand.yml %s -m ping), then run it again (-e maand_workers=%s)"
                            % (item.host, item.msg.splitlines()[-1] if item.msg else "", item.host, item.host))
        elif item.status == "not run":
            problems.append("worker %s: %s" % (item.host, item.msg))
        elif item.status == "failed":
            status = item.rc if item.rc is not None else "without a status: %s" % item.msg
            problems.append("worker %s: %s exited %s" % (item.host, cmd, status))
    ok = sum(1 for item in outcomes if item.status == "ok")
    head = "run_command: " if batch is None or batch.total == 1 else "run_command: %s: " % batch.name()
    lines.append("%sok on %d of %d worker(s)" % (head, ok, len(outcomes)))
    if problems and batch is not None and batch.later:
        problems.append(stopped(batch, "the command failed"))
    return lines, problems


def stopped(batch: Batch, why: str) -> str:
    """The line naming the workers a failed batch left alone (maand stops at the first failed batch)."""
    return ("stopped after %s (%s): not run on %s; fix what failed, then run the rest: -e maand_workers=%s"
            % (batch.name(), why, ", ".join(batch.later), ",".join(batch.later)))


def health_problem(batch: Batch, result: Mapping[str, Any] | None) -> str | None:
    """None when the health check after `batch` passed (the maand.core.health_check result says
    `healthy`, which a task's failed_when leaves alone); else the error: what was unhealthy (its summary
    and failed checks) and the workers left alone."""
    result = result if isinstance(result, Mapping) else {}
    if result.get("healthy") is True and not result.get("failed"):
        return None
    bad = ["%s on %s: %s %s" % (c.get("job"), c.get("worker"), c.get("check"), c.get("reason") or "failed")
           for c in result.get("checks") or () if isinstance(c, Mapping) and not c.get("ok")]
    summary = str(result.get("msg") or "the health check did not run").strip()
    text = "the health check after %s (%s) failed: %s" % (batch.name(), ", ".join(batch.hosts), summary)
    if bad:
        text += "\n  " + "\n  ".join(bad)
    if batch.later:
        text += "\n" + stopped(batch, "unhealthy")
    return text


def _seconds(delta: Any) -> float:
    """The shell module's delta ("0:00:01.250000") in seconds, 0 when it has none."""
    try:
        hours, minutes, seconds = str(delta).split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return 0.0


def log_outcome(log: RunLog, host: str, reg: Mapping[str, Any] | None, label: str) -> None:
    """One worker's registered shell result in the bucket logs, as maand logs run_command (phase run_command,
    action ssh): begin, the stdout lines, the stderr lines, end with its exit (-1 when it did not run); the lines
    are stamped when the report sees them (the shell module keeps no time per line)."""
    if not isinstance(reg, Mapping) or not reg or reg.get("skipped"):
        return
    seconds = _seconds(reg.get("delta"))
    lines = [(None, "stdout", l) for l in str(reg.get("stdout") or "").splitlines()]
    lines += [(None, "stderr", l) for l in str(reg.get("stderr") or "").splitlines()]
    if "rc" not in reg and reg.get("msg"):
        lines.append((None, "stderr", str(reg["msg"]).strip()))
    rc = reg.get("rc") if isinstance(reg.get("rc"), int) else -1
    log.command(host, LogCommand("", "run_command", "ssh", summarize([label.strip("`")])),
                time.time() - seconds, seconds, rc, lines)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand run_command: choose the workers, and report each worker's output (no Ansible imports).

maand (docs/reference/cli/run-command.md) runs a shell command on the workers (all by default,
`--workers` and `--labels` narrow it) in `/opt/worker/$BUCKET_ID` (the login folder when the bucket
was never deployed there), with BUCKET_ID and WORKER_IP exported. Here `-e maand_workers=h1,h2`,
`-e maand_labels=web` and `--limit` choose; an unknown worker or label is refused with a "did you
mean"; the report has a header per worker, its stdout and stderr and its exit status, and the run
fails when the command failed, or could not run, anywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from ..bucket.problems import did_you_mean


class RunCommandError(Exception):
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


def check_command(cmd: Any) -> str:
    if not isinstance(cmd, str) or not cmd.strip():
        raise RunCommandError("no command: pass it as -e maand_cmd='uptime' (it runs with bash in "
                              "/opt/worker/<bucket_id> on every chosen worker, BUCKET_ID and WORKER_IP set)")
    return cmd


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


def report(outcomes: Sequence[Outcome], cmd: str) -> tuple:
    """(lines, problems): a header per worker, its stdout and stderr, its exit status; a problem per
    worker where the command failed or did not run (with the fix for an unreachable worker)."""
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
            problems.append("worker %s: `%s` exited %s" % (item.host, cmd, status))
    ok = sum(1 for item in outcomes if item.status == "ok")
    lines.append("run_command: ok on %d of %d worker(s)" % (ok, len(outcomes)))
    return lines, problems

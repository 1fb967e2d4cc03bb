# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.job_logs``: the tail of a job's own ``logs/`` on each of its workers, one section per worker (as
``nomad alloc logs`` and ``kubectl logs -l``; pure, no Ansible imports).

``select`` checks the job (a "did you mean" for a typo), the workers (maand_job_workers) and the number of lines
(maand_lines) and names the workers holding an allocation of the job that is not removed (an active or disabled
one: a stopped job's logs are still there), in the catalog's order. On each, the playbook runs
``health.READ_NEWEST_LOG`` in ``/opt/worker/<bucket_id>/jobs/<job>``: the newest file of ``logs/`` (as ``ls -t``),
its last N lines, read without following a link at any step (a symlink or a hard link is named, not read: the
folder is the job's, and the read may run as root). ``report`` prints one section per worker.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from ..bucket import did_you_mean
from ..errors import MaandError
from ..health import READ_NEWEST_LOG
from ..worker import job_root

DEFAULT_LINES = 50
MAX_LINES = 10000


class JobLogsError(MaandError):
    """Bad input (the message names the extra var and the fix); nothing was read."""


def check_lines(value: Any) -> int:
    """maand_lines: a whole number of lines, 1 to MAX_LINES (DEFAULT_LINES when not given)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_LINES
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not text.isdigit() or not 0 < int(text) <= MAX_LINES:
        raise JobLogsError("maand_lines must be a whole number of lines from 1 to %d, not %r; nothing was read. Fix: "
                           "-e maand_lines=%d" % (MAX_LINES, value, DEFAULT_LINES))
    return int(text)


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The workers to read on (catalog order), the argv that reads there and the lines asked for."""

    hosts: tuple
    argv: tuple
    lines: int


def select(catalog: Mapping[str, Any], job: str, workers: Sequence[str], lines: Any,
           play_hosts: Sequence[str]) -> Chosen:
    """The job's workers (not removed; narrowed to `workers`, and to the play's hosts: --limit) and the command
    reading its logs there. Raises JobLogsError naming the problem and the fix."""
    count = check_lines(lines)
    if not catalog:
        raise JobLogsError("the bucket has no data/catalog.json: run maand.core.build (and deploy) first; nothing was read")
    jobs = [j.get("name") for j in catalog.get("jobs") or []]
    if not job:
        raise JobLogsError("no job: pass -e maand_job=<job> (this bucket's jobs: %s); nothing was read"
                           % (", ".join(jobs) or "none"))
    if job not in jobs:
        raise JobLogsError("maand_job: unknown job %s%s (this bucket's jobs: %s); nothing was read" % (
            job, did_you_mean(job, jobs), ", ".join(jobs) or "none"))
    known = [w.get("host") for w in catalog.get("workers") or []]
    unknown = [w for w in workers if w not in known]
    if unknown:
        raise JobLogsError("maand_job_workers: unknown worker %s%s (workers: %s); nothing was read" % (
            ", ".join(unknown), did_you_mean(unknown[0], known), ", ".join(known) or "none"))
    held = [a.get("worker") for a in catalog.get("allocations") or []
            if a.get("job") == job and a.get("state") != "removed"]
    hosts = [h for h in held if (not workers or h in workers) and h in play_hosts]
    if not hosts:
        raise JobLogsError("job %s has no allocation%s%s; nothing was read (its allocations: %s). Fix: name workers "
                           "that hold it (-e maand_job_workers=...), or deploy it first" % (
                               job, " on " + ", ".join(workers) if workers else "",
                               " among the play's hosts (--limit)" if held and not workers else "",
                               ", ".join(held) or "none"))
    folder = job_root(str(catalog.get("bucket_id")), job)
    return Chosen(tuple(hosts), ("python3", "-I", "-c", READ_NEWEST_LOG, str(count), folder), count)


def _section(job: str, host: str, reg: Mapping[str, Any] | None) -> tuple[list[str], str | None]:
    """(lines, problem) of one worker: its header and the log's last lines, or why there are none."""
    head = "=== %s@%s" % (job, host)
    if not isinstance(reg, Mapping) or not reg or reg.get("skipped"):
        return [head + " ===", "(not read on this worker)"], "worker %s: the logs were not read" % host
    if reg.get("unreachable"):
        msg = str(reg.get("msg") or "unreachable").strip().splitlines()[-1:]
        return [head + " ===", "(unreachable: %s)" % " ".join(msg)], \
            "worker %s is unreachable; fix: check that it is up and that SSH works, then run it again" % host
    if reg.get("rc") not in (0, None) or reg.get("failed") and "rc" not in reg:
        text = str(reg.get("stderr") or reg.get("msg") or "").strip().splitlines()[-3:]
        return [head + " ===", "(could not read: %s)" % " | ".join(text)], "worker %s: %s" % (host, " | ".join(text))
    out = str(reg.get("stdout") or "").splitlines()
    if not out:
        return [head + " ===", "(no log file in logs/)"], None
    first = out[0]
    if first.startswith("--- ") and first.endswith(":"):
        return ["%s %s ===" % (head, first[4:-1])] + out[1:], None
    return [head + " ===", first[4:] if first.startswith("--- ") else first] + out[1:], None


def report(job: str, hosts: Sequence[str], answers: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(lines, problems): one section per worker (=== job@worker logs/<file> ===, then its last lines), then a
    summary line; a problem per worker whose logs could not be read."""
    lines, problems = [], []
    for host in hosts:
        section, problem = _section(job, host, answers.get(host))
        lines += section
        if problem:
            problems.append(problem)
    lines.append("job_logs: %s on %d of %d worker(s)" % (job, len(hosts) - len(problems), len(hosts)))
    return lines, problems

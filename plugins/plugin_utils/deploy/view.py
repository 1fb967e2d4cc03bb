# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deploy as an operator reads it (pure, no Ansible imports): the plan in one line, one live line
per rolling batch, the verdict table and the final line. Used by the deploy_plan and deploy_finish
actions (their results carry the data) and by the maand.core.deploy stdout callback. And --diff:
``content_diff`` (deploy_plan: what to compare on each worker) and ``host_diff`` (deploy_diff: one worker's
promoted files read and set against what the deploy ships).

    plan: 2 restart, 1 stop, 1 remove, 3 unchanged; gates: api
    api upgrade batch 1/3: waiting for 10.0.0.1 http :30000/health (attempt 4/30, 3.1 s)
    JOB  WORKER    ACTION   RESULT       GATE   VERSION
    api  10.0.0.1  restart  restarted    3.4 s  1.0.0 -> 1.1.0
    deploy done: 2 restarted, 1 unreachable, 3 unchanged
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from . import pin, remote

# plan actions in the order the plan line names them ("skip" reads "unchanged")
PLAN_ORDER = ("start", "restart", "reload", "sync", "hold", "stop", "remove", "purge", "unreachable", "skip")
DONE_WORD = {"start": "started", "restart": "restarted", "reload": "reloaded", "sync": "synced",
             "stop": "stopped", "remove": "removed", "purge": "purged", "rollback": "rolled back"}
FAILED_WORD = {"failed": "failed", "unreachable": "unreachable", "gate": "gate failed", "reverted": "reverted",
               "unpromoted": "not promoted"}
# results in the order the final line counts them
RESULT_ORDER = ("started", "restarted", "reloaded", "synced", "rolled back", "stopped", "removed", "purged",
                "failed", "gate failed", "reverted", "not promoted", "unreachable", "not run", "held", "unchanged")
# "reverted" (auto_revert): the batch failed, the last promoted version runs again; the deploy failed
NOT_RUNNING = "not running (`make status`"  # the reason deploy/reconcile.py gives a start of a dead allocation
BAD_RESULTS = ("failed", "gate failed", "reverted", "not promoted", "unreachable", "not run")


def _count_words(counts, order):
    known = [(k, counts[k]) for k in order if counts.get(k)]
    extra = sorted((k, v) for k, v in counts.items() if k not in order and v)
    return ", ".join("%d %s" % (v, k) for k, v in known + extra)


def plan_gates(plan):
    """The jobs whose batches wait for a health gate in this plan (sorted)."""
    return sorted({g["job"] for s in plan.get("steps") or [] for g in s.get("gates") or [] if g.get("job")})


def plan_summary(plan):
    """'plan: 2 restart, 1 stop, 3 unchanged; gates: api' ('plan: nothing to do' for an empty plan)."""
    counts = {}
    for row in plan.get("rows") or []:
        action = "unchanged" if row.get("action") == "skip" else row.get("action")
        counts[action] = counts.get(action, 0) + 1
    order = tuple("unchanged" if a == "skip" else a for a in PLAN_ORDER)
    text = "plan: %s" % (_count_words(counts, order) or "nothing to do")
    gates = plan_gates(plan)
    if gates:
        text += "; gates: %s" % ", ".join(gates)
    if plan.get("failures"):
        text += "; %d allocation(s) cannot be deployed" % len(plan["failures"])
    return text


# --- progress lines -----------------------------------------------------------------------------

def progress_line(record):
    """One line for a progress record (deploy/progress.py), or None for a record that shows nothing."""
    if record.get("kind") == "say":
        return str(record.get("msg") or "")
    if record.get("kind") != "gate":
        return None
    head = "%s:" % (record.get("batch") or "%s gate" % record.get("job"))
    state = record.get("state")
    if state == "wait":
        line = "%s waiting for %s %s (attempt %s/%s, %.1f s)" % (
            head, record.get("host"), record.get("check"), record.get("attempt"), record.get("attempts"),
            float(record.get("elapsed") or 0.0))
        return line
    hosts = ", ".join(record.get("hosts") or [])
    if state == "pass":
        return "%s health gate passed on %s (%.1f s)" % (head, hosts, float(record.get("elapsed") or 0.0))
    if state == "fail":
        return "%s health gate FAILED on %s after %.1f s (%s attempts)" % (
            head, hosts, float(record.get("elapsed") or 0.0), record.get("attempts"))
    return None


def _names(hosts, most=4):
    return ", ".join(hosts[:most]) + (" and %d more" % (len(hosts) - most) if len(hosts) > most else "")


def step_line(step, hosts, ran=None):
    """The line shown when a step's agents start: 'wave 1: api upgrade batch 2/3: applying on
    10.0.0.2; promoting on 10.0.0.1' (hosts without ops of the step only promote earlier batches).
    With ran ({host: [{"job", "revert"}]}: the ops the step's requests hold) each batch names exactly the
    hosts it acts on, a revert slot shows only when its revert runs, and worker metadata is named apart."""
    what = "final promotions" if step is None else step.get("label") or "step %s" % step.get("index")
    if not hosts:
        return "%s: nothing to apply" % what
    if ran is not None and step is not None:
        return _ran_line(step, what, hosts, ran)
    with_ops = [h for h in hosts if step is not None and h in (step.get("ops") or {})]
    promoting = [h for h in hosts if h not in with_ops]
    parts = []
    if with_ops:
        parts.append("applying on %s" % _names(with_ops))
    if promoting:
        parts.append("promoting on %s" % _names(promoting))
    return "%s: %s" % (what, "; ".join(parts))


def _ran_line(step, what, hosts, ran):
    """step_line from the ops that run: 'wave 0: api upgrade batch 1/2 on h1; web start batch 1/1 on h2, h3'."""
    wave, sep, labels = what.partition(": ")
    if not sep:
        wave, labels = "", what
    parts, named = [], set()
    for label in labels.split("; "):
        job = label.split(" ", 1)[0]
        on = [h for h in hosts if any(o.get("job") == job and not o.get("revert") for o in ran.get(h) or [])]
        if on and "revert (if " not in label:
            parts.append("%s: applying on %s" % (label, _names(on)))
            named.update(on)
    for job in sorted({o.get("job") for ops in ran.values() for o in ops or [] if o.get("revert")}):
        on = [h for h in hosts if any(o.get("job") == job and o.get("revert") for o in ran.get(h) or [])]
        parts.append("%s revert (auto_revert): applying on %s" % (job, _names(on)))
        named.update(on)
    meta = [h for h in hosts if h not in named and any(o.get("job") is None for o in ran.get(h) or [])]
    if meta:
        parts.append("worker metadata on %s" % _names(meta))
    promoting = [h for h in hosts if not ran.get(h)]
    if promoting:
        parts.append("promoting on %s" % _names(promoting))
    if not parts:
        return "%s: nothing to apply" % what
    return (wave + ": " if wave else "") + "; ".join(parts)


# --- the verdict --------------------------------------------------------------------------------

@dataclass
class Verdict:
    job: str
    worker: str
    action: str
    result: str
    gate_seconds: object  # float or None
    before: str
    after: str
    note: str = ""  # "was not running": the state read's `make status` said so, the deploy started it again

    def to_dict(self):
        return asdict(self)


def _op_id(row):
    if row.get("action") == "purge" or row.get("job") is None:
        return "purge@%s" % row.get("worker")
    return "%s@%s" % (row.get("job"), row.get("worker"))


def _result(row, done_ids, failed_ops):
    action = row.get("action")
    if action == "skip":
        return "unchanged"
    if action == "unreachable":
        return "unreachable"
    if action == "hold":  # canary: waits for -e maand_promote=<job>
        return "held"
    op_id = _op_id(row)
    if op_id in failed_ops:
        return FAILED_WORD.get(failed_ops[op_id], "failed")
    if op_id in done_ids:
        return DONE_WORD.get(action, action)
    return "not run"


def verdict(plan, done, failed_ops, gate_times=None):
    """[Verdict] for every row of the plan. done: the run state's done list; failed_ops: its
    {op id: why}; gate_times: {(job, worker): seconds} (deploy/progress.gate_times)."""
    done_ids = {d.get("id") for d in done or []}
    gate_times = gate_times or {}
    out = []
    for row in plan.get("rows") or []:
        result = _result(row, done_ids, failed_ops or {})
        before = row.get("from_version") or "-"
        if row.get("action") in ("stop", "remove", "purge"):
            after = "-"
        elif row.get("action") in ("skip", "unreachable", "hold"):
            after = before
        else:
            after = row.get("to_version") or "-"
        note = "was not running" if (row.get("reason") or "").startswith(NOT_RUNNING) else ""
        out.append(Verdict(job=row.get("job") or "*", worker=row.get("worker") or "", action=row.get("action") or "",
                           result=result, gate_seconds=gate_times.get((row.get("job"), row.get("worker"))),
                           before=before, after=after, note=note))
    return out


def _version(v):
    if v.note:
        return "%s (%s)" % (_plain_version(v), v.note)
    return _plain_version(v)


def _plain_version(v):
    if v.result == "reverted":
        return "%s (%s reverted)" % (v.before, v.after)
    if v.before == v.after:
        return v.after
    if v.result in BAD_RESULTS:
        return "%s (%s not deployed)" % (v.before, v.after)
    return "%s -> %s" % (v.before, v.after)


def verdict_table(rows):
    """The verdict as aligned lines; a job's unchanged allocations fold into one row."""
    if not rows:
        return []
    table = [("JOB", "WORKER", "ACTION", "RESULT", "GATE", "VERSION")]
    unchanged = {}
    for v in rows:
        if v.result == "unchanged":
            unchanged.setdefault(v.job, []).append(v)
    shown = set()
    for v in rows:
        if v.result == "unchanged" and len(unchanged[v.job]) > 1:
            if v.job in shown:
                continue
            shown.add(v.job)
            group = unchanged[v.job]
            versions = sorted({g.after for g in group})
            table.append((v.job, "(%d workers)" % len(group), "skip", "unchanged", "-", ", ".join(versions)))
            continue
        gate = "-" if v.gate_seconds is None else "%.1f s" % float(v.gate_seconds)
        table.append((v.job, v.worker, v.action, v.result, gate, _version(v)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    return [("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]).rstrip() for r in table]


def result_counts(rows):
    counts = {}
    for v in rows:
        counts[v.result] = counts.get(v.result, 0) + 1
    return counts


def count_words(counts):
    """'2 restarted, 1 unreachable, 3 unchanged' of {result: count}, in the order the final line counts them."""
    return _count_words(counts, RESULT_ORDER)


def done_line(rows, problems=0):
    """'deploy done: 2 restarted, 1 unreachable, 3 unchanged' (plus the number of other problems)."""
    text = "deploy done: %s" % (_count_words(result_counts(rows), RESULT_ORDER) or "nothing to do")
    bad = sum(1 for v in rows if v.result in BAD_RESULTS)
    if problems > bad:
        text += " (%d problem(s), see above)" % problems
    return text


def worker_results(rows):
    """{worker: "ok" | "unreachable" | "failed"}: unreachable when any of its allocations was, failed
    when one failed (an allocation not run because its job failed elsewhere leaves the worker ok)."""
    out = {}
    for v in rows:
        if not v.worker:
            continue
        now = out.get(v.worker, "ok")
        if v.result == "unreachable":
            now = "unreachable"
        elif v.result in BAD_RESULTS and v.result != "not run" and now == "ok":
            now = "failed"  # "not run": its job was stopped elsewhere, the worker did nothing wrong
        out[v.worker] = now
    return out


def workers_line(rows):
    """'workers: 3 ok, 1 unreachable (10.0.0.4)'."""
    results = worker_results(rows)
    if not results:
        return ""
    parts = []
    for word in ("ok", "failed", "unreachable"):
        hosts = sorted(h for h, r in results.items() if r == word)
        if hosts:
            parts.append("%d %s%s" % (len(hosts), word, "" if word == "ok" else " (%s)" % ", ".join(hosts)))
    return "workers: " + ", ".join(parts)


# --- --diff: the content of the changed files ----------------------------------------------------------

def content_diff(plan, staging, states, failed_attempt):
    """--diff: per worker, the changed files to read there with their recorded digests (a worker's copy that
    does not match is never shown: a secret-bearing output's digest is an HMAC) and what this deploy ships at
    each (deduplicated); for a rollback, the worker's previous copy is the other side, and for a rollback after a
    failed attempt, the attempt's tree in the job folder ("live") is the worker's side and the promoted copy the
    other. failed_attempt(attempt, record): whether the worker's latest attempt is not its promoted version
    (the planner's rule)."""
    wanted, notes = pin.diff_requests(plan, staging.is_secret)
    rollback = {(r["job"], r["worker"]) for r in plan.get("rows") or [] if r.get("action") == "rollback"}
    after, blobs, promoted, previous, live = {}, pin.Blobs(), {}, {}, {}
    for host, jobs in wanted.items():
        st = states.get(host) or {}
        for job, rels in jobs.items():
            record = (st.get("deployed") or {}).get(job) or {}
            promoted.setdefault(host, {})[job] = {rel: (record.get("files") or {}).get(rel) for rel in rels}
            attempt = (st.get("attempts") or {}).get(job)
            if (job, host) in rollback and failed_attempt(attempt, record):
                live.setdefault(host, {})[job] = {rel: (attempt.get("files") or {}).get(rel) for rel in rels}
                continue
            if (job, host) in rollback:
                old = (st.get("previous") or {}).get(job) or {}
                previous.setdefault(host, {})[job] = {rel: (old.get("files") or {}).get(rel) for rel in rels}
                continue
            for rel in rels:
                key = blobs.add(pin.text_of(staging.shipped_bytes(job, host, rel)))
                after.setdefault(host, {}).setdefault(job, {})[rel] = key
    return {"hosts": sorted(set(wanted) | set(notes)), "wanted": wanted, "notes": notes, "after": after,
            "blobs": blobs.texts,
            "promoted": promoted, "previous": previous, "live": live}


@dataclass
class HostDiff:
    """host_diff()'s outcome: the diffs of one worker's files, how many were asked, why the worker's side is
    missing (a warning: a diff never fails the deploy)."""

    diffs: list = field(default_factory=list)
    files: int = 0
    warning: str | None = None

    def as_result(self):
        out = {"changed": bool(self.diffs), "files": self.files}
        if self.warning:
            out["warnings"] = [self.warning]
        if self.diffs:
            out["diff"] = self.diffs
        return out


def host_diff(spec, host, shell, python, bucket_id):
    """One worker's --diff from deploy_plan's content_diff (spec): its promoted copies of the changed files read
    in one round trip (deploy/remote.read_files through shell), each set against what the deploy ships, or,
    for a rollback, against the worker's previous copy, or (after a failed attempt) the attempt against the
    promoted copy; then the plan's notes on it."""
    wanted = (spec.get("wanted") or {}).get(host) or {}
    previous = (spec.get("previous") or {}).get(host) or {}  # rollbacks: job -> {rel: recorded digest}
    live = (spec.get("live") or {}).get(host) or {}  # rollbacks after a failed attempt: the same
    data, err = {}, None
    if wanted:
        try:
            request = {"current": wanted, "previous": {job: wanted[job] for job in previous if job in wanted},
                       "live": {job: wanted[job] for job in live if job in wanted}}
            data, err = remote.read_files(shell, python, bucket_id, request)
        # a diff must never fail the deploy
        except Exception as exc:  # pylint: disable=broad-exception-caught
            err = "%s: %s" % (type(exc).__name__, str(exc).strip()[-300:])
    data = data or {}
    warning = "--diff: cannot read the promoted files of %s: %s" % (host, err) if err else None
    diffs = _diffs(spec, host, wanted, data.get("files") or {}, data.get("previous") or {}, data.get("live") or {})
    diffs.extend({"prepared": "%s\n" % n} for n in (spec.get("notes") or {}).get(host) or [])
    return HostDiff(diffs, sum(len(v) for v in wanted.values()), warning)


def _diffs(spec, host, wanted, before, older, tried):
    """The prepared diffs of a worker's wanted files, given what it holds: before (promoted), older (previous
    promoted copy) and tried (the failed attempt's tree)."""
    previous = (spec.get("previous") or {}).get(host) or {}
    live = (spec.get("live") or {}).get(host) or {}
    after = (spec.get("after") or {}).get(host) or {}
    promoted = (spec.get("promoted") or {}).get(host) or {}
    blobs = spec.get("blobs") or {}
    diffs = []
    for job in sorted(wanted):
        for rel in wanted[job]:
            old = pin.checked_before((before.get(job) or {}).get(rel), (promoted.get(job) or {}).get(rel))
            if job in live:  # the failed attempt on the worker -> its promoted copy
                failed = pin.checked_before((tried.get(job) or {}).get(rel), live[job].get(rel))
                diffs.append({"prepared": pin.render_diff(job, host, rel, failed, old, after_label="promoted")})
                continue
            if job in previous:
                new = pin.checked_before((older.get(job) or {}).get(rel), previous[job].get(rel))
                diffs.append({"prepared": pin.render_diff(job, host, rel, old, new, after_label="previous")})
                continue
            new = blobs.get((after.get(job) or {}).get(rel)) or {"missing": True}
            diffs.append({"prepared": pin.render_diff(job, host, rel, old, new)})
    return diffs

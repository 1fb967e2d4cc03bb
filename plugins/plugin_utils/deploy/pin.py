# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinned plans, the wave picture and the bounded content diff of a deploy (no Ansible imports).

* ``plan_summary`` / ``plan_digest``: the semantic content of a deploy plan (per allocation its action,
  content hash and versions; the steps: waves, batches, which ops run where; the gates) and a sha256
  over its canonical JSON. Reasons, rendered lines, timestamps and estimates are left out; content hashes
  of secret-bearing files are HMACs (deploy/stage.py), so the digest carries no secret value.
  ``stamp`` (a stage of building the plan, deploy/plan.py) sets it and prints it; ``-e maand_plan=<hash>``
  makes the real deploy refuse when its own differs (``check_pin``), and ``describe_changes`` names what
  changed when the check's summary was kept.
* the pins: ``--check`` keeps each printed plan's summary (``keep_summary``) in ``pins_dir`` (outside the
  bucket, this user's own folder), ``pinned_summary`` reads the pinned one back. The only I/O here.
* ``wave_picture``: ``wave 0 api --(command_ready >= 1.0)--> wave 1 poller`` from the catalog's
  ``deployment_seq`` and command ``demands``.
* ``diff_requests`` / ``render_diff``: which changed files of which allocation to show with ``--diff``
  (at most ``MAX_FILES`` per allocation, secret-bearing outputs never) and their unified diffs (at most
  ``MAX_LINES`` lines each; binary or large files named only).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile

from ..bucket import storage
from ..errors import MaandError
from ..worker import agent

DIGEST_FORMAT = 1
SHORT = 16          # hex digits printed
MIN_PIN = 12        # shortest prefix -e maand_plan accepts
MAX_FILES = 10      # changed files shown per allocation
MAX_LINES = 120     # diff lines shown per file
MAX_BYTES = agent.MAX_FILE_BYTES  # the same limit on both sides of a diff
MAX_TOTAL = 4 * 1024 * 1024  # new content a --diff carries per run (distinct texts, all workers together)
ENV_PREFIX = agent.ENV_PREFIX


# --- plan hash -------------------------------------------------------------------------------------

def _op_key(op):
    return [op.get("id"), op.get("kind"), op.get("action"), op.get("target"), bool(op.get("sync")),
            bool(op.get("restore"))]


def plan_summary(plan):
    """The parts of a plan that say what it does (JSON-able, key order irrelevant)."""
    rows = sorted(([r.get("job"), r.get("worker"), r.get("state"), r.get("action"), r.get("hash"),
                    r.get("from_version"), r.get("to_version"), r.get("batch")] for r in plan.get("rows") or []),
                  key=lambda r: [str(x) for x in r])
    steps = []
    for step in plan.get("steps") or []:
        ops = {host: [_op_key(o) for o in host_ops] for host, host_ops in (step.get("ops") or {}).items()}
        gates = sorted([g.get("job"), sorted(g.get("hosts") or [])] for g in step.get("gates") or [])
        steps.append({"wave": step.get("wave"), "label": step.get("label"), "ops": ops, "gates": gates})
    return {"format": DIGEST_FORMAT, "bucket_id": plan.get("bucket_id"), "update_seq": plan.get("update_seq"),
            "options": plan.get("options") or {}, "rows": rows, "steps": steps,
            "failures": sorted([f.get("job") or "", f.get("worker") or ""] for f in plan.get("failures") or []),
            "prune": sorted([p.get("job") or "", p.get("worker") or ""] for p in plan.get("prune") or []),
            "dead_workers": sorted(plan.get("dead_workers") or [])}


def canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def plan_digest(plan):
    """sha256 hex of the plan's summary (stable across runs and dict orderings)."""
    return hashlib.sha256(canonical(plan_summary(plan)).encode("utf-8")).hexdigest()


def stamp(plan, catalog):
    """The plan (a records.Plan) stamped with its hash: plan_hash, the wave picture after the head line and a
    last line "plan hash: <16 hex> (pin this plan: -e maand_plan=<16 hex>)". A new plan."""
    digest = plan_digest(plan.to_json())
    lines = plan.lines[:1] + wave_picture(catalog) + plan.lines[1:]
    lines.append("plan hash: %s (pin this plan: -e maand_plan=%s)" % (digest[:SHORT], digest[:SHORT]))
    return plan.replace(plan_hash=digest, lines=lines)


def pin_error(given):
    """An error for a malformed maand_plan value, or None."""
    text = str(given or "").strip().lower()
    if len(text) < MIN_PIN or any(c not in "0123456789abcdef" for c in text):
        return ("maand_plan: %r is not a plan hash; give the hash a --check --diff run printed (at least %d hex "
                "digits)" % (given, MIN_PIN))
    return None


def pin_matches(given, digest):
    return digest.startswith(str(given).strip().lower())


def _row_text(row):
    job, worker, state, action, digest, old, new, batch = row
    text = "%s %s" % (action, ("hash %s" % digest[:12]) if digest else "")
    if old != new and new is not None:
        text += " %s -> %s" % (old or "-", new)
    return text.strip()


def describe_changes(old, new, limit=20):
    """Lines naming what differs between two plan summaries (the pinned one first)."""
    lines = []
    old_rows = {(r[0], r[1]): r for r in old.get("rows") or []}
    new_rows = {(r[0], r[1]): r for r in new.get("rows") or []}
    for key in sorted(set(old_rows) | set(new_rows), key=lambda k: (str(k[0]), str(k[1]))):
        a, b = old_rows.get(key), new_rows.get(key)
        name = "%s@%s" % (key[0] or "*", key[1])
        if a is None:
            lines.append("%s: new in the plan: %s" % (name, _row_text(b)))
        elif b is None:
            lines.append("%s: no longer in the plan (was %s)" % (name, _row_text(a)))
        elif a[:7] != b[:7]:
            lines.append("%s: %s, pinned plan: %s" % (name, _row_text(b), _row_text(a)))
        elif a[7] != b[7]:
            lines.append("%s: batch %s, pinned plan: %s" % (name, b[7], a[7]))
    for key, what in (("options", "the options"), ("update_seq", "the workers' update_seq (another deploy ran?)"),
                      ("prune", "the catalog rows to prune"), ("failures", "the unreachable allocations"),
                      ("bucket_id", "the bucket id")):
        if old.get(key) != new.get(key):
            lines.append("%s changed: %s -> %s" % (what, canonical(old.get(key)), canonical(new.get(key))))
    if not lines and old.get("steps") != new.get("steps"):
        lines.append("the steps (waves, batches, worker metadata) changed")
    if len(lines) > limit:
        lines = lines[:limit] + ["(+%d more differences)" % (len(lines) - limit)]
    return lines


# --- the pins --------------------------------------------------------------------------------------

class PinRefused(MaandError):
    """The deploy is refused over -e maand_plan (another plan than the one computed now), or (check mode)
    the plan's summary cannot be kept because the pins folder is not this user's own."""

    kind = "refused"


def pins_dir(bucket_id):
    """Where --check keeps the summaries of the plans it printed (no secrets: actions, hashes, versions), so
    a refused -e maand_plan can name what changed; outside the bucket, which check mode never writes. It and
    its parent, names others can guess in the shared temp folder, must be this user's own folders that no
    one else may write (bucket/storage.own_private_dir)."""
    return os.path.join(tempfile.gettempdir(), "maand-plans-%d" % os.getuid(), str(bucket_id))


def keep_summary(bucket_id, digest, summary):
    """Keep a --check plan's summary; a pins folder that is not this user's own fails the check run
    (UnsafeFolder, naming it and the fix), a file system that refuses the write only loses a message."""
    folder = pins_dir(bucket_id)
    try:
        storage.own_private_dir(os.path.dirname(folder))
        storage.own_private_dir(folder)
        with open(os.path.join(folder, digest + ".json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle, sort_keys=True)
    except OSError:
        pass  # only a better message is lost


def pinned_summary(bucket_id, given):
    """The kept summary of the pinned plan, or None: none kept, or a pins folder that is not this user's own
    (what is in it is not read)."""
    folder = pins_dir(bucket_id)
    try:
        for path in (os.path.dirname(folder), folder):
            if storage.folder_problem(os.lstat(path)):
                return None
        names = [n for n in os.listdir(folder) if n.startswith(given) and n.endswith(".json")]
        if len(names) != 1:
            return None
        with open(os.path.join(folder, names[0]), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def check_pin(given, plan, check_mode):
    """The stamped plan (a records.Plan) checked against -e maand_plan=given: a new plan with the line "plan
    hash matches the pinned plan", or the plan itself (nothing pinned); PinRefused when the plan is another
    than the pinned one, or (check mode) its summary cannot be kept because the pins folder is not this
    user's own."""
    digest = plan.plan_hash
    if check_mode:
        try:
            keep_summary(plan.bucket_id, digest, plan_summary(plan.to_json()))
        except storage.UnsafeFolder as exc:
            raise PinRefused("the plan's summary (for a later -e maand_plan) cannot be kept: %s" % exc) from None
    if not given:
        return plan
    error = pin_error(given)
    if error:
        raise PinRefused("deploy refused, nothing was changed: " + error)
    if pin_matches(given, digest):
        return plan.replace(lines=plan.lines + ["plan hash matches the pinned plan %s" % given])
    old = pinned_summary(plan.bucket_id, str(given).strip().lower())
    why = (describe_changes(old, plan_summary(plan.to_json())) if old else
           ["(the pinned plan's summary is not on this controller, so what changed cannot be named; "
            "compare with a new --check --diff)"])
    raise PinRefused("deploy refused, nothing was changed: the plan is %s, not the pinned plan %s (maand_plan). "
                     "What changed:\n  %s\nReview the new plan with --check --diff and pin its hash."
                     % (digest[:SHORT], given, "\n  ".join(why)))


# --- wave picture ----------------------------------------------------------------------------------

def _demand_label(demands):
    label = str(demands.get("command") or "?")
    config = demands.get("config") or {}
    if config.get("min_version"):
        label += " >= %s" % config["min_version"]
    if config.get("max_version"):
        label += " <= %s" % config["max_version"]
    return label


def wave_picture(catalog):
    """The deploy's waves and the command demands between them, as plan lines ([] for one wave without
    demands): ``waves: wave 0 api, web; wave 1 poller`` then ``  wave 0 api --(command_ready >= 1.0)--> wave 1 poller``."""
    jobs = {j["name"]: j for j in catalog.get("jobs") or [] if j.get("name") and not j.get("removed")}
    seq = {name: int(j.get("deployment_seq") or 0) for name, j in jobs.items()}
    waves = {}
    for name in sorted(jobs):
        waves.setdefault(seq[name], []).append(name)
    edges = set()
    for name, job in jobs.items():
        for command in (job.get("commands") or {}).values():
            demands = (command or {}).get("demands") or {}
            upstream = demands.get("job")
            if upstream in jobs:
                edges.add((seq[upstream], upstream, _demand_label(demands), seq[name], name))
    if len(waves) <= 1 and not edges:
        return []
    lines = ["waves: " + "; ".join("wave %d %s" % (w, ", ".join(names)) for w, names in sorted(waves.items()))]
    lines.extend("  wave %d %s --(%s)--> wave %d %s" % edge for edge in sorted(edges))
    return lines


# --- bounded content diff --------------------------------------------------------------------------

CHANGED = ("start", "restart", "reload", "sync", "rollback")


def diff_requests(plan, is_secret, max_files=MAX_FILES):
    """({host: {job: [rel]}} of changed files to read on each worker, {host: [note]}).

    Only rows that change files of an allocation already deployed; is_secret(job, host, rel) -> True
    for a secret-bearing output (never read, never shown: named in a note)."""
    wanted, notes = {}, {}
    for row in plan.get("rows") or []:
        if row.get("action") not in CHANGED or not row.get("from_version"):
            continue
        job, host = row["job"], row["worker"]
        paths = [p for p in row.get("paths") or [] if not p.startswith(ENV_PREFIX)]
        public = [p for p in paths if not is_secret(job, host, p)]
        for rel in paths:
            if rel not in public:
                notes.setdefault(host, []).append("%s/%s: secret-bearing, not shown" % (job, rel))
        shown = public[:max_files]
        if len(public) > max_files:
            notes.setdefault(host, []).append("%s: %d more changed file(s) not shown (at most %d per job)"
                                              % (job, len(public) - max_files, max_files))
        if shown:
            wanted.setdefault(host, {})[job] = shown
    return wanted, notes


class Blobs:
    """The distinct new texts of a --diff, at most MAX_TOTAL bytes of text; past that, {"over_budget"}."""

    def __init__(self, budget=MAX_TOTAL):
        self.texts, self.left = {}, budget

    def add(self, text):
        key = hashlib.sha256(canonical(text).encode("utf-8")).hexdigest()[:24]
        if key in self.texts:
            return key
        size = len(text.get("text") or "")
        if size > self.left:
            self.texts["over_budget"] = {"over_budget": True}
            return "over_budget"
        self.left -= size
        self.texts[key] = text
        return key


def text_of(data, limit=MAX_BYTES):
    """bytes (or None: absent) -> {"text"} | {"binary"} | {"too_large": size} | {"missing"} (the agent's shape)."""
    if data is None:
        return {"missing": True}
    if len(data) > limit:
        return {"too_large": len(data)}
    return agent.text_or_binary(data)


def checked_before(before, promoted_digest):
    """The worker's side of a diff, shown only when its digest is the promoted record's: a secret-bearing
    output is recorded with an HMAC digest (never equal), and a file edited by hand on the worker is not
    what the record describes. A file the record does not list is new (shown as absent)."""
    if not before or before.get("missing") or not promoted_digest:
        return {"missing": True}
    if "text" in before and before.get("digest") != promoted_digest:
        return {"unverified": True}
    return before


def render_diff(job, host, rel, before, after, max_lines=MAX_LINES, after_label="planned"):
    """A unified diff of one file (before: the worker's promoted copy, after: what this deploy ships, or
    for a rollback the worker's previous copy), at most max_lines lines; binary, large or unverified
    sides are named, not shown."""
    label = "%s/%s" % (job, rel)
    if after.get("over_budget"):
        return "%s: changed (not shown: --diff carries at most %d MiB of new text per run)\n" % (label, MAX_TOTAL >> 20)
    for side, name in ((before, "the copy on %s" % host), (after, "the %s copy" % after_label)):
        if side.get("unverified"):
            return ("%s: changed; %s is not shown (secret-bearing, or not the promoted content: its digest "
                    "differs from the deploy record)\n" % (label, name))
    for side, name in ((before, "on %s" % host), (after, "in this deploy")):
        if side.get("binary"):
            return "%s: binary file %s, changed (not shown)\n" % (label, name)
        if side.get("too_large"):
            return "%s: larger than %d bytes %s, changed (not shown)\n" % (label, MAX_BYTES, name)
    old = [] if before.get("missing") else before.get("text", "").splitlines(True)
    new = [] if after.get("missing") else after.get("text", "").splitlines(True)
    lines = list(difflib.unified_diff(old, new, "%s (%s)" % (label, host) if old else "/dev/null",
                                      "%s (%s)" % (label, after_label) if new else "/dev/null"))
    if not lines:
        return "%s: content identical, mode or link changed\n" % label
    out = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines[:max_lines]]
    if len(lines) > max_lines:
        out.append("... %d more diff lines of %s not shown\n" % (len(lines) - max_lines, label))
    return "".join(out)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure part of the facts flow (maand.core.workers_file action, playbooks/facts.yml).

  inventory_entries(bucket, labels, hosts)   what play 1 needs: connection vars and the targets
  update_workers_file(bucket, results, ...)  merge probed facts into workers.json, all or nothing

maand.conf and workspace/workers.json are read by the model's own readers (bucket/model.load_maand_conf,
bucket/model.load_workers), so facts accepts and refuses exactly what build and the inventory do, with the
same errors. The write patches the file's text in place so the user's formatting survives.
No Ansible imports.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field

from ..bucket import deploy_needs, lacking_message, ssh_hint
from ..bucket.locks import bucket_lock
from ..bucket.storage import atomic_write
from ..bucket.units import normalize_arch
from ..bucket.model import MAAND_CONF, WORKERS_FILE, Bucket, load_maand_conf, load_workers
from ..bucket.naming import group_name
from ..bucket.problems import Report, did_you_mean
from ..bucket.units import parse_cpu_mhz, parse_memory_mb
from ..errors import MaandError

TEMP_PREFIX = ".workers.json."
TEMP_SUFFIX = ".tmp"
TARGETS_GROUP = "maand_facts_targets"

# (workers.json field, worker_facts key, unit written, unit shown). cores is a plain integer: the
# hardware constraints (`hardware: "cores=4"`) compare against it.
WRITTEN_FIELDS = (
    ("memory", "memory_mb", "mb", "MB"),
    ("cpu", "cpu_mhz", "mhz", "MHz"),
    ("cores", "cores", None, ""),
    ("storage", "storage_total_mb", "mb", "MB"),
)
REQUIRED_FACTS = ("memory_mb", "cpu_mhz")


class WorkersFileError(MaandError):
    """Bad input or a failed write; args[0] says what and how to fix it, args[1] (optional) lists
    the failed hosts."""


# --------------------------------------------------------------------------- reading (the model's readers)


def _bucket_dir(bucket):
    return os.path.abspath(os.path.expanduser(str(bucket)))


def _raise_problems(bucket, report):
    """The model's errors, worded as build words them, under one line naming the files."""
    files = sorted({os.path.join(bucket.path, p.file) for p in report.errors})
    count = len(report.errors)
    raise WorkersFileError("%s: %d error%s (maand.core.build reports the same):\n  %s" % (
        ", ".join(files), count, "" if count == 1 else "s", "\n  ".join(str(p) for p in report.errors)))


def read_bucket(bucket_dir, conf=True):
    """(Bucket, Report) with maand.conf (when conf) and workers.json read by the model's readers.
    Raises WorkersFileError with every error of those files; warnings stay in the report."""
    report = Report()
    bucket = Bucket(_bucket_dir(bucket_dir))
    if not os.path.isdir(bucket.path):
        raise WorkersFileError("%s: bucket directory not found: is it a maand bucket? Pass the bucket folder (the one "
                               "holding maand.conf and workspace/) as -e maand_bucket=DIR" % bucket.path)
    if conf:
        load_maand_conf(bucket, report)
    load_workers(bucket, report)
    if report.errors:
        _raise_problems(bucket, report)
    return bucket, report


def label_group(label):
    """The inventory's group for a label (labels are compared lower-cased, as maand does)."""
    return group_name("label", str(label).lower())


def _as_list(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise WorkersFileError("%s must be strings, got %r" % (what, item))
            items.extend(item.split(","))
    else:
        raise WorkersFileError("%s must be a comma-separated string or a list, got %r" % (what, value))
    return [item.strip() for item in items if item.strip()]


def select_targets(workers, labels=None, hosts=None):
    """Model workers holding any of labels (when given, compared lower-cased) and listed in hosts
    (when given), in position order (the build's order)."""
    labels = [label.lower() for label in _as_list(labels, "labels")]
    hosts = _as_list(hosts, "hosts")
    known = {worker.host for worker in workers}
    unknown = [host for host in hosts if host not in known]
    if unknown:
        raise WorkersFileError(
            "hosts not in workspace/workers.json: %s. Add them to workers.json first, or fix the "
            "names passed in maand_hosts" % ", ".join(host + did_you_mean(host, known) for host in unknown))
    targets = [w for w in workers
               if (not hosts or w.host in hosts) and (not labels or set(labels) & set(w.labels))]
    if not targets:
        if not (labels or hosts):
            raise WorkersFileError('workspace/workers.json lists no workers: add entries with "host" and "labels" first')
        raise WorkersFileError("no worker in workspace/workers.json matches%s%s%s" % (
            " labels=" + ",".join(labels) if labels else "", " and" if labels and hosts else "",
            " hosts=" + ",".join(hosts) if hosts else ""))
    return targets


@dataclass(frozen=True)
class Connection:
    """Ansible connection variables from maand.conf."""

    user: str
    port: int
    key_file: str
    become: bool

    def as_vars(self):
        return {"ansible_user": self.user, "ansible_port": self.port,
                "ansible_ssh_private_key_file": self.key_file, "ansible_become": self.become}


@dataclass(frozen=True)
class Target:
    """One worker to probe: its host, labels (the model's: lower-cased, with worker) and groups."""

    host: str
    labels: tuple
    groups: tuple

    @classmethod
    def of(cls, worker):
        groups = [TARGETS_GROUP] + [label_group(label) for label in worker.labels]
        return cls(worker.host, tuple(worker.labels), tuple(dict.fromkeys(groups)))

    def as_dict(self):
        return {"host": self.host, "labels": list(self.labels), "groups": list(self.groups)}


def connection_of(bucket):
    key = bucket.ssh_key_path
    if not os.path.isfile(key):
        raise WorkersFileError(
            "SSH key %s not found: put the private key authorized on the workers there, or set "
            "ssh_key in %s" % (key, os.path.join(bucket.path, MAAND_CONF)))
    conf = bucket.conf
    return Connection(conf["ssh_user"], conf["ssh_port"], key, conf["use_sudo"])


def inventory_entries(bucket_dir, labels=None, hosts=None):
    """What play 1 of maand.core.facts needs: connection vars and the targets with their groups."""
    bucket, report = read_bucket(bucket_dir)
    connection = connection_of(bucket)
    targets = [Target.of(worker) for worker in select_targets(bucket.workers, labels, hosts)]
    return {"path": os.path.join(bucket.path, WORKERS_FILE), "bucket": bucket.path,
            "connection": connection.as_vars(), "targets": [t.as_dict() for t in targets],
            "needs": deploy_needs(connection.become),
            "workers": len(bucket.workers), "warnings": [str(p) for p in report.warnings]}


# --------------------------------------------------------------------------- comparing


def parse_quantity(value, kind):
    """'16 gb' -> 16384.0 (memory/storage, MB) or '2 ghz' -> 2000.0 (cpu, MHz); None if unparsable."""
    if value is None:
        return None
    try:
        return parse_cpu_mhz(value) if kind == "cpu" else parse_memory_mb(value)
    except ValueError:
        return None


def _show(value, kind, unit_shown):
    if value is None or value == "" or value == 0:
        return "unset"
    parsed = parse_quantity(value, kind)
    if parsed is None:
        return json.dumps(value)
    return "%s %s" % (int(parsed) if parsed == int(parsed) else parsed, unit_shown)


def _failure_of(result, host=""):
    """Why a registered worker_facts result is unusable, or None; with the first-contact hint of its words
    (bucket/connect.py: host key, login, sudo)."""
    if not isinstance(result, dict):
        return "no result (the host was not probed)"
    words = " ".join(str(result.get(k) or "") for k in ("msg", "module_stderr", "module_stdout", "stderr"))
    found = ssh_hint(words, host)
    if result.get("unreachable"):
        text = "unreachable: %s" % _first_line(result.get("msg", "no answer"))
        return "%s; %s" % (text, found) if found else text
    if result.get("failed"):
        first = _first_line(result.get("msg", "unknown error"))
        if first.startswith("MODULE FAILURE") and _first_line(result.get("module_stderr") or ""):
            first = "MODULE FAILURE: %s" % _first_line(result.get("module_stderr"))
        return "failed: %s%s" % (first, "; " + found if found else "")
    if result.get("skipped"):
        return "skipped: %s" % _first_line(result.get("skip_reason", "task skipped"))
    missing = [key for key in REQUIRED_FACTS if not _positive_int(result.get(key))]
    if missing:
        return "result lacks %s (not a maand.core.worker_facts result?)" % ", ".join(missing)
    return None


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def classify_results(results, failed=None):
    """Split registered worker_facts results into (facts by host, failure reason by host)."""
    facts = {}
    failures = dict(_failed_items(failed))
    for host, result in (results or {}).items():
        host = str(host)
        if host in failures:
            continue
        reason = _failure_of(result, host)
        if reason is None:
            facts[host] = result
        else:
            failures[host] = reason
    return facts, failures


def _failed_items(failed):
    if not failed:
        return []
    if isinstance(failed, dict):
        return [(str(host), str(reason)) for host, reason in failed.items()]
    if isinstance(failed, str):
        failed = failed.split(",")
    return [(str(host).strip(), "failed") for host in failed if str(host).strip()]


def _first_line(text):
    text = str(text).strip()
    return text.splitlines()[0] if text else text


def _merge_field(entry, field_name, unit, unit_shown, value):
    """Write one probed value into a raw workers.json entry; the change text, or None if equal."""
    old = entry.get(field_name)
    if unit is None:  # a count
        if old == value:
            return None
        entry[field_name] = value
        return "%s %s -> %d" % (field_name, "unset" if old in (None, "", 0) else json.dumps(old), value)
    kind = "cpu" if field_name == "cpu" else "memory"
    if old is not None and parse_quantity(old, kind) == float(value):
        return None  # equal after unit conversion ("16 gb" == 16384 MB): keep the user's string
    entry[field_name] = "%d %s" % (value, unit)
    return "%s %s -> %d %s" % (field_name, _show(old, kind, unit_shown), value, unit_shown)


def merge_facts(entry, result):
    """Merge one host's worker_facts result into its raw workers.json entry (in place); the change texts."""
    parts = []
    for field_name, key, unit, unit_shown in WRITTEN_FIELDS:
        value = result.get(key)
        if not _positive_int(value):
            continue  # e.g. no storage path on that worker: leave the field alone
        part = _merge_field(entry, field_name, unit, unit_shown, value)
        if part is not None:
            parts.append(part)
    part = _merge_arch(entry, result.get("arch"))
    if part is not None:
        parts.append(part)
    return parts


def _merge_arch(entry, probed):
    """Write the probed architecture (uname -m) as Juju's name (x86_64 -> amd64), which the `arch`
    hardware constraint compares against; an unknown name or an equal value leaves the entry alone."""
    try:
        name = normalize_arch(probed)
    except ValueError:
        return None
    if name is None:
        return None
    old = entry.get("arch")
    try:
        same = normalize_arch(old) == name
    except ValueError:
        same = False
    if same:
        return None
    entry["arch"] = name
    return "arch %s -> %s" % (old if old is not None else "(unset)", name)


def plan_update(workers, facts):
    """Apply facts to a deep copy of the raw workers.json list.

    Returns (new_workers, lines) where lines has one 'host: field old -> new, ...' per changed worker.
    """
    hosts = {entry["host"] for entry in workers}
    unknown = [host for host in facts if host not in hosts]
    if unknown:
        raise WorkersFileError(
            "probed hosts no longer in workspace/workers.json: %s (was the file edited during the "
            "run?). Rerun the facts playbook" % ", ".join(sorted(unknown)))
    new_workers = json.loads(json.dumps(workers))
    lines = []
    for entry in new_workers:
        result = facts.get(entry["host"])
        parts = merge_facts(entry, result) if result is not None else []
        if parts:
            lines.append("%s: %s" % (entry["host"], ", ".join(parts)))
    return new_workers, lines


# --------------------------------------------------------------------------- rendering in the file's style


def render(workers, original_text=""):
    """workers.json text in the file's style.

    The original text is patched in place (only the changed values are replaced, new fields are
    appended after an entry's last field with that entry's indentation), so formatting the user
    chose, such as inline label lists, survives. If that is not possible, the whole file is
    rendered with a 2-space indent. Either way the result is checked to parse back to workers.
    """
    if original_text:
        try:
            text = _patch_text(original_text, workers)
        except (ValueError, IndexError, KeyError):
            text = None
        if text is not None and json.loads(text) == workers:
            return text
    text = json.dumps(workers, indent=2, ensure_ascii=False)
    if not original_text or original_text.endswith("\n"):
        text += "\n"
    return text


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip_ws(text, index):
    return _WS.match(text, index).end()


def _expect(text, index, char):
    if text[index] != char:
        raise ValueError("expected %r at %d" % (char, index))
    return index + 1


def _scan_members(text, i):
    """The members of the object whose '{' is at i: ([(key, key_start, key_end, value_start, value_end)], end)."""
    members = []
    i = _skip_ws(text, i + 1)
    if text[i] == "}":
        return members, i
    while True:
        i = _skip_ws(text, i)
        key_start = i
        key, i = _DECODER.raw_decode(text, i)
        key_end = i
        i = _skip_ws(text, _expect(text, _skip_ws(text, i), ":"))
        value_start = i
        dummy, i = _DECODER.raw_decode(text, i)
        members.append((key, key_start, key_end, value_start, i))
        i = _skip_ws(text, i)
        if text[i] != ",":
            _expect(text, i, "}")
            return members, i
        i += 1


def _scan_entries(text):
    """Positions in a JSON list of objects: per entry (start, end, members); None for an entry that
    is not an object."""
    i = _skip_ws(text, _expect(text, _skip_ws(text, 0), "["))
    entries = []
    if text[i] == "]":
        return entries
    while True:
        i = _skip_ws(text, i)
        if text[i] == "{":
            members, end = _scan_members(text, i)
            entries.append((i, end, members))
            i = end + 1
        else:
            dummy, i = _DECODER.raw_decode(text, i)
            entries.append(None)
        i = _skip_ws(text, i)
        if text[i] != ",":
            _expect(text, i, "]")
            return entries
        i += 1


def _entry_edits(text, scanned, old, new):
    """(start, end, replacement) edits turning one entry's text from old into new; None if impossible."""
    if scanned is None or not isinstance(old, dict) or not isinstance(new, dict):
        return None
    if [key for key in old if key not in new] or list(new)[: len(old)] != list(old):
        return None
    start, end, members = scanned
    if not members:
        return None
    last = {member[0]: member for member in members}  # json keeps the last duplicate
    edits = [(last[key][3], last[key][4], json.dumps(new[key], ensure_ascii=False))
             for key in old if old[key] != new[key]]
    added = [key for key in new if key not in old]
    if added:
        dummy, key_start, key_end, value_start, value_end = members[-1]
        separator = text[key_end:value_start]
        if "\n" in text[start:end]:
            indent = text[text.rfind("\n", 0, key_start) + 1:key_start]
            if indent.strip():
                return None
            joiner = ",\n" + indent
        else:
            joiner = ", "
        edits.append((value_end, value_end, "".join(
            "%s%s%s%s" % (joiner, json.dumps(key, ensure_ascii=False), separator,
                          json.dumps(new[key], ensure_ascii=False)) for key in added)))
    return edits


def _patch_text(text, workers):
    old_workers = json.loads(text)
    entries = _scan_entries(text)
    if len(entries) != len(old_workers) or len(workers) != len(old_workers):
        return None
    edits = []
    for scanned, old, new in zip(entries, old_workers, workers):
        if old == new:
            continue
        entry_edits = _entry_edits(text, scanned, old, new)
        if entry_edits is None:
            return None
        edits.extend(entry_edits)
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


# --------------------------------------------------------------------------- writing


def remove_stale_temps(path):
    """Delete temp files a killed writer left next to path (call only while holding the lock)."""
    removed = []
    for tmp in glob.glob(os.path.join(os.path.dirname(path), TEMP_PREFIX + "*" + TEMP_SUFFIX)):
        try:
            os.unlink(tmp)
            removed.append(tmp)
        except OSError:  # gone already or not removable: the write goes on, the next one tries again
            pass
    return removed


@dataclass
class Update:
    """The planned (or written) change of workers.json."""

    path: str
    text: str
    new_text: str
    lines: list = field(default_factory=list)
    probed: list = field(default_factory=list)

    def as_result(self):
        result = {
            "changed": bool(self.lines), "path": self.path, "lines": self.lines,
            "updated": [line.split(": ", 1)[0] for line in self.lines], "probed": self.probed,
            "msg": "\n".join(self.lines) if self.lines else "workers.json already up to date",
        }
        if self.lines:
            result["diff"] = {"before": self.text, "after": self.new_text, "before_header": self.path,
                              "after_header": self.path}
        return result


def _read_raw(bucket):
    """The workers.json text and list, after the model's reader has accepted the file."""
    path = os.path.join(bucket.path, WORKERS_FILE)
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    workers = json.loads(text)
    if sorted(entry["host"] for entry in workers) != sorted(w.host for w in bucket.workers):
        raise WorkersFileError("%s changed while it was read: rerun the facts playbook" % path)
    return path, text, workers


def plan_write(bucket_dir, facts):
    bucket, dummy = read_bucket(bucket_dir, conf=False)
    path, text, workers = _read_raw(bucket)
    new_workers, lines = plan_update(workers, facts)
    new_text = render(new_workers, text) if lines else text
    return Update(path, text, new_text, lines, sorted(facts))


def _check_results(bucket_dir, results, failed):
    facts, failures = classify_results(results, failed)
    if failures:
        lines = ["%s: %s" % (host, failures[host]) for host in sorted(failures)]
        raise WorkersFileError(
            "worker facts failed for %d of %d targeted workers, %s not written (all or nothing):\n  %s" % (
                len(failures), len(facts) + len(failures), os.path.join(bucket_dir, WORKERS_FILE),
                "\n  ".join(lines)),
            sorted(failures))
    if not facts:
        raise WorkersFileError("no worker facts given: nothing to compare with workspace/workers.json")
    return facts


def update_workers_file(bucket_dir, results, failed=None, check_mode=False):
    """The whole write step. Returns a dict for the task result; raises WorkersFileError."""
    bucket_dir = _bucket_dir(bucket_dir)
    facts = _check_results(bucket_dir, results, failed)
    if check_mode:
        return with_needs(plan_write(bucket_dir, facts).as_result(), facts)
    with bucket_lock(bucket_dir, wait=True):
        update = plan_write(bucket_dir, facts)
        remove_stale_temps(update.path)
        if update.lines:
            atomic_write(update.path, update.new_text)
    return with_needs(update.as_result(), facts)


def with_needs(result, facts):
    """The write step's result with what the deploy will need and a worker lacks (worker_facts' `lacks`):
    `lacking` ({host: [commands]}) and `needs_msg` ('' when every worker has everything); the facts playbook
    fails on it after writing workers.json (issue 31 item 4)."""
    lacking = {host: list(fact.get("lacks") or ()) for host, fact in facts.items() if fact.get("lacks")}
    result.update(lacking=lacking, needs_msg=lacking_message(lacking))
    return result

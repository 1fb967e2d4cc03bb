# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the facts flow: read workers.json for the inventory, write probed capacity back.

Documentation: plugins/modules/workers_file.py. The pure functions below are unit-tested directly.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tomllib

from ansible.plugins.action import ActionBase

from ansible_collections.maand.core.plugins.plugin_utils._catalog import atomic_write, bucket_lock
from ansible_collections.maand.core.plugins.plugin_utils._naming import group_name
from ansible_collections.maand.core.plugins.plugin_utils._units import parse_cpu_mhz, parse_memory_mb

WORKERS_REL = os.path.join("workspace", "workers.json")
CONF_REL = "maand.conf"
TEMP_PREFIX = ".workers.json."
TEMP_SUFFIX = ".tmp"

CONF_DEFAULTS = {"ssh_user": "agent", "ssh_key": "worker.key", "ssh_port": 22, "use_sudo": True}

# Fields written back, in the order they are appended to an entry that lacks them.
# field in workers.json -> (key in the worker_facts result, unit written, unit shown)
# (workers.json field, worker_facts key, unit written, unit shown). cores is a plain integer: the
# hardware constraints (`hardware: "cores=4"`) compare against it.
WRITTEN_FIELDS = (
    ("memory", "memory_mb", "mb", "MB"),
    ("cpu", "cpu_mhz", "mhz", "MHz"),
    ("cores", "cores", None, ""),
    ("storage", "storage_total_mb", "mb", "MB"),
)
REQUIRED_FACTS = ("memory_mb", "cpu_mhz")


class WorkersFileError(Exception):
    """Bad input or a failed write; the message says what and how to fix it."""


# --------------------------------------------------------------------------- reading


def label_group(label):
    """The inventory's group for a label (labels are compared lower-cased, as maand does)."""
    return group_name("label", str(label).lower())


def load_conf(bucket):
    """maand.conf -> the ssh settings, with maand's defaults."""
    path = os.path.join(bucket, CONF_REL)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise WorkersFileError(
            "%s not found: is %s a maand bucket? Pass the bucket directory as -e maand_bucket=DIR"
            % (path, bucket)
        )
    except tomllib.TOMLDecodeError as exc:
        raise WorkersFileError("%s is not valid TOML: %s. Fix the syntax and rerun" % (path, exc))
    except OSError as exc:
        raise WorkersFileError("cannot read %s: %s" % (path, exc.strerror or exc))
    conf = dict(CONF_DEFAULTS)
    errors = []
    for key in CONF_DEFAULTS:
        if key in data:
            conf[key] = data[key]
    if not isinstance(conf["ssh_user"], str) or not conf["ssh_user"]:
        errors.append('ssh_user must be a non-empty string, e.g. ssh_user = "agent"')
    if not isinstance(conf["ssh_key"], str) or not conf["ssh_key"]:
        errors.append('ssh_key must be a file name under secrets/, e.g. ssh_key = "worker.key"')
    port = conf["ssh_port"]
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port.strip())
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        errors.append("ssh_port must be a port number (1-65535), got %r" % (conf["ssh_port"],))
    conf["ssh_port"] = port
    if not isinstance(conf["use_sudo"], bool):
        errors.append("use_sudo must be true or false, got %r" % (conf["use_sudo"],))
    if errors:
        raise WorkersFileError("%s: %s" % (path, "; ".join(errors)))
    return conf


def parse_workers(text, path):
    """Parse and validate workers.json text; returns the list (entries kept as parsed, in order).

    Every problem is reported at once, each naming the entry, the field and the fix.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise WorkersFileError(
            "%s is not valid JSON (%s). Fix the syntax: the file must be a JSON list of workers, "
            'e.g. [{"host": "10.0.0.1", "labels": ["worker"]}]' % (path, exc)
        )
    if not isinstance(data, list):
        raise WorkersFileError(
            "%s must be a JSON list of worker objects, found a JSON %s. Wrap the workers in [ ... ]"
            % (path, _json_type(data))
        )
    errors = []
    seen = {}
    for index, entry in enumerate(data):
        where = "entry #%d" % (index + 1)
        if not isinstance(entry, dict):
            errors.append("%s is a JSON %s, expected an object like {\"host\": \"10.0.0.1\"}"
                          % (where, _json_type(entry)))
            continue
        host = entry.get("host")
        if "host" not in entry:
            errors.append('%s has no "host" field: add "host": "<address or name>" (keys: %s)'
                          % (where, ", ".join(sorted(entry)) or "none"))
            continue
        if not isinstance(host, str) or not host.strip():
            errors.append('%s: "host" must be a non-empty string, got %s' % (where, json.dumps(host)))
            continue
        if host != host.strip():
            errors.append('%s: "host" %s has surrounding spaces: remove them' % (where, json.dumps(host)))
            continue
        if host in seen:
            errors.append('%s: host "%s" is already listed in entry #%d: each host must appear once, '
                          "merge or remove the duplicate" % (where, host, seen[host] + 1))
            continue
        seen[host] = index
        labels = entry.get("labels", [])
        if labels is not None and (not isinstance(labels, list)
                                   or not all(isinstance(x, str) for x in labels)):
            errors.append('%s (host "%s"): "labels" must be a list of strings, got %s'
                          % (where, host, json.dumps(labels)))
    if errors:
        raise WorkersFileError("%s is invalid:\n  %s" % (path, "\n  ".join(errors)))
    return data


def _json_type(value):
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def read_workers(bucket):
    """(path, text, workers) of <bucket>/workspace/workers.json."""
    path = os.path.join(bucket, WORKERS_REL)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise WorkersFileError(
            '%s not found: create it with the workers to probe, e.g. [{"host": "10.0.0.1", '
            '"labels": ["worker"]}]' % path
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkersFileError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
    return path, text, parse_workers(text, path)


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


def worker_labels(entry):
    """Labels of a worker; maand adds the label 'worker' to every host."""
    labels = list(entry.get("labels") or [])
    if "worker" not in labels:
        labels.append("worker")
    return labels


def select_targets(workers, labels=None, hosts=None):
    """Workers matching any of labels (when given) and listed in hosts (when given), in file order."""
    labels = _as_list(labels, "labels")
    hosts = _as_list(hosts, "hosts")
    known = {entry["host"] for entry in workers}
    unknown = [host for host in hosts if host not in known]
    if unknown:
        raise WorkersFileError(
            "hosts not in workspace/workers.json: %s. Add them to workers.json first, or fix the "
            "names passed in maand_hosts" % ", ".join(unknown)
        )
    targets = []
    for entry in workers:
        if hosts and entry["host"] not in hosts:
            continue
        if labels and not set(labels) & set(worker_labels(entry)):
            continue
        targets.append(entry)
    if not targets:
        raise WorkersFileError(
            "no worker in workspace/workers.json matches%s%s%s"
            % (" labels=" + ",".join(labels) if labels else "",
               " and" if labels and hosts else "",
               " hosts=" + ",".join(hosts) if hosts else "")
            if (labels or hosts) else "workspace/workers.json lists no workers: add entries with "
            '"host" and "labels" first'
        )
    return targets


def inventory_entries(bucket, labels=None, hosts=None):
    """What play 1 of maand.core.facts needs: connection vars and the targets with their groups."""
    bucket = os.path.abspath(os.path.expanduser(bucket))
    conf = load_conf(bucket)
    path, _text, workers = read_workers(bucket)
    key = os.path.join(bucket, "secrets", conf["ssh_key"])
    if not os.path.isfile(key):
        raise WorkersFileError(
            "SSH key %s not found: put the private key authorized on the workers there, or set "
            "ssh_key in %s" % (key, os.path.join(bucket, CONF_REL))
        )
    connection = {
        "ansible_user": conf["ssh_user"],
        "ansible_port": conf["ssh_port"],
        "ansible_ssh_private_key_file": key,
        "ansible_become": conf["use_sudo"],
    }
    targets = []
    for entry in select_targets(workers, labels, hosts):
        groups = ["maand_facts_targets"]
        for label in worker_labels(entry):
            name = label_group(label)
            if name not in groups:
                groups.append(name)
        targets.append({"host": entry["host"], "labels": worker_labels(entry), "groups": groups})
    return {"path": path, "bucket": bucket, "connection": connection, "targets": targets,
            "workers": len(workers)}


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


def classify_results(results, failed=None):
    """Split registered worker_facts results into (facts by host, failure reason by host)."""
    facts = {}
    failures = {}
    for host, reason in _failed_items(failed):
        failures[host] = reason
    for host, result in (results or {}).items():
        host = str(host)
        if host in failures:
            continue
        if not isinstance(result, dict):
            failures[host] = "no result (the host was not probed)"
        elif result.get("unreachable"):
            failures[host] = "unreachable: %s" % _first_line(result.get("msg", "no answer"))
        elif result.get("failed"):
            failures[host] = "failed: %s" % _first_line(result.get("msg", "unknown error"))
        elif result.get("skipped"):
            failures[host] = "skipped: %s" % _first_line(result.get("skip_reason", "task skipped"))
        else:
            missing = [key for key in REQUIRED_FACTS
                       if isinstance(result.get(key), bool) or not isinstance(result.get(key), int)
                       or result.get(key) <= 0]
            if missing:
                failures[host] = "result lacks %s (not a maand.core.worker_facts result?)" % ", ".join(missing)
            else:
                facts[host] = result
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


def plan_update(workers, facts):
    """Apply facts to a deep copy of workers.

    Returns (new_workers, lines) where lines has one 'host: field old -> new, ...' per changed worker.
    Values equal to the file's (after unit conversion, e.g. '16 gb' == 16384 MB) keep their string.
    """
    by_host = {entry["host"]: index for index, entry in enumerate(workers)}
    unknown = [host for host in facts if host not in by_host]
    if unknown:
        raise WorkersFileError(
            "probed hosts no longer in workspace/workers.json: %s (was the file edited during the "
            "run?). Rerun the facts playbook" % ", ".join(sorted(unknown))
        )
    new_workers = json.loads(json.dumps(workers))
    lines = []
    for index, entry in enumerate(new_workers):
        result = facts.get(entry["host"])
        if result is None:
            continue
        parts = []
        for field, key, unit, unit_shown in WRITTEN_FIELDS:
            value = result.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                continue  # e.g. no storage path on that worker: leave the field alone
            old = entry.get(field)
            if unit is None:  # a count
                if old == value:
                    continue
                entry[field] = value
                parts.append("%s %s -> %d" % (field, "unset" if old in (None, "", 0) else json.dumps(old), value))
                continue
            kind = "cpu" if field == "cpu" else "memory"
            if old is not None and parse_quantity(old, kind) == float(value):
                continue
            entry[field] = "%d %s" % (value, unit)
            parts.append("%s %s -> %d %s" % (field, _show(old, kind, unit_shown), value, unit_shown))
        if parts:
            lines.append("%s: %s" % (entry["host"], ", ".join(parts)))
    return new_workers, lines


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


def _skip_ws(text, index):
    return _WS.match(text, index).end()


def _expect(text, index, char):
    if text[index] != char:
        raise ValueError("expected %r at %d" % (char, index))
    return index + 1


def _scan_entries(text):
    """Positions in a JSON list of objects: per entry (start, end, members), where members are
    (key, key_start, key_end, value_start, value_end); None for an entry that is not an object."""
    decoder = json.JSONDecoder()
    i = _expect(text, _skip_ws(text, 0), "[")
    entries = []
    i = _skip_ws(text, i)
    if text[i] == "]":
        return entries
    while True:
        i = _skip_ws(text, i)
        if text[i] == "{":
            start = i
            members = []
            i = _skip_ws(text, i + 1)
            if text[i] != "}":
                while True:
                    i = _skip_ws(text, i)
                    key_start = i
                    key, i = decoder.raw_decode(text, i)
                    key_end = i
                    i = _skip_ws(text, _expect(text, _skip_ws(text, i), ":"))
                    value_start = i
                    _value, i = decoder.raw_decode(text, i)
                    members.append((key, key_start, key_end, value_start, i))
                    i = _skip_ws(text, i)
                    if text[i] == ",":
                        i += 1
                        continue
                    _expect(text, i, "}")
                    break
            entries.append((start, i, members))
            i += 1
        else:
            _value, i = decoder.raw_decode(text, i)
            entries.append(None)
        i = _skip_ws(text, i)
        if text[i] == ",":
            i += 1
            continue
        _expect(text, i, "]")
        return entries


def _patch_text(text, workers):
    old_workers = json.loads(text)
    entries = _scan_entries(text)
    if len(entries) != len(old_workers) or len(workers) != len(old_workers):
        return None
    edits = []  # (start, end, replacement)
    for index, (old, new) in enumerate(zip(old_workers, workers)):
        if old == new:
            continue
        if entries[index] is None or not isinstance(old, dict) or not isinstance(new, dict):
            return None
        if [key for key in old if key not in new] or list(new)[: len(old)] != list(old):
            return None
        start, end, members = entries[index]
        if not members:
            return None
        last = {member[0]: member for member in members}  # json keeps the last duplicate
        for key in old:
            if old[key] != new[key]:
                _key, _ks, _ke, value_start, value_end = last[key]
                edits.append((value_start, value_end, json.dumps(new[key], ensure_ascii=False)))
        added = [key for key in new if key not in old]
        if added:
            _key, key_start, key_end, value_start, value_end = members[-1]
            separator = text[key_end:value_start]
            if "\n" in text[start:end]:
                line_start = text.rfind("\n", 0, key_start) + 1
                indent = text[line_start:key_start]
                if indent.strip():
                    return None
                joiner = ",\n" + indent
            else:
                joiner = ", "
            insert = "".join(
                "%s%s%s%s" % (joiner, json.dumps(key, ensure_ascii=False), separator,
                              json.dumps(new[key], ensure_ascii=False))
                for key in added
            )
            edits.append((value_end, value_end, insert))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


# --------------------------------------------------------------------------- writing


def remove_stale_temps(path):
    """Delete temp files a killed writer left next to path (call only while holding the lock)."""
    pattern = os.path.join(os.path.dirname(path), TEMP_PREFIX + "*" + TEMP_SUFFIX)
    removed = []
    for tmp in glob.glob(pattern):
        try:
            os.unlink(tmp)
            removed.append(tmp)
        except OSError:
            pass
    return removed


def update_workers_file(bucket, results, failed=None, check_mode=False):
    """The whole write step. Returns a dict for the task result; raises WorkersFileError."""
    bucket = os.path.abspath(os.path.expanduser(bucket))
    facts, failures = classify_results(results, failed)
    if failures:
        lines = ["%s: %s" % (host, failures[host]) for host in sorted(failures)]
        raise WorkersFileError(
            "worker facts failed for %d of %d targeted workers, %s not written (all or nothing):\n  %s"
            % (len(failures), len(facts) + len(failures), os.path.join(bucket, WORKERS_REL),
               "\n  ".join(lines)),
            sorted(failures),
        )
    if not facts:
        raise WorkersFileError("no worker facts given: nothing to compare with workspace/workers.json")

    def plan():
        path, text, workers = read_workers(bucket)
        new_workers, lines = plan_update(workers, facts)
        new_text = render(new_workers, text) if lines else text
        return path, text, new_text, lines

    if check_mode:
        path, text, new_text, lines = plan()
    else:
        with bucket_lock(bucket, wait=True):
            path, text, new_text, lines = plan()
            remove_stale_temps(path)
            if lines:
                atomic_write(path, new_text)
    result = {
        "changed": bool(lines),
        "path": path,
        "lines": lines,
        "updated": [line.split(": ", 1)[0] for line in lines],
        "probed": sorted(facts),
        "msg": "\n".join(lines) if lines else "workers.json already up to date",
    }
    if lines:
        result["diff"] = {"before": text, "after": new_text, "before_header": path, "after_header": path}
    return result


# --------------------------------------------------------------------------- action


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    ARGUMENT_SPEC = dict(
        bucket=dict(type="path", required=True),
        operation=dict(type="str", default="write", choices=["load", "write"]),
        labels=dict(type="raw"),
        hosts=dict(type="raw"),
        results=dict(type="dict"),
        failed=dict(type="raw"),
    )

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            if args["operation"] == "load":
                result.update(inventory_entries(args["bucket"], args["labels"], args["hosts"]))
                result["changed"] = False
            else:
                if args["results"] is None and not args["failed"]:
                    raise WorkersFileError("operation=write needs results (host -> worker_facts result)")
                result.update(update_workers_file(args["bucket"], args["results"] or {}, args["failed"],
                                                  check_mode=bool(self._task.check_mode)))
        except WorkersFileError as exc:
            result["failed"] = True
            result["changed"] = False
            result["msg"] = str(exc.args[0])
            if len(exc.args) > 1:
                result["failed_hosts"] = exc.args[1]
        return result

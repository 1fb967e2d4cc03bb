# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON Schemas for the bucket's JSON files, and a checker that reports errors with JSON paths.

jsonschema gives every error with its path; it is slow on a 10,000-worker workers.json (~0.6 s),
so when fastjsonschema is installed it is used first as a quick gate (~25 ms) and jsonschema runs
only on documents that fail it. Both read the same schema, so there is one source of truth.
Unknown keys are allowed here (maand tolerates them); the model warns about them.
"""

from __future__ import annotations

_QUANTITY = {"type": ["string", "number"]}
_BOUNDS = {"type": "object", "properties": {"min": _QUANTITY, "max": _QUANTITY}}
_VERSIONISH = {"type": ["string", "integer"]}
_COUNT = {"type": "integer", "minimum": 0, "maximum": 2 ** 31 - 1}
_INT = {"type": "integer", "minimum": -(2 ** 31), "maximum": 2 ** 31 - 1}
_BATCH = dict(_INT, type=["integer", "string"])  # a count, or "25%" of the job's allocations (bucket/job_checks.py)

WORKER_KEYS = ("host", "hostname", "labels", "tags", "memory", "cpu", "cores", "storage", "position", "arch")

WORKERS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["host"],
        "properties": {
            "host": {"type": "string", "minLength": 1},
            "hostname": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "tags": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
            "memory": _QUANTITY,
            "cpu": _QUANTITY,
            "cores": _COUNT,
            "storage": _QUANTITY,
            "position": _COUNT,
            "arch": {"type": "string"},
        },
    },
}

MANIFEST_KEYS = (
    "version", "selectors", "resources", "min_allocations_count", "max_concurrent_starts",
    "max_concurrent_upgrades", "deploy_parallel_count", "update_parallel_count", "restart_policy",
    "restart_globs", "commands", "health_check", "certs", "constraints", "hardware", "placement",
    "description", "start_gate", "auto_revert", "canary",
    "min_healthy_time", "progress_deadline", "auto_promote",  # checked by bucket/job_checks.read_rollout
    "shutdown_delay",  # checked by bucket/job_checks.read_shutdown_delay (its own fix)
    # job specs after Maelstrom (seed 004; checked by jobspec/build.py)
    "environment", "parent", "layers", "working_directory", "user", "group", "network", "mounts",
    "enable_writable_file_system", "timeout", "estimated_duration", "priority",
)

# Known keys per place in a manifest ("*": any key of a map; "[]": every item of a list). Keys not
# listed are reported by the model as not honoured, with a "did you mean" from these lists.
# constraints, hardware and placement are checked by placement/select.compile_rules.
MANIFEST_KNOWN = {
    "": MANIFEST_KEYS,
    "resources": ("memory", "cpu", "ports"),
    "resources.memory": ("min", "max"),
    "resources.cpu": ("min", "max"),
    "commands.*": ("executed_on", "demands"),
    "commands.*.demands": ("job", "command", "config"),
    "commands.*.demands.config": ("min_version", "max_version"),
    "health_check": ("checks", "timeout_seconds", "wait"),
    "health_check.checks[]": ("type", "port", "command", "path", "expect_status", "scheme", "insecure"),
    "health_check.wait": ("attempts", "interval_seconds"),
    "certs.*": ("pkcs8", "one", "subject"),
    "certs.*.subject": ("common_name",),
}
DISABLED_KNOWN = {"": ("jobs", "workers"), "jobs.*": ("allocations",)}


_DESCEND = {}
_CHILDREN = {}


def _descend_specs(known):
    """Every spec name under which `known` lists something (the places worth walking into)."""
    key = id(known)
    if key not in _DESCEND:
        names = set()
        for spec in known:
            parts = spec.replace("[]", "").split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        _DESCEND[key] = frozenset(names)
    return _DESCEND[key]


def _children(known, spec):
    """(known keys as a set or None, {key: child spec}, child spec of any other key or None) of a spec:
    computed once per (table, spec), so the walk does no string work per key."""
    cache_key = (id(known), spec)
    if cache_key not in _CHILDREN:
        descend = _descend_specs(known)
        base = spec.replace("[]", "")
        prefix = base + "." if base else ""
        explicit = {}
        for name in descend:
            rest = name[len(prefix):] if name.startswith(prefix) else None
            if rest and "." not in rest and rest != "*":
                explicit[rest] = name.replace(base, spec, 1) if base else name
        wildcard = prefix + "*"
        wildcard = (wildcard.replace(base, spec, 1) if base else wildcard) if wildcard in descend else None
        keys = known.get(spec)
        _CHILDREN[cache_key] = (frozenset(keys) if keys is not None else None, keys, explicit, wildcard)
    return _CHILDREN[cache_key]


def unknown_keys(document, known):
    """(field path, unknown key, known keys) for every key not in `known` (see MANIFEST_KNOWN), sorted."""
    found = []
    stack = [("", "", document)]
    while stack:
        spec, path, value = stack.pop()
        if not isinstance(value, dict):
            continue
        keyset, keys, explicit, wildcard = _children(known, spec)
        for key in value:
            if keyset is not None and key not in keyset:
                found.append((path, key, keys))
                continue
            child = explicit.get(key, wildcard)
            if child is None:
                continue
            where = "%s.%s" % (path, key) if path else str(key)
            item = value[key]
            if isinstance(item, list) and child + "[]" in known:
                stack.extend((child + "[]", "%s[%d]" % (where, i), v) for i, v in enumerate(item))
            else:
                stack.append((child, where, item))
    return sorted(found, key=lambda item: (item[0], str(item[1])))


MANIFEST = {
    "type": "object",
    "properties": {
        "version": _VERSIONISH,
        "description": {"type": "string"},
        "selectors": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "resources": {
            "type": "object",
            "properties": {"memory": _BOUNDS, "cpu": _BOUNDS, "ports": {"type": "object"}},
        },
        "min_allocations_count": _COUNT,
        # maand clamps these (workspace/manifest.go): starts < 0 -> 0, upgrades <= 0 -> 1; maand.core also
        # takes "25%" of the job's allocations (maand's Go reads an int only)
        "max_concurrent_starts": _BATCH,
        "max_concurrent_upgrades": _BATCH,
        "deploy_parallel_count": _INT,
        "update_parallel_count": _INT,
        "restart_policy": {"enum": ["always", "reload", "never", ""]},  # "" = always (maand NormalizeRestartPolicy)
        "restart_globs": {"type": "array", "items": {"type": "string", "minLength": 1}},
        # maand.core's rollout options (docs/deploy.md): one gate after the last start batch (maand) or one per
        # start batch; on a failed upgrade batch, put the last promoted version back (Nomad's auto_revert)
        "start_gate": {"enum": ["last_batch", "every_batch"]},
        "auto_revert": {"type": "boolean"},
        "canary": _COUNT,  # Nomad's canary: an upgrade rolls out to N allocations, the rest waits for maand_promote
        "commands": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "executed_on": {"type": "array", "items": {"type": "string"}},
                    "demands": {
                        "type": "object",
                        "properties": {
                            "job": {"type": "string"},
                            "command": {"type": "string"},
                            "config": {
                                "type": "object",
                                "properties": {"min_version": _VERSIONISH, "max_version": _VERSIONISH},
                            },
                        },
                    },
                },
            },
        },
        "health_check": {"type": "object"},
        "certs": {"type": "object"},
        # constraints, hardware and placement are checked by placement/select.compile_rules, whose errors carry
        # the JSON path inside the expression and a specific fix.
    },
}

DISABLED = {
    "type": "object",
    "properties": {
        "jobs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"allocations": {"type": "array", "items": {"type": "string"}}},
            },
        },
        "workers": {"type": "array", "items": {"type": "string"}},
    },
}

_fast_cache = {}
_slow_cache = {}


def json_path(parts):
    """['a', 0, 'b'] -> '$.a[0].b'"""
    out = "$"
    for part in parts:
        out += "[%d]" % part if isinstance(part, int) else "." + str(part)
    return out


def _fast_validator(schema):
    try:
        import fastjsonschema
    except ImportError:
        return None
    key = id(schema)
    if key not in _fast_cache:
        _fast_cache[key] = fastjsonschema.compile(schema)
    return _fast_cache[key]


def check(document, schema):
    """Return a list of (json_path, message) for every schema violation, sorted by path."""
    fast = _fast_validator(schema)
    if fast is not None:
        try:
            fast(document)
            return []
        except Exception:  # any fastjsonschema failure: fall through to the full report
            pass
    import jsonschema  # imported lazily: only the error path (or a machine without fastjsonschema) needs it

    key = id(schema)
    if key not in _slow_cache:
        _slow_cache[key] = jsonschema.Draft7Validator(schema)
    errors = []
    for err in _slow_cache[key].iter_errors(document):
        errors.append((json_path(err.absolute_path), _describe(err)))
    errors.sort()
    return errors


def _describe(err):
    if err.validator == "type":
        expected = err.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return "expected %s, got %s %r" % (expected, type(err.instance).__name__, err.instance)
    if err.validator == "required":
        return err.message
    if err.validator == "enum":
        return "%r is not one of %s" % (err.instance, ", ".join(map(str, err.validator_value)))
    if err.validator == "minimum":
        return "must be >= %s, got %r" % (err.validator_value, err.instance)
    if err.validator == "maximum":
        return "out of range: must be <= %s, got %r" % (err.validator_value, err.instance)
    if err.validator == "minLength":
        return "must not be empty"
    return err.message

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON Schema of `<bucket>/data/catalog.json` (docs/contract.md describes every field).

`catalog/catalog.read_catalog` checks every catalog it reads against it. Keys the schema does not name are
allowed (a newer build may add some; readers ignore what they do not know); the keys it names must
have the documented type. `inputs` is optional so that a catalog written before the fingerprint
existed still reads (the inventory then asks for a build).

A catalog is input (a shared PostgreSQL store is written by whoever holds its credentials), so
``name_problems`` also checks what the controller turns into paths, as build makes them: job names
(bucket/model.py ``JOB_NAME``), each job's ``path`` (``workspace/jobs/<name>`` or none: never absolute,
never ``..``, never another folder) and the hosts of workers, allocations and departed workers
(``HOST_NAME``).
"""

from __future__ import annotations

from .. import bucket

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_UUID = {"type": "string", "pattern": UUID_PATTERN}

WORKER = {
    "type": "object",
    "required": ["host"],
    "properties": {
        "host": {"type": "string", "minLength": 1},
        "hostname": {"type": ["string", "null"]},
        "labels": _STRINGS,
        "tags": {"type": "object"},
        "zone": {"type": ["string", "null"]},
        "position": {"type": ["integer", "null"]},
        "memory_mb": _NUMBER_OR_NULL,
        "cpu_mhz": _NUMBER_OR_NULL,
        "removed": {"type": "boolean"},
    },
}

JOB = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "version": {"type": ["string", "null"]},
        "selectors": _STRINGS,
        "path": {"type": ["string", "null"]},
        "memory_mb": _NUMBER_OR_NULL,
        "cpu_mhz": _NUMBER_OR_NULL,
        "deployment_seq": {"type": "integer"},
        "ports": {"type": "object", "additionalProperties": {"type": "integer"}},
        "removed": {"type": "boolean"},
        "restart_policy": {"type": ["string", "null"]},
        "restart_globs": _STRINGS,
        "health_check": {"type": ["object", "null"]},
        "health_gate": {"type": ["object", "null"]},  # health_check resolved by build (absent: deploy resolves)
        "start_gate": {"enum": ["last_batch", "every_batch"]},  # rollout options, only when set (docs/deploy.md)
        "auto_revert": {"type": "boolean"},
        "canary": {"type": "integer", "minimum": 0},
        "batch_percent": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},  # "25%", "of": n
        "min_healthy_time": {"type": "number", "minimum": 0},
        "progress_deadline": {"type": "number", "exclusiveMinimum": 0},
        "auto_promote": {"type": "boolean"},
        "shutdown_delay": {"type": "number", "minimum": 0},  # only when set (deploy/drain.py)
        "vars": {"type": "object"},
    },
}

ALLOCATION = {
    "type": "object",
    "required": ["job", "worker", "alloc_id", "state"],
    "properties": {
        "job": {"type": "string", "minLength": 1},
        "worker": {"type": "string", "minLength": 1},
        "alloc_id": _UUID,
        "state": {"enum": ["active", "disabled", "removed"]},
        "zone": {"type": ["string", "null"]},
        "deployment_seq": {"type": "integer"},
        "memory_mb": _NUMBER_OR_NULL,
        "cpu_mhz": _NUMBER_OR_NULL,
    },
}

DEPARTED = {  # a worker that left workers.json, until maand.core.gc has cleaned it (catalog/catalog.keep_departed)
    "type": "object",
    "required": ["host"],
    "properties": {
        "host": {"type": "string", "minLength": 1},
        "hostname": {"type": ["string", "null"]},
    },
}

INPUTS = {
    "type": "object",
    "required": ["digest", "files"],
    "properties": {
        "digest": {"type": "string"},
        "files": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

CATALOG = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "maand.core catalog (data/catalog.json)",
    "type": "object",
    "required": ["format", "bucket_id", "workers", "jobs", "allocations"],
    "properties": {
        "format": {"const": 1},
        "bucket_id": _UUID,
        "job_config_selector": {"type": "string"},
        "job_config_file": {"type": "string"},
        "bucket_vars": {"type": "object"},
        "port_min": {"type": "integer"},
        "port_max": {"type": "integer"},
        "workers": {"type": "array", "items": WORKER},
        "jobs": {"type": "array", "items": JOB},
        "allocations": {"type": "array", "items": ALLOCATION},
        "departed": {"type": "array", "items": DEPARTED},
        "inputs": INPUTS,
        "update_seq_floor": {"type": "integer", "minimum": 1},  # maand.db's update_seq, after a takeover
        "build_warnings": {"type": "array", "items": {"type": "string"}},  # the build's warnings, for deploy
    },
}


def job_path(name):
    """The only path build records for a job (bucket/model.py load_job): workspace/jobs/<name>."""
    return "%s/%s" % (bucket.JOBS_DIR, name)


def name_problems(catalog):
    """[(JSON path, message)] for names and paths a catalog (already valid against CATALOG) may not hold."""
    problems = []

    def check(where, value, pattern, what):
        if not pattern.match(value):
            problems.append((where, "%s %r is not one build accepts" % (what, value)))
    for i, job in enumerate(catalog.get("jobs") or ()):
        check("$.jobs[%d].name" % i, job["name"], bucket.JOB_NAME, "job name")
        path = job.get("path")
        if path is not None and path != job_path(job["name"]):
            problems.append(("$.jobs[%d].path" % i, "job %s: path %r is not %s (build records no other: an absolute"
                                                    " path, '..' or another folder would make the controller ship and"
                                                    " run files from outside the job)" % (job["name"], path,
                                                                                          job_path(job["name"]))))
    for i, alloc in enumerate(catalog.get("allocations") or ()):
        check("$.allocations[%d].job" % i, alloc["job"], bucket.JOB_NAME, "job name")
        check("$.allocations[%d].worker" % i, alloc["worker"], bucket.HOST_NAME, "worker host")
    for key in ("workers", "departed"):
        for i, worker in enumerate(catalog.get(key) or ()):
            check("$.%s[%d].host" % (key, i), worker["host"], bucket.HOST_NAME, "worker host")
    return problems

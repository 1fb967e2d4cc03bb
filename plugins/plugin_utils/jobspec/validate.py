# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job-spec fields of a manifest or container file checked for build: every problem with its
JSON path and a fix (``validate_job_spec`` / ``validate_container``, FieldProblem: field, message, fix).

Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Mapping

from .environment import SpecError, parse_environment
from .schedule import PRIORITY_MAX, PRIORITY_MIN
from .spec import CONTAINER_USES, parse_parent

NETWORKS = ("disabled", "loopback", "local")
MOUNT_TYPES = ("tmp", "proc", "sys", "devices", "bind")
_NAME = re.compile(r"^[a-z_][a-z0-9_-]*[$]?\Z")
CONTAINER_FIELDS = frozenset(CONTAINER_USES) | {"parent"}
JOB_SPEC_FIELDS = CONTAINER_FIELDS | {"timeout", "estimated_duration", "priority"}


@dataclass(frozen=True)
class FieldProblem:
    """One bad job-spec field: ``field`` is a JSON path inside the manifest or container file."""

    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (fix: {self.fix})"


def validate_job_spec(manifest: Mapping) -> list:
    """Check the job-spec fields of a manifest; [] when all are absent or good. Never raises."""
    problems = _validate_container_fields(manifest)
    problems += _check_seconds(manifest, "timeout", "0 = no timeout", integer=True)
    problems += _check_seconds(manifest, "estimated_duration", "the usual run time of a target")
    if "priority" in manifest:
        value = manifest["priority"]
        if not _is_int(value) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
            problems.append(FieldProblem("priority", f"must be an integer from {PRIORITY_MIN} to "
                                         f"{PRIORITY_MAX}, not {value!r}", "e.g. \"priority\": 10 (default 0)"))
    return problems


def validate_container(spec: Mapping) -> list:
    """Check a workspace/containers/<name>.json document: container fields only."""
    if not isinstance(spec, Mapping):
        return [FieldProblem("$", f"must be a JSON object, not {type(spec).__name__}",
                             "write {\"environment\": ..., \"parent\": ...}")]
    problems = [FieldProblem(key, "is not a container field", f"remove it; allowed: {', '.join(sorted(CONTAINER_FIELDS))}")
                for key in sorted(set(spec) - CONTAINER_FIELDS)]
    return problems + _validate_container_fields(spec)


def _validate_container_fields(spec: Mapping) -> list:
    problems = []
    for name, check in _CHECKS:
        if name in spec and spec[name] is not None:
            try:
                check(spec[name], name)
            except SpecError as exc:
                text = str(exc)
                field_, message = text.split(": ", 1)
                problems.append(FieldProblem(field_, message, _FIXES[name]))
    return problems


def _check_seconds(manifest: Mapping, name: str, meaning: str, integer: bool = False) -> list:
    if manifest.get(name) is None:
        return []
    value = manifest[name]
    ok = _is_int(value) if integer else (_is_int(value) or isinstance(value, float))
    if not ok or value < 0:
        kind = "a whole number of seconds" if integer else "a number of seconds"
        return [FieldProblem(name, f"must be {kind} >= 0, not {value!r}", f"e.g. \"{name}\": 30 ({meaning})")]
    return []


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_relative(value, where: str, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}: must be a non-empty path string, not {value!r}")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise SpecError(f"{where}: {value!r} leaves the {what}")


def _check_working_directory(value, where: str) -> None:
    _check_relative(value, where, "job folder")


def _check_layers(value, where: str) -> None:
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of bucket folders, not {type(value).__name__}")
    for i, layer in enumerate(value):
        _check_relative(layer, f"{where}[{i}]", "bucket folder")


def _check_id(value, where: str) -> None:
    if _is_int(value) and 0 <= value < 2 ** 32:
        return
    if isinstance(value, str) and _NAME.match(value):
        return
    raise SpecError(f"{where}: must be a user/group name or a numeric id, not {value!r}")


def _check_network(value, where: str) -> None:
    if value not in NETWORKS:
        raise SpecError(f"{where}: must be one of {', '.join(NETWORKS)}, not {value!r}")


def _check_bool(value, where: str) -> None:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: must be true or false, not {value!r}")


def _check_mounts(value, where: str) -> None:
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of {{\"type\": ..., \"mount_point\": ...}}")
    for i, mount in enumerate(value):
        if not isinstance(mount, Mapping) or mount.get("type") not in MOUNT_TYPES:
            raise SpecError(f"{where}[{i}].type: must be one of {', '.join(MOUNT_TYPES)}")
        point = mount.get("mount_point")
        if not isinstance(point, str) or not point.startswith("/"):
            raise SpecError(f"{where}[{i}].mount_point: must be an absolute path, not {point!r}")
        if mount["type"] == "bind":  # Maelstrom JobMount::Bind {mount_point, local_path, read_only}
            local = mount.get("local_path")
            if not isinstance(local, str) or not local.startswith("/"):
                raise SpecError(f"{where}[{i}].local_path: a bind mount needs the absolute path of a folder on "
                                f"the worker, not {local!r}")
            if not isinstance(mount.get("read_only", False), bool):
                raise SpecError(f"{where}[{i}].read_only: must be true or false")


_CHECKS = (
    ("environment", parse_environment),
    ("parent", parse_parent),
    ("working_directory", _check_working_directory),
    ("layers", _check_layers),
    ("user", _check_id),
    ("group", _check_id),
    ("network", _check_network),
    ("mounts", _check_mounts),
    ("enable_writable_file_system", _check_bool),
)
_FIXES = {
    "environment": 'write [{"vars": {"NAME": "value"}, "extend": true}] or {"NAME": "value"}',
    "parent": 'write {"container": "base", "use": ["environment", "user"]} (use omitted = every field)',
    "working_directory": "give a path relative to the job folder, e.g. \"bin\"",
    "layers": "list bucket folders relative to the bucket, e.g. [\"layers/common\"]",
    "user": "give a user name or uid that exists on the workers, e.g. \"nobody\" or 65534",
    "group": "give a group name or gid that exists on the workers, e.g. \"nogroup\" or 65534",
    "network": "use \"disabled\", \"loopback\" or \"local\" (default: local)",
    "mounts": 'write [{"type": "tmp", "mount_point": "/tmp"}] or [{"type": "bind", "mount_point": "/srv", '
              '"local_path": "/data/srv", "read_only": true}]',
    "enable_writable_file_system": "write true or false",
}

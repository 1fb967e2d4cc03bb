# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What build does with the job-spec fields of seed 004 (Maelstrom job and container specs).

``check(bucket, report)`` (read-only, part of compute): reads every ``workspace/containers/<name>.json``,
validates the job-spec fields of every manifest and container, folds each job's parent chain
(spec.py ``collapse_spec``), reads the local OCI image layouts they name
(``workspace/images/<name>/``) and checks each environment (malformed elements, malformed ``$`` and
unknown ``$prev`` variables are build errors; the ``$env`` names are kept, never values). Fields a
Linux worker cannot honour are refused here, never ignored. Returns {job: catalog spec} for the jobs
that use any job-spec field; the catalog keeps it as ``job["spec"]`` (docs/jobspec.md).

No Ansible imports.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..bucket import storage
from ..bucket.model import _read_json
from .environment import SpecError, environment_check
from .image import integrate_image, read_oci_layout
from .spec import ContainerIndex, collapse_spec
from .validate import JOB_SPEC_FIELDS, validate_container, validate_job_spec

CONTAINERS_DIR = "workspace/containers"
IMAGES_DIR = "workspace/images"
CONTAINER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
KIND = "ErrInvalidManifest"
KIND_CONTAINER = "ErrInvalidContainer"


def read_containers(bucket: Any, report: Any) -> dict:
    """{name: document} of the valid container files; every problem goes to report."""
    folder = os.path.join(bucket.path, CONTAINERS_DIR)
    out = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        rel = "%s/%s" % (CONTAINERS_DIR, name)
        stem = name[:-5]
        if not name.endswith(".json") or name.startswith("."):
            report.unhonoured(KIND_CONTAINER, rel, "", "only <name>.json container specs are read here; this file "
                              "is ignored", "rename it to <name>.json or move it out of %s" % CONTAINERS_DIR)
            continue
        if not CONTAINER_NAME.match(stem):
            report.error(KIND_CONTAINER, rel, "", "container name %r is not allowed" % stem,
                         "rename the file using letters, digits, '.', '_' or '-'")
            continue
        doc = _read_json(bucket, rel, report, KIND_CONTAINER, required=True)
        if doc is None:
            continue
        problems = validate_container(doc)
        for p in problems:
            report.error(KIND_CONTAINER, rel, p.field, "container %s: %s" % (stem, p.message), p.fix)
        if not problems:
            out[stem] = doc
    return out


def uses_spec(manifest: Any) -> bool:
    return isinstance(manifest, dict) and any(k in manifest for k in JOB_SPEC_FIELDS)


def check(bucket: Any, report: Any) -> dict:
    """Validate, collapse and integrate every job's spec; {job: catalog spec} for jobs using one."""
    containers = read_containers(bucket, report)
    index = ContainerIndex(containers)
    images: dict = {}
    out = {}
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        manifest = job.manifest
        if not uses_spec(manifest):
            continue
        problems = validate_job_spec(manifest)
        for p in problems:
            report.error(KIND, job.file, p.field, "job %s: %s" % (name, p.message), p.fix)
        if problems:
            continue
        spec = _job_spec(bucket, job, index, images, report)
        if spec is not None:
            out[name] = spec
    return out


def _job_spec(bucket: Any, job: Any, index: Any, images: dict, report: Any):
    try:
        collapsed = collapse_spec(job.manifest, index)
    except SpecError as exc:
        report.error(KIND, job.file, "parent", "job %s: %s" % (job.name, exc),
                     "fix the parent chain (workspace/containers/<name>.json)")
        return None
    image = None
    if collapsed.image is not None:
        image = _image(bucket, collapsed.image.name, images, job, report)
        if image is None:
            return None
    integrated = integrate_image(collapsed, image)
    try:
        env_vars = environment_check(integrated.initial_environment, integrated.spec.environment)
    except SpecError as exc:
        report.error(KIND, job.file, getattr(exc, "where", "environment"), "job %s: %s" % (job.name, exc),
                     "fix the element, or write $$ for a literal $")
        return None
    spec = catalog_spec(job.manifest, integrated, env_vars, job.file)
    spec["layers"] = [os.path.relpath(p, bucket.path) for p in integrated.image_layers] + list(integrated.spec.layers)
    _refuse_unhonoured(job, spec, report)
    _check_layers(bucket, job, integrated.spec.layers, report)
    return spec


def _check_layers(bucket: Any, job: Any, layers: list, report: Any) -> None:
    """Every folder layer lies inside the bucket, is neither the bucket itself nor in secrets/ or data/, and
    holds no link out of the bucket (deploy stacks it under the job's own files, on every worker)."""
    for i, layer in enumerate(layers):
        real = os.path.realpath(os.path.join(bucket.path, layer))
        problem = storage.layer_problem(bucket.path, layer)
        if problem:
            report.error(KIND, job.file, "layers", "job %s: %s" % (job.name, problem), storage.LAYER_FIX)
        elif not os.path.isdir(real):
            report.error(KIND, job.file, "layers", "job %s: layer %s is not a folder of the bucket (layer %d of the "
                         "collapsed chain)" % (job.name, layer, i), "create %s or fix \"layers\"" % layer)


def _image(bucket: Any, name: str, images: dict, job: Any, report: Any):
    if name not in images:
        rel = "%s/%s" % (IMAGES_DIR, name)
        try:
            images[name] = read_oci_layout(os.path.join(bucket.path, rel), name)
        except SpecError as exc:
            images[name] = exc
    found = images[name]
    if isinstance(found, SpecError):
        report.error(KIND, job.file, "parent.image", "job %s: %s" % (job.name, found),
                     "copy the image: skopeo copy docker://REF oci:%s/%s" % (IMAGES_DIR, name))
        return None
    return found


def _origin(origin: str, job_file: str) -> str:
    """Where an environment element was written: 'workspace/containers/base.json: environment[0]'."""
    if origin.startswith("containers/"):
        return "workspace/" + origin
    return "%s: %s" % (job_file, origin or "environment")


def catalog_spec(manifest: dict, integrated: Any, env_vars: list, job_file: str = "manifest.json") -> dict:
    """What the catalog keeps of one job's spec: the environment as written (never expanded values)
    with the file and JSON path of each element, the image's Env as the initial map, the $env names,
    and the run fields deploy applies."""
    spec = integrated.spec
    return {
        "environment": [{"vars": dict(e.vars), "extend": e.extend, "origin": _origin(e.origin, job_file)}
                        for e in spec.environment],
        "initial_environment": dict(integrated.initial_environment),
        "env_vars": list(env_vars),
        "working_directory": spec.working_directory,
        "user": spec.user,
        "group": spec.group,
        "layers": list(integrated.image_layers) + list(spec.layers),
        "network": spec.network,
        "mounts": list(spec.mounts),
        "enable_writable_file_system": spec.enable_writable_file_system,
        "image": spec.image.to_dict() if spec.image else None,
        "timeout": manifest.get("timeout"),
        "estimated_duration": manifest.get("estimated_duration"),
        "priority": manifest.get("priority", 0),
    }


# Fields a worker cannot honour (yet): refused at build with the reason, never ignored.
_REFUSED = (
    ("mounts", lambda v: any(m.get("type") == "devices" for m in v or ()),
     "devices mounts are not set up by maand.core (tmp, proc, sys and bind are; the worker's /dev stays visible)",
     "remove the devices mount (the worker's /dev is used), or use tmp, proc, sys or bind mounts"),
)


def _refuse_unhonoured(job: Any, spec: dict, report: Any) -> None:
    for field, bad, why, fix in _REFUSED:
        if bad(spec.get(field)):
            report.error(KIND, job.file, field, "job %s: %s = %r: %s" % (job.name, field, spec[field], why), fix)

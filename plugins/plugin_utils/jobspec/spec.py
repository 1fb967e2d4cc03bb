# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job spec's parent chain folded in, after Maelstrom's CollapsedJobSpec::new
(crates/maelstrom-client-process/src/collapsed_job_spec.rs, ``collapse_spec``).

A job names a ``parent``: a container (workspace/containers/<name>.json, which may name its own
parent) or a local OCI image (the image's fields are read in by image.py). Pure Python, no Ansible
imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from .environment import SpecError, parse_environment

# ContainerUse, in Maelstrom's enum order; vector fields concatenate parent-first, the others are
# optional and take the nearest value up the chain.
CONTAINER_USES = ("layers", "enable_writable_file_system", "environment", "working_directory",
                  "mounts", "network", "user", "group")
VECTOR_USES = frozenset({"layers", "environment", "mounts"})
# ImageUse, and the projection of a container use set onto it
# (spec.rs project_container_use_set_to_image_use_set).
IMAGE_USES = ("layers", "environment", "working_directory")


@dataclass(frozen=True)
class Parent:
    """A ``parent``: a named container (workspace/containers/<name>.json) or a local OCI image."""

    kind: str  # "container" or "image"
    name: str
    use: frozenset


@dataclass(frozen=True)
class ImageRef:
    """The image at the root of a chain, with the image fields still wanted."""

    name: str
    use: tuple

    def to_dict(self) -> dict:
        return {"name": self.name, "use": list(self.use)}


@dataclass
class CollapsedSpec:
    """A job spec with its parent chain folded in, before defaults are applied (None = unset)."""

    layers: list = field(default_factory=list)
    enable_writable_file_system: Optional[bool] = None
    environment: list = field(default_factory=list)  # [EnvironmentSpec], parent-first
    working_directory: Optional[str] = None
    mounts: list = field(default_factory=list)
    network: Optional[str] = None
    user: object = None
    group: object = None
    image: Optional[ImageRef] = None

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in CONTAINER_USES}
        out["layers"], out["mounts"] = list(self.layers), list(self.mounts)
        out["environment"] = [{"vars": dict(e.vars), "extend": e.extend} for e in self.environment]
        out["image"] = self.image.to_dict() if self.image else None
        return out


def parse_parent(value, where: str = "parent") -> Optional[Parent]:
    """``{"container": NAME, "use": [...]}`` or ``{"image": NAME, "use": [...]}``; use omitted = all."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(f'{where}: must be {{"container": NAME, "use": [...]}} or {{"image": NAME, "use": [...]}}, '
                        f"not {type(value).__name__}")
    kinds = [k for k in ("container", "image") if k in value]
    unknown = sorted(set(value) - {"container", "image", "use"})
    if len(kinds) != 1 or unknown:
        raise SpecError(f'{where}: give exactly one of "container" or "image", plus an optional "use" list'
                        + (f"; unknown key(s) {', '.join(map(repr, unknown))}" if unknown else ""))
    kind = kinds[0]
    name = value[kind]
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}.{kind}: must be a non-empty name, not {name!r}")
    allowed = CONTAINER_USES if kind == "container" else IMAGE_USES
    return Parent(kind, name, _parse_use(value.get("use"), allowed, f"{where}.use"))


def _parse_use(use, allowed: tuple, where: str) -> frozenset:
    if use is None:
        return frozenset(allowed)
    if not isinstance(use, list) or not all(isinstance(u, str) for u in use):
        raise SpecError(f"{where}: must be a list of field names ({', '.join(allowed)})")
    bad = [u for u in use if u not in allowed]
    if bad:
        raise SpecError(f"{where}: unknown field(s) {', '.join(map(repr, bad))}; "
                        f"choose from {', '.join(allowed)}")
    return frozenset(use)


def _own_fields(spec: Mapping, where: str) -> CollapsedSpec:
    """The container fields written in one manifest or container file (no parent folded in)."""
    return CollapsedSpec(
        layers=list(spec.get("layers") or []),
        enable_writable_file_system=spec.get("enable_writable_file_system"),
        environment=parse_environment(spec.get("environment"), f"{where}environment"),
        working_directory=spec.get("working_directory"),
        mounts=list(spec.get("mounts") or []),
        network=spec.get("network"),
        user=spec.get("user"),
        group=spec.get("group"),
    )


class ContainerIndex:
    """Named container specs, each parsed once (own fields and parent) however many jobs use it."""

    def __init__(self, containers: Mapping[str, Mapping]):
        self._raw = containers
        self._parsed: dict = {}

    def get(self, name: str):
        """(own fields, parent) of container ``name``, or None when there is no such container."""
        if name not in self._parsed:
            spec = self._raw.get(name)
            if spec is None:
                return None
            where = f"containers/{name}.json: "
            self._parsed[name] = (_own_fields(spec, where), parse_parent(spec.get("parent"), where + "parent"))
        return self._parsed[name]


def collapse_spec(job: Mapping, containers) -> CollapsedSpec:
    """Fold the parent chain of ``job`` into one spec, as Maelstrom's CollapsedJobSpec::new.

    ``containers`` maps names to container specs (or is a ContainerIndex, to parse each once for many
    jobs). The use set starts as every vector field plus each optional field the job leaves unset;
    each container parent narrows it to its ``use``; an optional field leaves the set once a value
    is found (an explicit false is a value). The walk stops when the set is empty (a missing parent
    beyond that point is not looked up), at a container without parent, or at an image, which is
    kept with the image fields still wanted (None when none is). Errors name the chain.
    """
    index = containers if isinstance(containers, ContainerIndex) else ContainerIndex(containers)
    out = _own_fields(job, "")
    mask = {u for u in CONTAINER_USES if u in VECTOR_USES or getattr(out, u) is None}
    chain: list = []
    parent = parse_parent(job.get("parent"))
    while parent is not None:
        if parent.kind == "image":
            wanted = tuple(u for u in IMAGE_USES if u in mask and u in parent.use)
            out.image = ImageRef(parent.name, wanted) if wanted else None
            break
        mask &= parent.use
        if not mask:
            break
        found = index.get(parent.name)
        if found is None:
            raise SpecError(f'couldn\'t find parent container "{parent.name}"'
                            + f" (chain: {_chain(chain + [parent.name])}); create containers/{parent.name}.json "
                            "or fix the parent's \"container\" name")
        if parent.name in chain:
            raise SpecError("parent loop found: " + " -> ".join(f'"{n}"' for n in chain + [parent.name])
                            + "; break the loop by removing one \"parent\"")
        chain.append(parent.name)
        own, parent = found
        mask = _inherit(out, own, mask)
    return out


def collapse_specs(jobs: Mapping[str, Mapping], containers: Mapping[str, Mapping]) -> dict:
    """collapse_spec for every job (name -> manifest), parsing each container once."""
    index = ContainerIndex(containers)
    return {name: collapse_spec(job, index) for name, job in jobs.items()}


def _inherit(out: CollapsedSpec, parent: CollapsedSpec, mask: set) -> set:
    """Take the masked fields from one parent; return the fields still wanted further up."""
    still = set()
    for use in mask:
        if use in VECTOR_USES:
            setattr(out, use, getattr(parent, use) + getattr(out, use))
            still.add(use)
        else:
            setattr(out, use, getattr(parent, use))
            if getattr(out, use) is None:
                still.add(use)
    return still


def _chain(names: list) -> str:
    return " -> ".join(["job"] + [f'"{n}"' for n in names])

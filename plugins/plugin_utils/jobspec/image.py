# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job spec's image parent: a local OCI layout read (``read_oci_layout``) and its fields taken in
(``integrate_image``), after Maelstrom's spec.rs ConvertedImage and collapsed_job_spec.rs integrate_image.

Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Mapping, Optional

from ..bucket import readers
from .environment import Lookup, SpecError, environment_eval
from .spec import CONTAINER_USES, CollapsedSpec

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ImageConfig:
    """What a job takes from an image: layer tar paths, ``VAR=value`` Env lines, WorkingDir."""

    name: str
    layers: tuple = ()
    environment: Optional[tuple] = None
    working_directory: Optional[str] = None

    def environment_map(self) -> dict:
        """Env as a map; a line without ``=`` is an error naming the image (ConvertedImage::environment)."""
        out = {}
        for line in self.environment or ():
            key, sep, value = line.partition("=")
            if not sep:
                raise SpecError(f"image {self.name} has an invalid environment variable {line}")
            out[key] = value
        return dict(sorted(out.items()))


@dataclass
class IntegratedSpec:
    """A collapsed spec with its image read in: the image's Env starts the environment, its layers
    go below the spec's layers, its WorkingDir fills an unset working directory."""

    spec: CollapsedSpec
    initial_environment: dict = field(default_factory=dict)
    image_layers: list = field(default_factory=list)


def integrate_image(spec: CollapsedSpec, image: Optional[ImageConfig]) -> IntegratedSpec:
    """Take from ``image`` the fields ``spec.image.use`` still wants (CollapsedJobSpec::integrate_image)."""
    if spec.image is None:
        return IntegratedSpec(spec)
    if image is None or image.name != spec.image.name:
        raise SpecError(f"image {spec.image.name!r} is needed but was not given (add workspace/images/{spec.image.name}/)")
    use = spec.image.use
    out = IntegratedSpec(CollapsedSpec(**{name: getattr(spec, name) for name in CONTAINER_USES}))
    if "layers" in use:
        out.image_layers = list(image.layers)
    if "environment" in use:
        out.initial_environment = image.environment_map()
    if "working_directory" in use:
        out.spec.working_directory = image.working_directory
    return out


def read_oci_layout(path: str, name: str) -> ImageConfig:
    """Read a local OCI image layout (as ``skopeo copy docker://... oci:<path>`` writes it).

    Follows index.json to the image manifest and its config; returns the layer blob paths (bottom
    first), the config's Env and WorkingDir. Errors name the file and the fix.
    """
    root = PurePosixPath(path)
    index = _read_json(root / "index.json", name)
    manifests = index.get("manifests") if isinstance(index, Mapping) else None
    if not isinstance(manifests, list) or len(manifests) != 1:
        raise SpecError(f"image {name}: {root / 'index.json'}: expected exactly one manifest, found "
                        f"{len(manifests) if isinstance(manifests, list) else 'none'} (copy one image: "
                        f"skopeo copy docker://REF oci:{path})")
    entry = manifests[0]
    if entry.get("mediaType") == OCI_INDEX:
        raise SpecError(f"image {name}: {root / 'index.json'}: a multi-platform index (copy one platform: "
                        "skopeo copy --override-arch ARCH docker://REF oci:PATH)")
    manifest = _read_json(_blob(root, entry, name), name)
    config = _read_json(_blob(root, manifest.get("config") or {}, name), name).get("config") or {}
    layers = tuple(str(_blob(root, layer, name)) for layer in manifest.get("layers") or [])
    env = config.get("Env")
    return ImageConfig(name, layers, None if env is None else tuple(env), config.get("WorkingDir") or None)


def _blob(root: PurePosixPath, descriptor: Mapping, name: str) -> PurePosixPath:
    digest = descriptor.get("digest", "") if isinstance(descriptor, Mapping) else ""
    algo, sep, hexdigest = digest.partition(":")
    if not sep or not re.fullmatch(r"[a-z0-9]+", algo) or not re.fullmatch(r"[a-f0-9]+", hexdigest):
        raise SpecError(f"image {name}: invalid descriptor digest {digest!r} in {root} (re-copy the image)")
    return root / "blobs" / algo / hexdigest


def _read_json(path: PurePosixPath, name: str):
    """An image's JSON file through the bucket's one JSON reader (readers: size and nesting bounded,
    NaN refused), never a traceback."""
    try:
        return readers.parse_json(readers.read_bytes(str(path)).decode("utf-8"))
    except readers.InputError as exc:
        raise SpecError(f"image {name}: {path}: {exc.field + ': ' if exc.field else ''}{exc.message} "
                        f"(fix: {exc.fix})") from None
    except FileNotFoundError:
        raise SpecError(f"image {name}: {path} is missing (copy the image: skopeo copy docker://REF "
                        f"oci:workspace/images/{name})") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"image {name}: {path}: cannot read JSON: {exc}") from None


def job_environment_of(integrated: IntegratedSpec, env_lookup: Lookup) -> dict:
    """The final environment of a spec with its image read in (Maelstrom's evaluate_environment)."""
    return environment_eval(integrated.initial_environment, integrated.spec.environment, env_lookup)

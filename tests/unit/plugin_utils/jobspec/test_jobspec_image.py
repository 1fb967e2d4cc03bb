"""Image parents (seed 004): Maelstrom's ConvertedImage and integrate_image tests, and the OCI layout reader.

Table: tests/data/maelstrom/image.json (maelstrom-software/maelstrom spec.rs and collapsed_job_spec.rs).
"""

import hashlib
import json
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.jobspec.environment import SpecError
from ansible_collections.maand.core.plugins.plugin_utils.jobspec.image import (
    ImageConfig, integrate_image, job_environment_of, read_oci_layout,
)
from ansible_collections.maand.core.plugins.plugin_utils.jobspec.spec import CollapsedSpec, ImageRef, collapse_spec

TABLE = json.loads((Path(__file__).resolve().parents[3] / "data" / "maelstrom" / "image.json").read_text())


def _image(name, doc):
    env = doc.get("environment")
    return ImageConfig(name, tuple(doc.get("layers", ())), None if env is None else tuple(env),
                       doc.get("working_directory"))


@pytest.mark.parametrize("case", TABLE["image_cases"], ids=[c["test"] for c in TABLE["image_cases"]])
def test_maelstrom_converted_image(case):
    image = _image(case["image"], TABLE["images"][case["image"]])
    if "error" in case:
        with pytest.raises(SpecError, match=f"^{case['error']}$"):
            image.environment_map()
        return
    assert (list(image.layers), image.environment_map(), image.working_directory) == (
        case["layers"], case["environment"], case["working_directory"])


@pytest.mark.parametrize("case", TABLE["integrate_cases"], ids=[c["test"] for c in TABLE["integrate_cases"]])
def test_maelstrom_integrate_image(case):
    spec = CollapsedSpec(image=ImageRef("image", tuple(case["use"])))
    image = _image("image", case["image"])
    if "error" in case:
        with pytest.raises(SpecError, match=f"^{case['error']}$"):
            integrate_image(spec, image)
        return
    got = integrate_image(spec, image)
    assert got.spec.image is None
    assert (got.image_layers, got.initial_environment, got.spec.working_directory) == (
        case["image_layers"], case["initial_environment"], case["working_directory"])


def test_image_env_starts_the_environment():
    spec = collapse_spec({"parent": {"image": "deb"}, "environment": {"PATH": "/x:$prev{PATH}"}}, {})
    got = integrate_image(spec, ImageConfig("deb", environment=("PATH=/usr/bin", "LANG=C")))
    assert job_environment_of(got, {}.get) == {"LANG": "C", "PATH": "/x:/usr/bin"}


def test_missing_image_is_named():
    spec = collapse_spec({"parent": {"image": "deb"}}, {})
    with pytest.raises(SpecError, match=r"image 'deb' is needed .*workspace/images/deb/"):
        integrate_image(spec, None)


def _blob(root: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _layout(root: Path, config: dict, layers=(b"l1", b"l2")) -> None:
    cfg = _blob(root, json.dumps({"architecture": "amd64", "config": config}).encode())
    lays = [_blob(root, data) for data in layers]
    manifest = _blob(root, json.dumps({"schemaVersion": 2, "config": cfg, "layers": lays}).encode())
    manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def test_read_oci_layout(tmp_path):
    _layout(tmp_path, {"Env": ["PATH=/usr/bin", "A=b=c"], "WorkingDir": "/srv"})
    image = read_oci_layout(str(tmp_path), "deb")
    assert image.environment_map() == {"A": "b=c", "PATH": "/usr/bin"}
    assert image.working_directory == "/srv"
    assert [Path(p).read_bytes() for p in image.layers] == [b"l1", b"l2"]


def test_read_oci_layout_without_env(tmp_path):
    _layout(tmp_path, {}, layers=())
    assert read_oci_layout(str(tmp_path), "x") == ImageConfig("x", (), None, None)


def test_read_oci_layout_errors(tmp_path):
    with pytest.raises(SpecError, match=r"image x: .*index.json is missing \(copy the image: skopeo copy"):
        read_oci_layout(str(tmp_path), "x")
    (tmp_path / "index.json").write_text('{"manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",'
                                         ' "digest": "sha256:00"}]}')
    with pytest.raises(SpecError, match="multi-platform index"):
        read_oci_layout(str(tmp_path), "x")
    (tmp_path / "index.json").write_text('{"manifests": [{"digest": "../../etc/passwd"}]}')
    with pytest.raises(SpecError, match="invalid descriptor digest"):
        read_oci_layout(str(tmp_path), "x")
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(SpecError, match="cannot read JSON"):
        read_oci_layout(str(tmp_path), "x")

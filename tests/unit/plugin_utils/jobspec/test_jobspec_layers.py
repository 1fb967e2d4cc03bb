"""Layers stacked under a job's own files (seed 004): bucket folders and OCI layer tars with whiteouts."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import content as _content
from ansible_collections.maand.core.plugins.plugin_utils.jobspec import layers as _layers


def _files(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


def _tar(path, members):
    """members: [(name, text or None for a dir, or ("sym", target))]"""
    with tarfile.open(str(path), "w:gz") as tar:
        for name, body in members:
            info = tarfile.TarInfo(name)
            if body is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(body, tuple):
                info.type, info.linkname = (tarfile.SYMTYPE if body[0] == "sym" else tarfile.CHRTYPE), body[1]
                tar.addfile(info)
            else:
                data = body.encode()
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))


def test_folders_later_over_earlier_job_on_top(tmp_path):
    _files(tmp_path, {"l1/a": "l1", "l1/b": "l1", "l1/data/x": "never", "l2/b": "l2", "l2/c": "l2",
                      "job/c": "job", "job/Makefile": "m"})
    dest = _layers.stage(str(tmp_path), "j", str(tmp_path / "job"), ["l1", "l2"], str(tmp_path / "out"))
    got = {rel: open(os.path.join(dest, rel)).read() for rel in _content.hash_tree(dest)["files"]}
    assert got == {"a": "l1", "b": "l2", "c": "job", "Makefile": "m"}


def test_oci_tar_with_whiteouts(tmp_path):
    _files(tmp_path, {"job/Makefile": "m"})
    _tar(tmp_path / "one.tar.gz", [("etc", None), ("etc/keep", "k"), ("etc/gone", "g"), ("usr/lib/x", "x"),
                                   ("usr/bin/sh", ("sym", "../../lib/dash")), ("lib/dash", "d"),
                                   ("./logs/skip", "runtime")])
    _tar(tmp_path / "two.tar.gz", [("etc/.wh.gone", ""), ("usr/lib/.wh..wh..opq", ""), ("usr/lib/y", "y")])
    dest = _layers.stage(str(tmp_path), "j", str(tmp_path / "job"), ["one.tar.gz", "two.tar.gz"], str(tmp_path / "o"))
    assert sorted(_content.hash_tree(dest)["files"]) == ["Makefile", "etc/keep", "lib/dash", "usr/bin/sh", "usr/lib/y"]
    assert os.readlink(os.path.join(dest, "usr/bin/sh")) == "../../lib/dash"
    assert os.access(os.path.join(dest, "etc/keep"), os.X_OK)


@pytest.mark.parametrize("members, fragment", [
    ([("../escape", "x")], "leaves the tree"),
    ([("dev/null", ("chr", ""))], "device or fifo"),
    ([("usr/bin/sh", ("sym", "/bin/dash"))], "symlink to /bin/dash, outside the tree"),
])
def test_bad_members_are_refused(tmp_path, members, fragment):
    _files(tmp_path, {"job/Makefile": "m"})
    _tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(_layers.LayerError, match=fragment):
        _layers.stage(str(tmp_path), "j", str(tmp_path / "job"), ["bad.tar.gz"], str(tmp_path / "o"))


def test_missing_layer_and_not_a_tar(tmp_path):
    _files(tmp_path, {"job/Makefile": "m", "junk.tar": "not a tar"})
    with pytest.raises(_layers.LayerError, match="layer gone does not exist"):
        _layers.stage(str(tmp_path), "j", str(tmp_path / "job"), ["gone"], str(tmp_path / "o"))
    with pytest.raises(_layers.LayerError, match="is not a tar"):
        _layers.stage(str(tmp_path), "j", str(tmp_path / "job"), ["junk.tar"], str(tmp_path / "o"))


def test_stacked_points_jobs_with_layers_and_cleans_up_in_check_mode(tmp_path):
    _files(tmp_path, {"layers/c/f": "layer", "workspace/jobs/a/Makefile": "m", "workspace/jobs/b/Makefile": "m"})
    catalog = {"jobs": [{"name": "a", "path": "workspace/jobs/a", "spec": {"layers": ["layers/c"]}},
                        {"name": "b", "path": "workspace/jobs/b"}]}
    with _layers.stacked(str(tmp_path), catalog, ["a", "b"], check_mode=True) as got:
        path = got["jobs"][0]["path"]
        assert sorted(_content.hash_tree(path)["files"]) == ["Makefile", "f"]
        assert got["jobs"][1]["path"] == "workspace/jobs/b"
    assert not os.path.exists(path) and not (tmp_path / "data").exists()
    with _layers.stacked(str(tmp_path), catalog, ["a"], check_mode=False) as got:
        assert got["jobs"][0]["path"] == _layers.stage_dir(str(tmp_path), "a")
    with _layers.stacked(str(tmp_path), catalog, ["b"], check_mode=False) as got:
        assert got is catalog

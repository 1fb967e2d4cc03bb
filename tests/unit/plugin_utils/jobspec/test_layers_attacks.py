"""OCI image layers are third-party content: a crafted layer may not write, delete or link outside the
job's tree, through ``..``, absolute names, symlinks or hard links, nor keep setuid bits (issue 21; the
security review's tar-slip reproduction). Every refusal names the image, the layer and the member."""

from __future__ import annotations

import io
import os
import stat
import tarfile

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.jobspec import layers as _layers

BLOB = "workspace/images/evil/blobs/sha256/" + "ab" * 32


def _bucket(tmp_path):
    """A bucket with a job and, next to it (outside the stage), a folder the attacker aims at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("controller secret")
    (outside / "victim").write_text("keep me")
    bucket = tmp_path / "bucket"
    (bucket / "workspace" / "jobs" / "j").mkdir(parents=True)
    (bucket / "workspace" / "jobs" / "j" / "Makefile").write_text("start:\n")
    return str(bucket), outside


def _layer(bucket, members):
    """members: (name, kind, arg, mode): kind file (arg = text), dir, sym / hard (arg = link target)."""
    path = os.path.join(bucket, BLOB)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, arg, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if kind == "file":
                data = arg.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = arg or ""
            tar.addfile(info)
    return BLOB


def _stage(bucket, layer, dest=None):
    return _layers.stage(bucket, "j", os.path.join(bucket, "workspace", "jobs", "j"), [layer],
                         dest or os.path.join(bucket, "data", ".jobspec-layers", "j"))


def _untouched(outside):
    assert sorted(os.listdir(str(outside))) == ["secret.txt", "victim"]
    assert (outside / "victim").read_text() == "keep me"


def _named(exc, member):
    text = str(exc.value)
    assert text.startswith("job j: image evil, layer %s: member %s " % (BLOB, member)), text


@pytest.mark.parametrize("members, member, why", [
    # the review's reproduction: a symlink out of the tree, then a file beneath it
    ([("esc", "sym", "ABS_OUTSIDE", 0o777), ("esc/pwned.txt", "file", "x", 0o4755)], "esc", "outside the tree"),
    ([("esc", "sym", "../../../outside", 0o777), ("esc/pwned.txt", "file", "x", 0o644)], "esc", "outside the tree"),
    # a hard link pulling an outside file into what ships
    ([("stolen", "hard", "ABS_OUTSIDE/secret.txt", 0o644)], "stolen", "hard link"),
    ([("stolen", "hard", "../../../outside/secret.txt", 0o644)], "stolen", ""),
    # .. and a name that normalises to it
    ([("../../../outside/pwned", "file", "x", 0o644)], "../../../outside/pwned", "leaves the tree"),
    ([("a/../../../../outside/pwned", "file", "x", 0o644)], "a/../../../../outside/pwned", "leaves the tree"),
    # a link checked while it was harmless, made to lead out by a later member (x: a folder, then a link to .)
    ([("x", "dir", None, 0o755), ("l", "sym", "x/..", 0o777), ("x", "sym", ".", 0o777),
      ("l/.wh.victim", "file", "", 0o644)], "l/.wh.victim", "leaves the tree through a symlink"),
    ([("x", "dir", None, 0o755), ("l", "sym", "x/..", 0o777), ("x", "sym", ".", 0o777),
      ("l/outside/pwned", "file", "x", 0o644)], "l/outside/pwned", "leaves the tree through a symlink"),
    ([("x", "dir", None, 0o755), ("l", "sym", "x/..", 0o777), ("x", "sym", ".", 0o777)], "l",
     "leads outside the tree"),
    ([("p", "fifo", None, 0o644)], "p", "device or fifo"),
])
def test_a_crafted_layer_writes_nothing_outside_and_is_named(tmp_path, members, member, why):
    bucket, outside = _bucket(tmp_path)
    members = [(n.replace("ABS_OUTSIDE", str(outside)), k, a.replace("ABS_OUTSIDE", str(outside)) if a else a, m)
               for n, k, a, m in members]
    layer = _layer(bucket, members)
    with pytest.raises(_layers.LayerError) as exc:
        _stage(bucket, layer)
    _named(exc, members[-1][0] if member == members[-1][0] else member)
    assert why in str(exc.value)
    assert "rebuild the image" in str(exc.value) or "make the link relative" in str(exc.value)
    _untouched(outside)
    for dirpath, _dirs, files in os.walk(bucket):
        assert "pwned.txt" not in files and "pwned" not in files
        for name in files:
            assert os.lstat(os.path.join(dirpath, name)).st_ino != os.stat(str(outside / "secret.txt")).st_ino


def test_setuid_setgid_and_group_write_are_dropped_and_links_inside_are_kept(tmp_path):
    bucket, outside = _bucket(tmp_path)
    layer = _layer(bucket, [("tools", "dir", None, 0o2777), ("tools/run", "file", "#!/bin/sh\n", 0o6775),
                            ("tools/sticky", "file", "x", 0o1666), ("etc/conf", "file", "c", 0o664),
                            ("etc/link", "sym", "conf", 0o777), ("etc/hard", "hard", "etc/conf", 0o664),
                            ("/abs/name", "file", "a", 0o644)])
    dest = _stage(bucket, layer)

    def mode(rel):
        return stat.S_IMODE(os.lstat(os.path.join(dest, rel)).st_mode)
    assert mode("tools/run") == 0o755 and mode("tools/sticky") == 0o644 and mode("etc/conf") == 0o644
    assert mode("tools") == 0o755
    assert os.readlink(os.path.join(dest, "etc/link")) == "conf"
    assert os.stat(os.path.join(dest, "etc/hard")).st_ino == os.stat(os.path.join(dest, "etc/conf")).st_ino
    assert open(os.path.join(dest, "abs/name")).read() == "a"  # a leading / is dropped: the member stays inside
    _untouched(outside)


def test_check_mode_extracts_into_its_own_folder_and_refuses_the_same(tmp_path):
    bucket, outside = _bucket(tmp_path)
    layer = _layer(bucket, [("esc", "sym", str(outside), 0o777), ("esc/pwned.txt", "file", "x", 0o644)])
    catalog = {"jobs": [{"name": "j", "path": "workspace/jobs/j", "spec": {"layers": [layer]}}]}
    with pytest.raises(_layers.LayerError, match="member esc is a symlink"):
        with _layers.stacked(bucket, catalog, ["j"], check_mode=True):
            pass
    _untouched(outside)
    assert not os.path.exists(os.path.join(bucket, "data"))  # --check writes nothing into the bucket


@pytest.mark.parametrize("layer, why", [
    (".", "is the bucket folder itself"), ("secrets", "lies in secrets/"), ("data/x", "lies in data/"),
    ("layers/linky", "holds a symlink layers/linky/out -> "),
])
def test_folder_layers_never_ship_the_bucket_secrets_or_a_link_out(tmp_path, layer, why):
    bucket, outside = _bucket(tmp_path)
    for folder in ("secrets", "data/x", "layers/linky"):
        os.makedirs(os.path.join(bucket, folder), exist_ok=True)
    open(os.path.join(bucket, "secrets", "kv.key"), "w").write("key")
    os.symlink(str(outside), os.path.join(bucket, "layers", "linky", "out"))
    with pytest.raises(_layers.LayerError, match="job j: layer %s " % layer.replace(".", r"\.")) as exc:
        _layers.stage(bucket, "j", os.path.join(bucket, "workspace", "jobs", "j"), [layer], str(tmp_path / "o"))
    assert why in str(exc.value)
    assert not os.path.exists(str(tmp_path / "o" / "kv.key"))

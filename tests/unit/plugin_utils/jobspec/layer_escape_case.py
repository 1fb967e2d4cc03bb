# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The security review's N1 layer (a standalone script as well, so it runs on Debian 12's /usr/bin/python3,
3.11.2, which has no tarfile.data_filter and may have no pytest).

``l -> d/d/d/d/../../../../<outside>`` looks inside the tree while ``d`` does not exist; ``d -> .`` then
makes it lead out; a directory member ``l`` then must not chmod the outside folder through the link.
``python3 layer_escape_case.py <empty folder>`` prints ``OK <reason>`` or ``FAIL <reason>`` (exit 1)."""

from __future__ import annotations

import os
import stat
import sys
import tarfile

BLOB = "workspace/images/evil/blobs/sha256/" + "aa" * 32


def _tar(path, members):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, kind, link, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE}[kind]
            info.linkname = link or ""
            tar.addfile(info)


def run(root: str, layers, folder: bool = True) -> str:
    """Stage the crafted layer under root (with the directory member l, or without it); returns "" when
    nothing outside changed and either the layer was refused naming the member or l became a folder of
    the tree (the directory member replaced the link)."""
    outside = os.path.join(root, "outside_secret")
    os.mkdir(outside, 0o700)
    os.chmod(outside, 0o700)
    bucket = os.path.join(root, "bucket")
    job_dir = os.path.join(bucket, "workspace", "jobs", "web")
    os.makedirs(job_dir)
    dest = os.path.join(bucket, "data", ".jobspec-layers", "web")
    depth = len(os.path.relpath(dest, root).split(os.sep))  # levels from dest up to root
    link = "/".join(["d"] * depth + [".."] * depth) + "/outside_secret"
    _tar(os.path.join(bucket, BLOB), [("l", "sym", link, 0o777), ("d", "sym", ".", 0o777)]
         + ([("l", "dir", None, 0o755)] if folder else []))
    try:
        layers.stage(bucket, "web", job_dir, [BLOB], dest)
        refused = ""
    except layers.LayerError as exc:
        refused = str(exc)
    mode = stat.S_IMODE(os.stat(outside).st_mode)
    if mode != 0o700:
        return "the outside folder's mode changed to %o (refused: %r)" % (mode, refused)
    if not refused:
        if not stat.S_ISDIR(os.lstat(os.path.join(dest, "l")).st_mode):
            return "the layer was not refused and l is not the layer's folder"
        return ""
    if not folder and "member l is a symlink" not in refused:
        return "the escaping link l was not refused: %s" % refused
    if not refused.startswith("job web: image evil, layer %s: member " % BLOB):
        return "the refusal does not name the image, layer and member: %s" % refused
    return ""


def main(argv) -> int:
    os.makedirs(os.path.join(argv[1], "folder"))
    os.makedirs(os.path.join(argv[1], "link"))
    from ansible_collections.maand.core.plugins.plugin_utils.jobspec import layers
    problem = run(os.path.join(argv[1], "folder"), layers) or run(os.path.join(argv[1], "link"), layers, False)
    print(("FAIL " + problem) if problem else "OK data_filter=%s" % hasattr(tarfile, "data_filter"))
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job spec's ``layers`` stacked under the job's own files (seed 004; docs/jobspec.md).

``stage(bucket, job, job_dir, layers, dest)`` builds the tree deploy ships for a job with layers:
every layer in order (later over earlier), then the job's own files on top, into ``dest``. A layer
is a bucket folder (hard-linked, copied across file systems) or an OCI layer tar from an image
parent (``workspace/images/<name>/blobs/...``, gzip or plain), extracted with OCI whiteouts
(``.wh.<name>`` deletes a lower entry, ``.wh..wh..opq`` empties a lower folder). The content hash of
``dest`` then covers the layers, and deploy renders and ships ``dest`` as the job's tree (``stacked``). Runtime
folders (data/, logs/, bin/ at the top) are never taken from a layer, as from the job folder.

Tar members that would leave the tree, device nodes and fifos are refused (LayerError naming the
layer and the member), never skipped silently. No Ansible imports.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tarfile
import tempfile

from ..bucket import storage as _storage
from ..bucket.content import RUNTIME_DIRS

STAGE_DIR = ".jobspec-layers"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


class LayerError(ValueError):
    """A layer that cannot be stacked (names the job, the layer and the fix)."""


def stage_dir(bucket: str, job: str) -> str:
    return os.path.join(bucket, _storage.DATA_DIR, STAGE_DIR, job)


def stage(bucket: str, job: str, job_dir: str, layers: list, dest: str) -> str:
    """Build ``dest`` from the layers (bucket-relative paths) and the job folder; returns dest."""
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for layer in layers:
        path = os.path.join(bucket, layer)
        if os.path.isdir(path):
            _copy_tree(path, dest)
        elif os.path.isfile(path):
            _extract(path, dest, job, layer)
        else:
            raise LayerError("job %s: layer %s does not exist (fix \"layers\" in the manifest or its parent, "
                             "or copy the image again)" % (job, layer))
    _copy_tree(job_dir, dest)
    return dest


def _replace(target: str) -> None:
    """Make room for a new entry at target (a later layer wins, whatever the earlier entry was)."""
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    elif os.path.lexists(target):
        os.unlink(target)


def _copy_tree(src: str, dest: str) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in RUNTIME_DIRS]
            filenames = [f for f in filenames if f not in RUNTIME_DIRS]
        out_dir = dest if rel == "." else os.path.join(dest, rel)
        if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
            _replace(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        for name in list(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                dirnames.remove(name)
                filenames.append(name)
        for name in filenames:
            _place(os.path.join(dirpath, name), os.path.join(out_dir, name))


def _place(src: str, target: str) -> None:
    _replace(target)
    _storage.link_or_copy(src, target)


def _member_path(member: tarfile.TarInfo, job: str, layer: str) -> str:
    name = posixpath.normpath(member.name.lstrip("/"))
    if name in (".", ""):
        return ""
    if name == ".." or name.startswith("../"):
        raise LayerError("job %s: layer %s: member %s leaves the tree; re-create the image" % (job, layer, member.name))
    return name


def _extract(path: str, dest: str, job: str, layer: str) -> None:
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                _extract_member(archive, member, dest, job, layer)
    except tarfile.TarError as exc:
        raise LayerError("job %s: layer %s is not a tar (gzip or plain) layer (%s); copy the image with "
                         "skopeo copy --dest-compress-format gzip" % (job, layer, exc)) from None


def _extract_member(archive, member, dest, job, layer):
    rel = _member_path(member, job, layer)
    if not rel or rel.split("/")[0] in RUNTIME_DIRS:
        return
    parent, base = posixpath.split(rel)
    target = os.path.join(dest, rel)
    if base == OPAQUE:
        folder = os.path.join(dest, parent)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            _replace(os.path.join(folder, name))
        return
    if base.startswith(WHITEOUT):
        _replace(os.path.join(dest, parent, base[len(WHITEOUT):]))
        return
    os.makedirs(os.path.join(dest, parent), exist_ok=True)
    if member.isdir():
        if os.path.lexists(target) and not os.path.isdir(target):
            _replace(target)
        os.makedirs(target, exist_ok=True)
    elif member.issym():
        _replace(target)
        os.symlink(member.linkname, target)
    elif member.islnk():
        _replace(target)
        os.link(os.path.join(dest, _member_path(tarfile.TarInfo(member.linkname), job, layer)), target)
    elif member.isfile():
        _replace(target)
        with archive.extractfile(member) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        os.chmod(target, member.mode & 0o7777)
    else:
        raise LayerError("job %s: layer %s: member %s is a device or fifo, which a job tree cannot hold; "
                         "build the image without it" % (job, layer, member.name))


@contextlib.contextmanager
def stacked(bucket: str, catalog: dict, jobs: list, check_mode: bool):
    """The catalog with every in-scope job that has layers pointing at its stacked tree (built here:
    data/.jobspec-layers/<job>, or a temporary folder removed afterwards in check mode). Jobs without
    layers keep their path; without any layers the catalog itself is yielded."""
    layered = {j["name"]: j for j in catalog.get("jobs", [])
               if j["name"] in set(jobs) and ((j.get("spec") or {}).get("layers"))}
    if not layered:
        yield catalog
        return
    tmp = tempfile.mkdtemp(prefix="maand-layers-") if check_mode else None
    try:
        paths = {}
        for name, job in sorted(layered.items()):
            job_dir = os.path.join(bucket, job.get("path") or os.path.join("workspace", "jobs", name))
            dest = os.path.join(tmp, name) if tmp else stage_dir(bucket, name)
            paths[name] = stage(bucket, name, job_dir, job["spec"]["layers"], dest)
        yield dict(catalog, jobs=[dict(j, path=paths[j["name"]]) if j["name"] in paths else j
                                  for j in catalog.get("jobs", [])])
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

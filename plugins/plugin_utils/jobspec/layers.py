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

Image layers are third-party content, so extraction trusts nothing in them: every member's parent
folder is resolved (links followed, by ``_resolve``: component by component inside the tree, so the
answer holds wherever the tree sits, on the controller or a worker) before anything is written,
removed or linked, and must lie in the tree; a member whose name, symlink target or hard-link source
leaves the tree (``..``, an absolute link, a link through an earlier symlink), a device node or a
fifo is refused (LayerError naming the image, the layer and the member, never skipped silently);
setuid, setgid and sticky bits and group/world write are dropped. A directory member never follows
what it finds at its path: a symlink there is replaced by the folder, and modes are set through a
descriptor opened without following links (security review 4, N1). These checks are the
collection's own: Python's tarfile ``data_filter`` (3.11.4+, absent from Debian 12's 3.11.2) vets
each member as well where it exists, but nothing depends on it. After each layer no link in the tree
may resolve outside it. Under ``--check`` the tree is built in a temporary folder of the run's own.
No Ansible imports.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile

from ..bucket import storage
from ..bucket.content import RUNTIME_DIRS
from ..errors import MaandError

STAGE_DIR = ".jobspec-layers"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


class LayerError(MaandError):
    """A layer that cannot be stacked (names the job, the layer and the fix)."""


def stage_dir(bucket: str, job: str) -> str:
    return os.path.join(bucket, storage.DATA_DIR, STAGE_DIR, job)


def stage(bucket: str, job: str, job_dir: str, layers: list, dest: str) -> str:
    """Build ``dest`` from the layers (bucket-relative paths) and the job folder; returns dest."""
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for layer in layers:
        path = os.path.join(bucket, layer)
        if os.path.isdir(path):
            problem = storage.layer_problem(bucket, layer)
            if problem:
                raise LayerError("job %s: %s" % (job, problem))
            _copy_tree(path, dest)
            _check_links(dest, _Where(job, layer))
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
        if os.path.islink(out_dir) or (os.path.lexists(out_dir) and not os.path.isdir(out_dir)):
            _replace(out_dir)  # a folder replaces a link found at its path, never writes through it
        os.makedirs(out_dir, exist_ok=True)
        for name in list(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                dirnames.remove(name)
                filenames.append(name)
        for name in filenames:
            _place(os.path.join(dirpath, name), os.path.join(out_dir, name))


def _place(src: str, target: str) -> None:
    _replace(target)
    storage.link_or_copy(src, target)


class _Where:
    """Names a member in errors: job, image (when the layer is an image's blob), layer, member."""

    def __init__(self, job: str, layer: str):
        self.job, self.layer = job, layer
        parts = layer.replace(os.sep, "/").split("/")
        self.image = parts[2] if len(parts) > 3 and parts[:2] == ["workspace", "images"] else ""

    def refuse(self, member: str, why: str, fix: str = "rebuild the image without it") -> LayerError:
        image = "image %s, " % self.image if self.image else ""
        return LayerError("job %s: %slayer %s: member %s %s; %s" % (self.job, image, self.layer, member, why, fix))


def _member_path(member: tarfile.TarInfo, where: _Where) -> str:
    name = posixpath.normpath(member.name.lstrip("/"))
    if name in (".", ""):
        return ""
    if name == ".." or name.startswith("../"):
        raise where.refuse(member.name, "leaves the tree (..)")
    return name


MAX_HOPS = 40


def _resolve(dest: str, rel: str):
    """rel (a tree-relative path) with every symlink in it followed, each step inside the tree: the
    components it resolves to (none of them a link; missing ones taken as named), or None when a step
    leaves the tree (``..`` above the top, an absolute link, too many links). Unlike realpath this
    does not depend on where dest sits, so a link cannot leave and come back in through dest's own name."""
    parts = []
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    hops = 0
    while todo:
        name = todo.pop(0)
        if name == "..":
            if not parts:
                return None
            parts.pop()
            continue
        here = os.path.join(dest, *parts, name)
        if os.path.islink(here):
            hops += 1
            target = os.readlink(here)
            if hops > MAX_HOPS or target.startswith("/"):
                return None
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo
            continue
        parts.append(name)
    return parts


def _inside(dest: str, rel: str) -> bool:
    """rel, every link in it followed, lies in the tree dest."""
    return _resolve(dest, rel) is not None


def _set_dir_mode(path: str, mode: int) -> None:
    """chmod a folder through a descriptor opened without following a link at path."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _extract(path: str, dest: str, job: str, layer: str) -> None:
    where = _Where(job, layer)
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                _extract_member(archive, member, dest, where)
    except tarfile.TarError as exc:
        raise LayerError("job %s: layer %s is not a tar (gzip or plain) layer (%s); copy the image with "
                         "skopeo copy --dest-compress-format gzip" % (job, layer, exc)) from None
    _check_links(dest, where)


def _vet(member: tarfile.TarInfo, dest: str, where: _Where) -> tarfile.TarInfo:
    """tarfile's own "data" filter (Python 3.11.4+): names, links and modes safe to extract into dest."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return member
    try:
        return data_filter(member, dest)
    except tarfile.FilterError as exc:
        raise where.refuse(member.name, "is refused by tarfile's data filter (%s)" % exc) from None


def _extract_member(archive, member, dest, where):
    rel = _member_path(member, where)
    if not rel or rel.split("/")[0] in RUNTIME_DIRS:
        return
    if not (member.isdir() or member.issym() or member.islnk() or member.isfile()):
        raise where.refuse(member.name, "is a device or fifo, which a job tree cannot hold")
    parent, base = posixpath.split(rel)
    if not _inside(dest, parent):
        raise where.refuse(member.name, "leaves the tree through a symlink in %s" % (parent or "."))
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
        _vet(member, dest, where)
        if os.path.islink(target) or (os.path.lexists(target) and not os.path.isdir(target)):
            _replace(target)  # a link at a folder's path is replaced, never followed (N1)
        if not os.path.lexists(target):
            os.mkdir(target, 0o700)
        _set_dir_mode(target, 0o755)
    elif member.issym():
        if posixpath.isabs(member.linkname) or not _inside(dest, posixpath.join(parent, member.linkname)):
            raise where.refuse(member.name, "is a symlink to %s, outside the tree" % member.linkname,
                               "make the link relative to a file in the image, or rebuild the image without it")
        _vet(member, dest, where)
        _replace(target)
        os.symlink(member.linkname, target)
    elif member.islnk():
        parts = None if posixpath.isabs(member.linkname) else _resolve(dest, member.linkname)
        if parts is None:
            raise where.refuse(member.name, "is a hard link to %s, outside the tree" % member.linkname)
        source = os.path.join(dest, *parts)
        if not parts or not stat.S_ISREG(os.lstat(source).st_mode if os.path.lexists(source) else 0):
            raise where.refuse(member.name, "is a hard link to %s, which is not a file of the tree" % member.linkname)
        _vet(member, dest, where)
        _replace(target)
        os.link(source, target)
    else:
        mode = _safe_mode(_vet(member, dest, where).mode)
        _replace(target)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with archive.extractfile(member) as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out)
            os.fchmod(out.fileno(), mode)


def _safe_mode(mode):
    """No setuid, setgid or sticky bit, no group/world write (as tarfile's data filter)."""
    return (0o644 if mode is None else mode) & 0o755


def _check_links(dest: str, where: _Where) -> None:
    """No link in the tree resolves outside it (a later member may have moved what an earlier link points
    through), followed step by step inside the tree (``_resolve``), as it will be wherever the tree is shipped."""
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and not _inside(dest, os.path.relpath(path, dest).replace(os.sep, "/")):
                raise where.refuse(os.path.relpath(path, dest), "is a symlink to %s, which leads outside the tree"
                                   % os.readlink(path), "make the link relative to a file in the image, or rebuild "
                                   "the image without it")


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

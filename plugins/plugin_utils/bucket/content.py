# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Content hashing of job trees and restart_globs matching (pure Python, no ansible imports).

A job's content is hashed on the controller, file by file, so the deploy plan can tell which paths
changed since the last promoted deploy and match them against `restart_globs`.

- Every regular file and symlink under the job folder is hashed, except the runtime folders
  `data/`, `logs/` and `bin/` at the top of the job (rsync never touches them on workers either).
- A file's digest covers its bytes and its executable bit (rsync carries permissions, so `chmod +x`
  is a change); a symlink's digest covers its target.
- The job hash is the sha256 of the sorted `(path, digest)` list, so it changes when any file is
  added, removed, modified or made (non-)executable.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat

from ..errors import MaandError

RUNTIME_DIRS = ("data", "logs", "bin")
_CHUNK = 1 << 20


class ContentError(MaandError):
    """A job tree cannot be hashed (missing, unreadable)."""


def _file_digest(path, executable):
    digest = hashlib.sha256()
    digest.update(b"x" if executable else b"-")
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def tree_hash(files):
    """The job hash of a {relative path: digest} map."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
        digest.update(files[rel].encode("ascii"))
        digest.update(b"\n")
    return digest.hexdigest()


def hash_tree(root):
    """Hash a job folder. Returns {"hash": hex, "files": {rel: hex}} (rel uses forward slashes)."""
    if not os.path.isdir(root):
        raise ContentError("job folder %s does not exist (was the job deleted without a build?)" % root)
    files = {}
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            rel_dir = ""
            dirnames[:] = [d for d in dirnames if d not in RUNTIME_DIRS]
        dirnames.sort()
        # symlinked folders are listed in dirnames but os.walk does not follow them: hash the link
        for name in list(dirnames):
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                dirnames.remove(name)
                filenames.append(name)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = posixpath.join(rel_dir.replace(os.sep, "/"), name) if rel_dir else name
            try:
                info = os.lstat(full)
                if stat.S_ISLNK(info.st_mode):
                    files[rel] = hashlib.sha256(b"l" + os.readlink(full).encode("utf-8", "surrogateescape")).hexdigest()
                elif stat.S_ISREG(info.st_mode):
                    files[rel] = _file_digest(full, bool(info.st_mode & stat.S_IXUSR))
            except OSError as exc:
                raise ContentError("cannot read %s: %s" % (full, exc.strerror or exc))
    return {"hash": tree_hash(files), "files": files}


def _raise(exc):
    raise ContentError("cannot read %s: %s" % (getattr(exc, "filename", "?"), exc.strerror or exc))


def changed_paths(previous, current):
    """Sorted relative paths added, removed or modified between two {rel: digest} maps."""
    previous = previous or {}
    current = current or {}
    return sorted(rel for rel in set(previous) | set(current) if previous.get(rel) != current.get(rel))


# --- restart_globs -------------------------------------------------------------------------------
# Semantics follow maand: patterns are job-relative with forward slashes.
#   - a literal pattern (no * ? [) matches the whole path or the base name ("nginx.conf");
#   - a pattern with "**": "**/x" matches x (a glob) as the base name or whole path at any depth,
#     "**/dir/x" matches x under dir, "dir/**" matches everything under dir, "a**b" prefix/suffix;
#   - a pattern with "/" matches the whole path ("conf/*.conf", * never crosses "/"); a pattern
#     ending in "/" matches everything under that folder;
#   - otherwise the pattern matches the base name or the whole path ("*.conf").


class GlobError(MaandError):
    pass


def _translate(pattern):
    """Regex for a path.Match-style glob: * and ? never match "/"; [..] classes; \\ escapes."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i >= n:
                raise GlobError("pattern %r ends with a backslash" % pattern)
            out.append(re.escape(pattern[i]))
            i += 1
        elif c == "[":
            j = i
            negate = False
            if j < n and pattern[j] in "^!":
                negate = True
                j += 1
            start = j
            while j < n and (pattern[j] != "]" or j == start):
                j += 1
            if j >= n:
                raise GlobError("pattern %r has an unclosed [" % pattern)
            body = pattern[start:j].replace("\\", "\\\\")
            out.append(("[^/%s]" if negate else "[%s]") % body)
            i = j + 1
        else:
            out.append(re.escape(c))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


_CACHE = {}


def _match(pattern, name):
    rx = _CACHE.get(pattern)
    if rx is None:
        rx = _CACHE[pattern] = _translate(pattern)
    return rx.match(name) is not None


def validate_glob(pattern):
    """Raise GlobError when pattern is empty or malformed."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise GlobError("empty glob pattern")
    pattern = pattern.strip()
    for part in pattern.split("**"):
        _translate(part.strip("/") or "x")


def glob_match(pattern, rel):
    pattern = pattern.strip()
    rel = rel.lstrip("/")
    if not pattern:
        return False
    base = posixpath.basename(rel)
    if not any(c in pattern for c in "*?["):
        if pattern == rel or pattern == base:
            return True
    if "**" in pattern:
        return _match_double_star(pattern, rel)
    if "/" in pattern:
        if _match(pattern, rel):
            return True
        folder = pattern.rstrip("/")
        if folder != pattern:
            return rel == folder or rel.startswith(folder + "/")
        return False
    return _match(pattern, base) or _match(pattern, rel)


def _match_double_star(pattern, rel):
    if pattern.startswith("**/"):
        suffix = pattern[3:]
        if "/" in suffix:
            folder, name = suffix.split("/", 1)
            if not rel.startswith(folder + "/"):
                return False
            return _match(name, rel[len(folder) + 1:])
        return _match(suffix, posixpath.basename(rel)) or _match(suffix, rel)
    if pattern.endswith("/**"):
        prefix = pattern[:-3]
        return rel == prefix or rel.startswith(prefix + "/")
    parts = pattern.split("**")
    if len(parts) != 2:
        return False
    prefix, suffix = parts
    if prefix and not rel.startswith(prefix):
        return False
    rest = rel[len(prefix):].lstrip("/")
    suffix = suffix.lstrip("/")
    if not suffix:
        return True
    return _match(suffix, rest) or _match(suffix, posixpath.basename(rest))


def match_any(patterns, rels):
    """Paths of rels (in order, unique) that match at least one pattern."""
    matched = []
    seen = set()
    for rel in rels:
        if rel in seen:
            continue
        if any(glob_match(p, rel) for p in patterns or ()):
            seen.add(rel)
            matched.append(rel)
    return matched

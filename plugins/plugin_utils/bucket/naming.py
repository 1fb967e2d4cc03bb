# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible group names for jobs, labels and zones.

A name that is already a valid group name (lower-case [a-z0-9_]) keeps its spelling; any other name
has each invalid character replaced by "_" and gets "_" + 8 hex digits of its SHA-1 appended, so
"api-staging" and "api_staging" never collide and a group's name never depends on which other
jobs exist.
"""

from __future__ import annotations

import hashlib
import re

_INVALID = re.compile(r"[^a-z0-9_]")


def group_name(prefix, name):
    lowered = name.lower()
    cleaned = _INVALID.sub("_", lowered)
    if cleaned == name:
        return "%s_%s" % (prefix, cleaned)
    return "%s_%s_%s" % (prefix, cleaned, hashlib.sha1(name.encode("utf-8")).hexdigest()[:8])

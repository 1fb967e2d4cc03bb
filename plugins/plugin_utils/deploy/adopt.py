# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopting a bucket id found on the workers (-e maand_adopt_bucket_id=<id>), no Ansible imports.

When data/catalog.json was lost and rebuilt with a new bucket_id, the workers still hold the old
tree /opt/worker/<old id>/ with running jobs. The deploy refuses to start a second copy; the user
either restores the catalog or adopts the old id: the catalog takes it and the deploy continues
that tree (its promoted records decide what restarts).
"""

from __future__ import annotations

import re

from ..bucket import locks
from ..catalog import catalog
from ..errors import MaandError

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


class AdoptError(MaandError):
    pass


def adopt(bucket, bucket_id, write=True):
    """Make the catalog's bucket_id bucket_id. Returns (bucket_id, changed)."""
    if not ID_RE.match(bucket_id or "") or bucket_id in (".", ".."):
        raise AdoptError("maand_adopt_bucket_id: %r is not a bucket id (the name of a folder under /opt/worker/ "
                         "holding a worker.json)" % (bucket_id,))
    with locks.bucket_lock(bucket, wait=True):
        cat = catalog.read_catalog(bucket)
        if cat is None:
            raise AdoptError("%s/data/catalog.json does not exist: run maand.core.build first, then adopt" % bucket)
        if cat["bucket_id"] == bucket_id:
            return bucket_id, False
        if write:
            new = dict(cat, bucket_id=bucket_id)
            catalog.write_catalog(bucket, new)
        return bucket_id, True

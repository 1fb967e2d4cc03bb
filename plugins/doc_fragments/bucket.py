# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The bucket an action works on; the specs are in plugins/plugin_utils/adapter/specs.py (BUCKET, BUCKET_CWD,
    # BUCKET_ID). maand.core.bucket: the bucket directory, required.
    DOCUMENTATION = r"""
options:
  bucket:
    description: The bucket directory (holding C(maand.conf), C(workspace/) and C(data/)); C(maand_bucket_dir).
    type: path
    required: true
"""

    # maand.core.bucket.cwd: the bucket directory, by default the current one.
    CWD = r"""
options:
  bucket:
    description: The bucket directory (holding C(maand.conf), C(workspace/) and C(data/)), by default the current one.
    type: path
    default: .
"""

    # maand.core.bucket.id: the bucket id, for the actions that address the worker's tree.
    ID = r"""
options:
  bucket_id:
    description: The bucket id (the catalog's C(bucket_id), the host variable C(maand_bucket_id)).
    type: str
    required: true
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: state
short_description: Move a bucket's state between its folder and a PostgreSQL state store
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Used by the C(maand.core.state) playbook.
  - "Copies the bucket's state (the catalog, C(bucket_id), the KV document with its history and sealed secrets, and
    with a PostgreSQL target the last run records) from the store the bucket uses now (C(state_url) in C(maand.conf) or
    C(MAAND_STATE_URL), else C(data/)) to O(to): all or nothing (one transaction; files are staged, then renamed together)."
  - "Every document is checked first (the catalog against its schema, the KV document as the KV store reads it).
    C(secrets/kv.key) is never copied: the secrets stay sealed with it."
  - Refused while a deploy holds the bucket's deploy lock, and when the target already holds a catalog unless O(force).
  - "Afterwards point every controller at the new store: set or remove C(state_url) (or C(MAAND_STATE_URL)).
    See C(docs/awx.md) in the collection."
author:
  - maand.core developers (@maand-sh)
options:
  to:
    description:
      - "The target: a C(postgresql://[user@]host[:port]/database) URL (the password through C(PGPASSWORD),
        C(~/.pgpass) or a service file), or C(files) for the bucket's C(data/) folder."
    type: str
    required: true
  force:
    description: Replace a catalog the target already holds.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Checks and lists what would be copied; writes nothing.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.controller]
notes:
  - An action plugin; the work is done by C(plugins/plugin_utils/ops/state_move.py).
"""

EXAMPLES = r"""
- name: Move the bucket's state into PostgreSQL
  maand.core.state:
    bucket: /srv/buckets/prod
    to: postgresql://maand@db.example.com/maand_prod
"""

RETURN = r"""
source:
  description: The store the state was copied from (a URL without its password, or the data folder).
  returned: always
  type: str
target:
  description: The store it was copied to (without a password).
  returned: always
  type: str
documents:
  description: The documents copied (catalog, bucket_id, kv).
  returned: success
  type: list
  elements: str
runs:
  description: How many run records were copied (a PostgreSQL target).
  returned: success
  type: int
records:
  description: How many deploy records were copied (the history M(maand.core.logs) reads).
  returned: success
  type: int
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks a playbook makes on the controller before it touches a worker (no Ansible imports).

The first task of every maand.core playbook (the maand.core.preflight action) checks, in this order, and the
first that fails refuses the run with its fix:

* the run's ``maand_`` extra vars (ops/extra_vars.py: a typo would change what the run does);
* with ``inventory``: that the maand.core.workspace inventory loaded. Ansible only warns when an inventory
  source fails, then skips a play with no hosts and exits 0; the inventory sets ``maand_workspace_ok`` and
  ``maand_inventory_errors`` on ``all``, and an inventory that raised sets nothing;
* with ``workers``: that the bucket has workers (a play over none prints "skipping: no hosts matched" and exits
  0), and that the SSH key maand.conf names exists (without it every worker answers "Permission denied
  (publickey)" and the run reads as a fleet that is down).

One task instead of one per check: each task of a play costs a round of Ansible's strategy and a fork.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What the inventory told the controller's play (its variables on localhost)."""

    loaded: bool  # maand_workspace_ok
    errors: Sequence[str] = ()  # maand_inventory_errors
    bucket_dir: str = ""  # maand_bucket_dir
    sources: Sequence[str] = ()  # ansible_inventory_sources
    workers: int = 0  # hosts of maand_workers and maand_removed_workers
    key_file: str = ""  # ansible_ssh_private_key_file of the first of them that sets one


def inventory_problem(inv: Inventory) -> str:
    """Why the workspace inventory did not load ("" when it did)."""
    if inv.loaded:
        return ""
    if inv.errors:
        return ("The maand workspace %s has errors; nothing was run. Fix them (and run maand.core.build after "
                "editing the workspace):\n%s" % (inv.bucket_dir, "\n".join("  - %s" % e for e in inv.errors)))
    if not any(os.path.exists(s) for s in inv.sources):
        return ("The maand workspace inventory did not load: no inventory was given\n(%s does not exist), so there "
                "is nothing to run on.\nFix: pass the bucket's inventory file, -i <bucket>/maand.yml, or run from "
                "the bucket folder\n(its ansible.cfg, written by maand.core.init, sets inventory = maand.yml)."
                % ", ".join(inv.sources))
    return ("The maand workspace inventory did not load, so there is nothing to run on.\n"
            "  - check the inventory warnings above (the bucket's errors are there);\n"
            "  - run `ansible-inventory -i <bucket>/maand.yml --graph` to see the error alone;\n"
            "  - pass the bucket's inventory: -i <bucket>/maand.yml (named maand.yml, holding "
            "`plugin: maand.core.workspace`);\n"
            "  - if your ansible.cfg sets [inventory] enable_plugins, it must include maand.core.workspace.")


def workers_problem(inv: Inventory) -> str:
    """Why there is nothing to run on, or no key to log in with ("" when the bucket has workers and its key)."""
    bucket = inv.bucket_dir or "<bucket>"
    if inv.workers == 0:
        return ("The bucket %s has no workers: workspace/workers.json lists none and no removed worker still holds "
                "a job, so there is nothing to deploy to and nothing was run. Fix: add workers to "
                "%s/workspace/workers.json, run maand.core.build, then deploy again." % (inv.bucket_dir, bucket))
    if inv.key_file and not os.path.isfile(inv.key_file):
        return ("SSH key %s not found: put the private key authorized on the workers there, or set ssh_key in "
                "%s/maand.conf; nothing was run." % (inv.key_file, bucket))
    return ""

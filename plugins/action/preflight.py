# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A playbook's checks before it touches a worker: the maand_ extra vars, the workspace inventory, the workers
(ops/preflight.py; docs: plugins/modules/preflight.py)."""

from __future__ import annotations

from ansible.utils.vars import load_extra_vars

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import deploy_extra_vars
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("preflight")
WORKER_GROUPS = ("maand_workers", "maand_removed_workers")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        playbook = args["playbook"]
        known = args["known"]
        if known is None:
            deploy_vars = deploy_extra_vars() if playbook == ops.extra_vars.DEPLOY else ()
            known = ops.extra_vars.known_vars(playbook, deploy_vars)
        verdict = ops.extra_vars.check(load_extra_vars(self._loader), known, playbook, refuse=args["refuse"])
        result.update(changed=False, unknown=list(verdict.messages), msg="ok")
        if verdict.refused:
            result.update(failed=True, msg=verdict.text)
            return result
        if verdict.messages:
            result["warnings"] = verdict.warnings
            result["msg"] = "%d unknown maand_ extra var(s)" % len(verdict.messages)
        if args["inventory"] or args["workers"]:
            inv = self.inventory(task_vars)
            problem = ops.preflight.inventory_problem(inv) or (args["workers"] and ops.preflight.workers_problem(inv))
            if problem:
                result.update(failed=True, msg=problem)
        return result

    @staticmethod
    def inventory(task_vars):
        """ops/preflight.Inventory from the play's variables (the inventory's, set on all)."""
        groups = task_vars.get("groups") or {}
        hosts = [h for g in WORKER_GROUPS for h in groups.get(g) or ()]
        hostvars = task_vars.get("hostvars") or {}
        key = ""
        for host in hosts:  # the first worker that names a key (maand.conf's ssh_key, the same for all)
            value = (hostvars.get(host) or {}).get("ansible_ssh_private_key_file")
            if isinstance(value, str) and value:
                key = value
                break
        loaded = task_vars.get("maand_workspace_ok", False)
        return ops.preflight.Inventory(
            loaded=loaded is True or str(loaded).lower() in ("true", "yes", "1"),
            errors=tuple(str(e) for e in task_vars.get("maand_inventory_errors") or ()),
            bucket_dir=str(task_vars.get("maand_bucket_dir") or ""),
            sources=tuple(str(s) for s in task_vars.get("ansible_inventory_sources") or ()),
            workers=len(hosts), key_file=key)

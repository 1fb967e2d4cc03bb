# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand_ extra vars a playbook does not read: refuse or warn (docs: plugins/modules/extra_vars.py)."""

from __future__ import annotations

from ansible.utils.vars import load_extra_vars

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import deploy_extra_vars
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("extra_vars")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        playbook = args["playbook"]
        known = args["known"]
        if known is None:
            deploy_vars = deploy_extra_vars() if playbook == ops.extra_vars.DEPLOY else ()
            known = ops.extra_vars.known_vars(playbook, deploy_vars)
        verdict = ops.extra_vars.check(load_extra_vars(self._loader), known, playbook, refuse=args["refuse"])
        result.update(changed=False, unknown=list(verdict.messages))
        if verdict.refused:
            result.update(failed=True, msg=verdict.text)
        elif verdict.messages:
            result["warnings"] = verdict.warnings
            result["msg"] = "%d unknown maand_ extra var(s)" % len(verdict.messages)
        else:
            result["msg"] = "ok"
        return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand_ extra vars a playbook does not read: warn or refuse (docs: plugins/modules/extra_vars.py)."""

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
        if args["known"] is None:
            args["known"] = list(ops.extra_vars.PLAYBOOK_VARS.get(args["playbook"]) or ())
        extra = load_extra_vars(self._loader)
        messages = ops.extra_vars.unknown_extra_vars(extra, args["known"], args["playbook"])
        # a var another maand.core playbook reads is only warned about, never refused: an AWX workflow
        # passes its extra vars to every node
        others = ops.extra_vars.other_playbooks_vars(args["playbook"], deploy_extra_vars()) - set(args["known"])
        refused = ops.extra_vars.unknown_extra_vars(extra, args["known"], args["playbook"], others)
        result.update(changed=False, unknown=messages)
        if refused and args["refuse"]:
            result.update(failed=True, msg="nothing was run: " + "; ".join(refused))
        elif messages:
            result["warnings"] = messages
            result["msg"] = "%d unknown maand_ extra var(s)" % len(messages)
        else:
            result["msg"] = "ok"
        return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a worker's promoted deploy state in one SSH round trip, installing the worker agent on the way
(docs: plugins/modules/deploy_state.py)."""

from __future__ import annotations

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.maand.core.plugins.plugin_utils.adapter import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy

ARGUMENT_SPEC = adapter.spec_for("deploy_state")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True  # read-only

    def act(self, result, args, task_vars):
        if not args["bucket_id"] or "/" in args["bucket_id"] or args["bucket_id"] in (".", ".."):
            result.update(failed=True, msg="bucket_id %r is not a bucket id; run the maand.core.build playbook first"
                          % args["bucket_id"])
            return result
        try:  # check mode: nothing is written on the worker, not even the agent file
            data, err = deploy.read_state(self, self.worker_python(task_vars), args["bucket_id"],
                                          bool(self._task.check_mode), args["status"])
        except Exception as exc:  # unreachable, vanished, broken ssh: reported in the state, never a failed task
            data, err = None, "%s: %s" % (type(exc).__name__, to_text(exc).strip()[-500:])
        if err:
            # Not a failed task: the plan reads this state and fails this worker's allocations, naming the
            # error; the deploy then fails at its finish. A failed task would need ignore_errors to keep
            # the worker in the play (issue 8: no state through ignore_errors registers).
            result.update(changed=False, state={"reachable": False, "error": err},
                          warnings=["cannot read the deploy state of %s; its allocations will fail: %s"
                                    % (task_vars.get("inventory_hostname", "this worker"), err)])
            return result
        result.update(changed=False, state=dict(data, reachable=True))
        if data.get("bad"):
            result["warnings"] = ["unreadable deploy state ignored (treated as not deployed): %s" % ", ".join(data["bad"])]
        return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take or release the bucket's deploy lock (docs: plugins/modules/deploy_lock.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy

ARGUMENT_SPEC = adapter.spec_for("deploy_lock")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        check_mode = bool(self._task.check_mode)
        if args["state"] == "present":
            errors = adapter.role_option_errors(task_vars, self._templar)  # the deploy role's options, once per run
            if errors:
                result.update(failed=True, msg="deploy refused: validation of the options (roles/deploy/meta/"
                              "argument_specs.yml) failed, nothing was run:\n%s" % "\n".join(errors))
                return result
            try:
                slc = deploy.slice_of(args["run_key"], args["workflow_id"], args["job_id"], args["slice_wait"])
            except deploy.SliceError as exc:
                result.update(failed=True, msg="deploy refused: %s" % exc)
                return result
            locking = deploy.lock(args["bucket"], adapter.run_pid(), args["adopt_bucket_id"], check_mode,
                                  args["wait"], slc, args["inventory_hosts"])
            if locking.slice is not None and not locking.failed:  # which part of the sliced run this controller plays
                adapter.say("deploy: %s" % locking.msg, adapter.output_format(task_vars))
        else:
            locking = deploy.unlock(args["bucket"], adapter.run_pid(), check_mode)
        result.update(locking.as_result())
        return result

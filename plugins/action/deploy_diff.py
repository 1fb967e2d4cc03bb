# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The content diff of a deploy's changed files on one worker, one round trip (deploy/view.host_diff;
docs: plugins/modules/deploy_diff.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy

ARGUMENT_SPEC = adapter.spec_for("deploy_diff")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True  # read-only

    def act(self, result, args, task_vars):
        host = args["host"]  # the delegated worker (run_once, looping over the workers with changes)
        shown = deploy.host_diff(args["content_diff"], host, self, self.worker_python(task_vars, host), args["bucket_id"])
        result.update(shown.as_result())
        return result

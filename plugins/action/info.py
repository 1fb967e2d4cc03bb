# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A summary of a bucket, as maand's `maand info` (docs: plugins/modules/info.py). Read-only."""

from __future__ import annotations

import json

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops
from ansible_collections.maand.core.plugins.plugin_utils.catalog import stale_note

display = Display()

ARGUMENT_SPEC = adapter.spec_for("info")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        try:
            found = ops.info.info(args["bucket"])
        except ops.cat.CatError as exc:
            result.update(failed=True, changed=False, msg="maand.core.info: %s" % exc)
            return result
        data = found.to_dict()
        lines = json.dumps(data, indent=2, sort_keys=True).splitlines() if args["format"] == "json" else \
            found.table().lines()
        for line in lines:
            display.display(line)
        adapter.warn_stale(result, args["bucket"], task_vars, stale_note)  # catalog/freshness.py: info is read-only
        result.update(changed=False, info=data, msg="bucket %s: %d workers, %d jobs, %d allocations, update_seq %d"
                      % (found.bucket_id, found.workers, found.jobs, found.allocations["total"], found.update_seq))
        return result

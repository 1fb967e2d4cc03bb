# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side tables of a bucket (docs: plugins/modules/cat.py). Read-only."""

from __future__ import annotations

import dataclasses

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops
from ansible_collections.maand.core.plugins.plugin_utils.catalog import stale_note

ARGUMENT_SPEC = adapter.spec_for("cat")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket_dir = args["bucket"]
        request = ops.cat.Request(view=args["view"], jobs=ops.cat.split_names(args["jobs"]),
                                  workers=ops.cat.split_names(args["workers"]), reveal=args["reveal"],
                                  deleted=args["deleted"], active=args["active"], namespace=args["namespace"].strip(),
                                  key=args["key"].strip(), file=args["file"], scrape=args["scrape"])
        try:
            table = ops.cat.cat(bucket_dir, request)
        except ops.cat.CatError as exc:
            result.update(failed=True, changed=False, msg="maand.core.cat %s: %s" % (request.view, exc))
            return result
        shown = table.lines()
        adapter.warn_stale(result, bucket_dir, task_vars, stale_note)  # catalog/freshness.py: cat is read-only
        if request.reveal:  # decrypted values go to the screen only, never into the result (-v, callbacks, AWX)
            adapter.say_lines(shown, adapter.output_format(task_vars))
            table = ops.cat.cat(bucket_dir, dataclasses.replace(request, reveal=False))
        lines = table.lines()
        summary = "%d row%s" % (len(table.rows), "" if len(table.rows) == 1 else "s")
        adapter.publish(result, ops.report.Report(
            "cat", summary=summary, lines=[] if request.reveal else lines, format=adapter.output_format(task_vars),
            counts={"rows": len(table.rows)},
            data={"view": request.view, "header": list(table.header), "rows": table.as_dicts()}))
        result.update(changed=False, bucket=bucket_dir, table=lines, header=list(table.header),
                      rows=table.as_dicts(), msg="%d row%s%s" % (
                          len(table.rows), "" if len(table.rows) == 1 else "s",
                          "; secrets were printed, this result keeps them masked" if request.reveal else ""))
        return result

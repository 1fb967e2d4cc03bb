# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's status table from the workers' answers (docs: plugins/modules/status.py). Read-only."""

from __future__ import annotations

import json

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils import ops

display = Display()


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = adapter.spec_for("status")

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            fmt = ops.status.check_format(args["format"])
            jobs = ops.status.split_jobs(args["jobs"])
            catalog = ops.status.load_catalog(args["bucket"])
            ops.status.check_jobs(catalog, jobs)
        except (ops.status.StatusError, _catalog.CatalogError) as exc:
            result.update(failed=True, msg="maand.core.status: %s" % exc)
            return result
        answers = {h: (a if isinstance(a, dict) else {}) for h, a in args["answers"].items()}
        table_rows = ops.status.rows(catalog, answers, jobs)
        data = ops.status.as_json(table_rows, answers)
        if fmt == "json":
            display.display(json.dumps(data, indent=2, sort_keys=True))
        else:
            for line in ops.status.table_lines(table_rows, answers):
                display.display(line)
        result.update(status=data, msg=data["summary"])
        bad = data["unreachable"] + data["failed"]
        if bad:
            hints = bucket.ssh_hints_for(answers, bad)  # first contact: host key, login, sudo
            tail = "".join("\n" + h for h in hints)
            result.update(failed=True, msg="%s; no answer from %s%s" % (data["summary"], ", ".join(bad), tail))
        return result

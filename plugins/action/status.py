# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's status table from the workers' answers (docs: plugins/modules/status.py). Read-only."""

from __future__ import annotations

import json

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.ops import status as _status

display = Display()

ARGUMENT_SPEC = specs.spec_for("status")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            fmt = _status.check_format(args["format"])
            jobs = _status.split_jobs(args["jobs"])
            catalog = _status.load_catalog(args["bucket"])
            _status.check_jobs(catalog, jobs)
        except (_status.StatusError, _catalog.CatalogError) as exc:
            result.update(failed=True, msg="maand.core.status: %s" % exc)
            return result
        answers = {h: (a if isinstance(a, dict) else {}) for h, a in args["answers"].items()}
        table_rows = _status.rows(catalog, answers, jobs)
        data = _status.as_json(table_rows, answers)
        if fmt == "json":
            display.display(json.dumps(data, indent=2, sort_keys=True))
        else:
            for line in _status.table_lines(table_rows, answers):
                display.display(line)
        result.update(status=data, msg=data["summary"])
        bad = data["unreachable"] + data["failed"]
        if bad:
            result.update(failed=True, msg="%s; no answer from %s" % (data["summary"], ", ".join(bad)))
        return result

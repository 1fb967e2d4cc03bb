# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the facts flow: read workers.json for the inventory, write probed capacity back.

Documentation: plugins/modules/workers_file.py. The work is done by the pure core
(plugins/plugin_utils/ops/facts.py), which reads maand.conf and workers.json with the model's readers.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.maand.core.plugins.plugin_utils.ops import facts, report
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import output_format, publish


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    ARGUMENT_SPEC = adapter.spec_for("workers_file")

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        self._maand_format = output_format(task_vars)
        try:
            result.update(self._operation(args))
        except facts.WorkersFileError as exc:
            result.update(failed=True, changed=False, msg=str(exc.args[0]))
            if len(exc.args) > 1:
                result["failed_hosts"] = exc.args[1]
        return result

    def _operation(self, args):
        if args["operation"] == "load":
            out = facts.inventory_entries(args["bucket"], args["labels"], args["hosts"])
            out["changed"] = False
            if not out["warnings"]:
                del out["warnings"]
            return out
        if args["results"] is None and not args["failed"]:
            raise facts.WorkersFileError("operation=write needs results (host -> worker_facts result)")
        out = facts.update_workers_file(args["bucket"], args["results"] or {}, args["failed"],
                                        check_mode=bool(self._task.check_mode))
        lines = list(out.get("lines") or [])
        # the playbook's next task prints the lines: the report carries them for -e maand_format=json and AWX
        publish(out, report.Report(
            "facts", outcome="changed" if out.get("changed") else "ok", format=self._maand_format,
            summary=out.get("msg") or ("%d change(s)" % len(lines) if lines else "workers.json already up to date"),
            counts={"changes": len(lines)}, data={"changes": lines, "written": bool(out.get("changed"))}))
        return out

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End of a deploy: drop cleaned removed rows from the catalog, release the lock, report
(docs: plugins/modules/deploy_finish.py)."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils import _catalog, _deploy_lock, _deploy_plan
from ansible_collections.maand.core.plugins.plugin_utils._deploy_plan import item_results, outcome

display = Display()

ARGUMENT_SPEC = {
    "bucket": {"type": "path", "required": True},
    "plan": {"type": "dict", "required": True},
    "gate": {"type": "raw"},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "release": {"type": "bool", "default": True},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        bucket = os.path.abspath(os.path.expanduser(args["bucket"]))
        plan = args["plan"]
        gate = args["gate"] if isinstance(args["gate"], dict) else {}
        hostvars = task_vars.get("hostvars") or {}
        check = bool(self._task.check_mode)

        problems = [f["msg"] for f in plan.get("failures") or []]
        problems += list(gate.get("errors") or [])
        for job, msgs in sorted((gate.get("failed_by_job") or {}).items()):
            problems += msgs
        # promotions of the last step
        for op_id, item in item_results(hostvars, args["hosts"], "deploy_promote_result").items():
            op = item.get("item") or {}
            if op.get("step") != gate.get("step"):
                continue
            ok, msg = outcome(item)
            if ok is False:
                problems.append("%s: promote failed: %s" % (op_id, msg))
        blocked = sorted(set(gate.get("blocked") or []) - set(gate.get("failed_by_job") or {}))
        if blocked:
            planned = {r["job"] for r in plan.get("rows", []) if r["action"] not in ("skip", "unreachable")}
            skipped = [j for j in blocked if j in planned]
            if skipped:
                problems.append("not deployed because an earlier wave failed: %s" % ", ".join(skipped))

        # catalog: drop removed rows whose cleanup succeeded (and the ones with nothing to clean)
        cleaned = list(plan.get("prune") or [])
        for d in gate.get("done") or []:
            if d.get("kind") == "remove":
                cleaned.append({"job": d["job"], "worker": d["host"]})
        purged = {d["host"] for d in gate.get("done") or [] if d.get("kind") == "purge"}
        dead = set(plan.get("dead_workers") or [])
        result.update(changed=False, pruned=[], problems=problems)
        if (cleaned or dead or purged) and not check and plan.get("bucket_id"):
            try:
                with _catalog.bucket_lock(bucket, wait=True):
                    catalog = _catalog.read_catalog(bucket)
                    if catalog is not None and catalog.get("bucket_id") == plan["bucket_id"]:
                        new = _deploy_plan.prune_catalog(catalog, cleaned, dead_workers=dead)
                        if new != catalog:
                            _catalog.write_catalog(bucket, new)
                            gone = {(a["job"], a["worker"]) for a in catalog["allocations"]} - {
                                (a["job"], a["worker"]) for a in new["allocations"]}
                            result.update(changed=True, pruned=sorted("%s@%s" % g for g in gone))
                            display.display("catalog: dropped %d cleaned removed allocation(s): %s" % (
                                len(gone), ", ".join(result["pruned"])), color="yellow")
            except (OSError, _catalog.CatalogError) as exc:
                problems.append("could not update data/catalog.json: %s" % exc)
        if args["release"] and not check:
            try:
                _deploy_lock.release(bucket, os.getppid())
            except OSError as exc:
                problems.append("could not release the deploy lock: %s" % exc)

        counts = {}
        for row in plan.get("rows", []):
            counts[row["action"]] = counts.get(row["action"], 0) + 1
        summary = ", ".join("%s %d" % (k, counts[k]) for k in sorted(counts)) or "nothing to do"
        result["summary"] = summary
        if problems:
            result.update(failed=True, msg="deploy finished with %d problem(s) (%s):\n  %s" % (
                len(problems), summary, "\n  ".join(problems)))
        else:
            result["msg"] = "deploy %s: %s" % ("plan (check mode)" if check else "done", summary)
        return result

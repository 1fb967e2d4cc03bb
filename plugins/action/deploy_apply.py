# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply one planned deploy operation on a worker (docs: plugins/modules/deploy_apply.py)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.maand.core.plugins.plugin_utils import _deploy_remote

ARGUMENT_SPEC = {
    "bucket_id": {"type": "str", "required": True},
    "op": {"type": "dict", "required": True},
    "kind": {"type": "str", "choices": ["meta", "run", "stop", "remove", "purge", "promote"]},
    "timeout": {"type": "int", "default": 600},
    "tail": {"type": "int", "default": 20},
}


def sync_failed(task_vars, op_id):
    """True when this step's rsync of op_id failed on this host (the op must not run)."""
    reg = (task_vars or {}).get("deploy_sync_result") or {}
    for item in reg.get("results") or []:
        if (item.get("item") or {}).get("id") == op_id and (item.get("failed") or item.get("unreachable")):
            return item.get("msg") or "rsync failed"
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        op = dict(args["op"])
        if args["kind"]:
            op["kind"] = args["kind"]
        for key in ("kind", "id"):
            if not op.get(key):
                result.update(failed=True, msg="op.%s is required (ops come from the maand.core.deploy_plan result)" % key)
                return result
        result["op"] = op["id"]
        if op["kind"] != "promote":
            why = sync_failed(task_vars, op["id"])
            if why:
                result.update(skipped=True, msg="%s not run: its rsync failed (%s)" % (op["id"], why))
                return result
        cmd = _deploy_remote.apply_command(_deploy_remote.interpreter(task_vars))
        data = _deploy_remote.apply_request(args["bucket_id"], op, timeout=args["timeout"], tail=args["tail"])
        res = self._low_level_execute_command(cmd, sudoable=True, in_data=data)
        answer, err = _deploy_remote.parse_output(res.get("stdout"), res.get("stderr"), res.get("rc"),
                                                  "%s %s" % (op["kind"], op["id"]))
        if err:
            result.update(failed=True, msg=err)
            return result
        result.update(changed=bool(answer.get("changed")), steps=answer.get("steps", []))
        if answer.get("output_tail") is not None:
            result["output_tail"] = answer["output_tail"]
        if not answer.get("ok"):
            result.update(failed=True, msg=answer.get("msg") or "failed", rc=answer.get("rc"), reason=answer.get("reason"))
            if answer.get("output_tail"):
                result["msg"] += "\n--- last lines of output ---\n" + "\n".join(answer["output_tail"])
        return result

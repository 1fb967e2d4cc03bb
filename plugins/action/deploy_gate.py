# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After each deploy step: collect results, run health gates, decide what may continue
(docs: plugins/modules/deploy_gate.py)."""

from __future__ import annotations

import http.client
import socket
import ssl
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils import _deploy_plan
from ansible_collections.maand.core.plugins.plugin_utils._deploy_plan import item_results, outcome

display = Display()

ARGUMENT_SPEC = {
    "step": {"type": "dict", "required": True},
    "job_waves": {"type": "dict", "default": {}},
    "previous": {"type": "raw"},
    "hosts": {"type": "list", "elements": "str", "required": True},
}


def probe(address, check, timeout):
    """One health probe from the controller; returns None when healthy, else the reason."""
    port = check["port"]
    try:
        if check["type"] == "tcp":
            with socket.create_connection((address, port), timeout=timeout):
                return None
        if check["scheme"] == "https":
            conn = http.client.HTTPSConnection(address, port, timeout=timeout, context=ssl._create_unverified_context())
        else:
            conn = http.client.HTTPConnection(address, port, timeout=timeout)
        try:
            conn.request("GET", check["path"])
            status = conn.getresponse().status
        finally:
            conn.close()
        if status != check["expect_status"]:
            return "http %s://%s:%d%s returned %d, expected %d" % (
                check["scheme"], address, port, check["path"], status, check["expect_status"])
        return None
    except (OSError, http.client.HTTPException) as exc:
        return "%s %s:%d: %s" % (check["type"], address, port, exc)


def run_gate(gate, addresses, sleep=time.sleep):
    """Probe every check on every host until all pass or attempts run out. Returns error list."""
    pending = {(h, i) for h in gate["hosts"] for i in range(len(gate["checks"]))}
    last = {}
    for attempt in range(gate["attempts"]):
        for key in sorted(pending):
            host, i = key
            err = probe(addresses.get(host, host), gate["checks"][i], gate["timeout_seconds"])
            if err is None:
                pending.discard(key)
            else:
                last[key] = err
        if not pending:
            return []
        if attempt + 1 < gate["attempts"]:
            sleep(gate["interval_seconds"])
    return ["%s: %s" % (host, last.get((host, i), "failed")) for host, i in sorted(pending)]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        step = args["step"]
        prev = args["previous"] if isinstance(args["previous"], dict) else {}
        hostvars = task_vars.get("hostvars") or {}
        hosts = args["hosts"]
        failed = {k: list(v) for k, v in (prev.get("failed_by_job") or {}).items()}
        errors = list(prev.get("errors") or [])
        done = list(prev.get("done") or [])
        blocked = set(prev.get("blocked") or [])
        new_failures = []

        def fail_job(job, msg):
            new_failures.append(msg)
            if job is None or step.get("wave") is None:
                errors.append(msg)
            else:
                failed.setdefault(job, []).append(msg)

        # promotions of the previous step
        prev_index = prev.get("step")
        for op_id, item in item_results(hostvars, hosts, "deploy_promote_result").items():
            op = item.get("item") or {}
            if op.get("step") != prev_index:
                continue
            ok, msg = outcome(item)
            if ok is False:
                fail_job(op.get("job"), "%s: promote failed: %s" % (op_id, msg))

        syncs = item_results(hostvars, hosts, "deploy_sync_result")
        applies = item_results(hostvars, hosts, "deploy_apply_result")
        ok_ops = []
        for host, ops in sorted((step.get("ops") or {}).items()):
            for op in ops:
                if op.get("job") in blocked:
                    continue
                if op.get("sync"):
                    ok, msg = outcome(syncs.get(op["id"]) or syncs.get("__host__" + host))
                    if ok is False:
                        fail_job(op.get("job"), "%s: rsync failed: %s" % (op["id"], msg))
                        continue
                ok, msg = outcome(applies.get(op["id"]) or applies.get("__host__" + host))
                if ok is not True:
                    fail_job(op.get("job"), "%s: %s failed: %s" % (op["id"], op.get("action"), msg))
                    continue
                ok_ops.append(op)
                done.append({"id": op["id"], "kind": op["kind"], "job": op.get("job"), "host": host,
                             "action": op.get("action")})

        # health gates for jobs whose whole batch succeeded
        addresses = {}
        for host in hosts:
            try:
                addresses[host] = hostvars[host].get("ansible_host") or host
            except Exception:  # pragma: no cover
                addresses[host] = host
        gated_ok = set()
        for gate in step.get("gates") or []:
            job = gate["job"]
            if job in failed or job in blocked:
                continue
            problems = run_gate(gate, addresses)
            if problems:
                fail_job(job, "health gate of job %s failed after %s (%d attempts): %s" % (
                    job, step.get("label"), gate["attempts"], "; ".join(problems)))
            else:
                gated_ok.add(job)
                display.display("health gate passed: %s on %s" % (job, ", ".join(gate["hosts"])), color="green")

        promote = {}
        for op in ok_ops:
            if op["kind"] == "run" and not op.get("promote_now") and op["job"] in gated_ok:
                entry = {"id": op["id"], "kind": "promote", "job": op["job"], "host": op["host"], "record": op["record"],
                         "step": step.get("index")}
                promote.setdefault(op["host"], []).append(entry)

        blocked = _deploy_plan.block_after_failures(
            sorted(failed), args["job_waves"] or {}, step.get("wave"), step.get("last_in_wave"), blocked)
        result.update(changed=False, failed=False, step=step.get("index"), failed_jobs=sorted(failed),
                      failed_by_job=failed, blocked=blocked, promote=promote, done=done, errors=errors)
        if new_failures:
            result.update(failed=True, msg="step %s (%s): %s" % (step.get("index"), step.get("label"), "\n".join(new_failures)))
        return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One deploy step on one worker: one rsync for all its jobs that also runs the agent's step (one SSH
session; a plain agent call when nothing is synced, or when that rsync failed), one result file
(docs: plugins/modules/deploy_agent.py)."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote, rsync as _deploy_rsync, run as _run, service as _service

ARGUMENT_SPEC = specs.spec_for("deploy_agent")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = False

    def _ssh_argv(self):
        conn = self._connection
        if getattr(conn, "transport", None) != "ssh" or not hasattr(conn, "_build_command"):
            raise AnsibleError("maand.core.deploy_agent needs the ssh connection plugin (got %s)"
                               % getattr(conn, "transport", "?"))
        if conn.get_option("password"):
            raise AnsibleError("maand.core.deploy_agent: rsync cannot use ansible_password; use an SSH key")
        return [to_text(a) for a in conn._build_command(conn.get_option("ssh_executable") or "ssh", "ssh")]

    def _rsync(self, args, request, outcomes, python):
        """Sync the request's jobs. The last rsync also applies the step (its agent call folded into it, one
        SSH session) when that rsync succeeds: (changed, folded answer or None, reason). Failed syncs become
        failed op outcomes and leave the request; shipped files leave it too."""
        syncs = [op for op in request["ops"] if op.get("sync")]
        if not syncs:
            return False, None, None
        control_dir = _deploy_rsync.control_dir(args["run_dir"])
        ssh = _deploy_rsync.ssh_command(self._ssh_argv(), args["verify_host"], control_dir)
        root = _remote.worker_root(request["bucket_id"])
        sudo = bool(self._play_context.become)
        cmds = _deploy_rsync.commands(args["bucket"], syncs, root, self._connection.get_option("host") or self._connection.host, ssh,
                                      sudo=sudo)
        shipped = {op["id"] for op in syncs if op["kind"] == "files"}
        changed, failed = False, set()
        for pos, (ids, argv) in enumerate(cmds):
            rest = [op for op in request["ops"] if op["id"] not in failed and op["id"] not in shipped]
            if pos == len(cmds) - 1 and (rest or request["promote"]):
                folded = self._folded(args, dict(request, ops=rest), argv, python, sudo)
                if folded is not None:  # the step ran (or was attempted) on the worker: never again
                    did, answer, reason = folded
                    outcomes.extend({"id": i, "ok": True, "changed": did, "steps": ["sync"]}
                                    for i in sorted(shipped - failed))
                    request["ops"] = rest
                    return changed or did, answer, reason
            ok, did, msg = _deploy_rsync.run(argv, timeout=args["timeout"])
            changed = changed or did
            if not ok:
                failed.update(ids)
                outcomes.extend({"id": i, "ok": False, "msg": msg} for i in ids)
        # files shipped for a later step need nothing more on the worker: done when their rsync is
        done = sorted(shipped - failed)
        outcomes.extend({"id": i, "ok": True, "changed": changed, "steps": ["sync"]} for i in done)
        request["ops"] = [op for op in request["ops"] if op["id"] not in failed and op["id"] not in shipped]
        return changed, None, None

    def _folded(self, args, request, argv, python, sudo):
        """The last rsync of the step with the agent as its remote command: the files, then the step, in one
        SSH session. (changed, answer, reason) once the agent saw the files arrive, else None (nothing ran
        after the files: the caller syncs and calls the agent apart, as without the fold)."""
        path = _remote.sync_step_path(python, _deploy_rsync.destination(argv), sudo)
        data = _service.agent_payload(request, [], args["timeout"], args["tail"])
        argv = _deploy_rsync.with_rsync_path(argv, path)
        rc, stdout, stderr = _deploy_rsync.run_with_request(argv, _remote.request_header(data))
        synced, line = _remote.parse_folded(stderr)
        if not synced:
            return None
        answer, reason = _remote.parse_output(line, stderr, 0 if line else rc,
                                                     "agent on %s, step %s" % (args["host"], args["step"]))
        return bool(stdout.strip()), answer, reason

    def act(self, result, args, task_vars):
        key = _run.step_key(args["step"])
        host = args["host"]
        request = _run.read_request(args["run_dir"], key, host)
        if request is None:
            result.update(skipped=True, changed=False, msg="nothing to do on %s in step %s" % (host, key))
            return result
        outcomes = []
        answer, reason, changed = None, None, False
        try:
            python = self.worker_python(task_vars, host)
            # the job specs' environments are expanded once, before anything reaches the worker
            request["ops"] = _service.expanded_ops(request["ops"], outcomes)
            changed, answer, reason = self._rsync(args, request, outcomes, python)
            if answer is None and reason is None:
                if request["ops"] or request["promote"]:
                    data = _service.agent_payload(request, outcomes, args["timeout"], args["tail"])
                    res = self.call_agent(python, data)
                    answer, reason = _remote.parse_output(res.get("stdout"), res.get("stderr"), res.get("rc"),
                                                                 "agent on %s, step %s" % (host, key))
                else:
                    answer = {"ok": True, "ops": [], "promotions": []}
        except Exception as exc:  # unreachable, vanished, broken ssh: the host's ops fail, the play goes on
            answer, reason = None, "%s: %s" % (type(exc).__name__, to_text(exc).strip()[-500:])
        if answer is not None:
            answer.setdefault("ops", [])
            answer["ops"] = outcomes + answer["ops"]
        _service.agent_done(args["run_dir"], args["bucket"], key, host, request, answer, reason)
        if answer is None:
            result.update(changed=False, failed=False, msg="no answer from %s: %s" % (host, reason))
            result["warnings"] = ["%s gave no answer in step %s; its operations count as failed: %s" % (host, key, reason)]
            return result
        bad = [o for o in answer.get("ops") or [] if not o.get("ok")]
        bad += [p for p in answer.get("promotions") or [] if not p.get("ok")]
        changed = changed or any(o.get("changed") for o in answer.get("ops") or []) or bool(answer.get("promotions"))
        result.update(changed=changed, failed=False, ops=[o.get("id") for o in answer.get("ops") or []],
                      msg="%d operation(s) failed (reported by the next step)" % len(bad) if bad else "ok")
        return result

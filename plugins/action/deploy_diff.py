# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The content diff of a deploy's changed files on one worker, one round trip (docs: plugins/modules/deploy_diff.py)."""

from __future__ import annotations

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.deploy import pin as _pin, remote as _remote

ARGUMENT_SPEC = specs.spec_for("deploy_diff")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True  # read-only

    def act(self, result, args, task_vars):
        host = args["host"]  # the delegated worker (run_once, looping over the workers with changes)
        spec = args["content_diff"]
        wanted = (spec.get("wanted") or {}).get(host) or {}
        notes = ["%s\n" % n for n in (spec.get("notes") or {}).get(host) or []]
        previous = (spec.get("previous") or {}).get(host) or {}  # rollbacks: job -> {rel: recorded digest}
        live = (spec.get("live") or {}).get(host) or {}  # rollbacks after a failed attempt: the same
        before, older, tried, err = {}, {}, {}, None
        if wanted:
            try:
                request = {"current": wanted, "previous": {job: wanted[job] for job in previous if job in wanted},
                           "live": {job: wanted[job] for job in live if job in wanted}}
                python = self.worker_python(task_vars, host)
                cmd = _remote.files_command(python, args["bucket_id"], request)
                res = self._low_level_execute_command(cmd, sudoable=True, in_data=_remote.agent_source())
                data, err = _remote.parse_output(res.get("stdout"), res.get("stderr"), res.get("rc"),
                                                        "reading the promoted files")
                before = (data or {}).get("files") or {}
                older = (data or {}).get("previous") or {}
                tried = (data or {}).get("live") or {}
            # a diff must never fail the deploy
            except Exception as exc:  # pylint: disable=broad-exception-caught
                err = "%s: %s" % (type(exc).__name__, to_text(exc).strip()[-300:])
        if err:
            result["warnings"] = ["--diff: cannot read the promoted files of %s: %s" % (host, err)]
        after = (spec.get("after") or {}).get(host) or {}
        promoted = (spec.get("promoted") or {}).get(host) or {}
        blobs = spec.get("blobs") or {}
        diffs = []
        for job in sorted(wanted):
            for rel in wanted[job]:
                old = _pin.checked_before((before.get(job) or {}).get(rel), (promoted.get(job) or {}).get(rel))
                if job in live:  # the failed attempt on the worker -> its promoted copy
                    failed = _pin.checked_before((tried.get(job) or {}).get(rel), live[job].get(rel))
                    diffs.append({"prepared": _pin.render_diff(job, host, rel, failed, old, after_label="promoted")})
                    continue
                if job in previous:
                    new = _pin.checked_before((older.get(job) or {}).get(rel), previous[job].get(rel))
                    diffs.append({"prepared": _pin.render_diff(job, host, rel, old, new, after_label="previous")})
                    continue
                new = blobs.get((after.get(job) or {}).get(rel)) or {"missing": True}
                diffs.append({"prepared": _pin.render_diff(job, host, rel, old, new)})
        diffs.extend({"prepared": n} for n in notes)
        result.update(changed=bool(diffs), files=sum(len(v) for v in wanted.values()))
        if diffs:
            result["diff"] = diffs
        return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take or release the bucket's deploy lock (docs: plugins/modules/deploy_lock.py)."""

from __future__ import annotations

import os

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.deploy import adopt as _deploy_adopt, lock as _deploy_lock

ARGUMENT_SPEC = {
    "bucket": {"type": "path", "required": True},
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "adopt_bucket_id": {"type": "str", "default": ""},
    "wait": {"type": "float", "default": 0.0},
}


def run_pid():
    """The ansible-playbook process: actions run in a worker process forked from it."""
    return os.getppid()


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        if not os.path.isdir(bucket):
            result.update(failed=True, msg="bucket folder %s does not exist (maand_bucket_dir)" % bucket)
            return result
        pid = run_pid()
        result.update(changed=False, pid=pid, lock=_deploy_lock.lock_path(bucket))
        try:
            if args["state"] == "present":
                taken, note = _deploy_lock.acquire(bucket, pid, bool(self._task.check_mode), args["wait"])
                result.update(taken=taken, msg=note)
                if note.startswith("took over"):  # a deploy that was killed or crashed: say so
                    result["warnings"] = ["%s: the previous deploy did not finish; this run redoes what it left "
                                          "undone" % note]
                if args["adopt_bucket_id"]:
                    bucket_id, changed = _deploy_adopt.adopt(bucket, args["adopt_bucket_id"],
                                                             write=not self._task.check_mode)
                    result.update(bucket_id=bucket_id, changed=changed)
                    if changed:
                        result["msg"] += "; data/catalog.json adopts bucket_id %s" % bucket_id
            else:
                if self._task.check_mode:
                    result["msg"] = "check mode: lock untouched"
                else:
                    released = _deploy_lock.release(bucket, pid)
                    result.update(released=released, msg="deploy lock released" if released else "lock not held by this run")
        except _deploy_lock.DeployLocked as exc:
            result.update(failed=True, msg="deploy refused: %s" % exc)
        except (_deploy_adopt.AdoptError, _catalog.CatalogError) as exc:
            if not self._task.check_mode:
                _deploy_lock.release(bucket, pid)
            result.update(failed=True, msg="deploy refused: %s" % exc)
        except OSError as exc:
            result.update(failed=True, msg="cannot use the deploy lock in %s/data: %s" % (bucket, exc))
        return result

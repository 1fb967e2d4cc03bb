# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scaffold a new job in a bucket (docs: plugins/modules/job_create.py)."""

from __future__ import annotations

import os

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("job_create")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        job = args["job"].strip()
        try:
            if self._task.check_mode:
                folder = ops.scaffold.check(bucket, job)
                paths = [os.path.join(folder, rel) for rel in ops.scaffold.files(job)]
            else:
                paths = ops.scaffold.create(bucket, job)
        except ops.scaffold.ScaffoldError as exc:
            result.update(failed=True, changed=False, msg="maand.core.job_create: %s" % exc)
            return result
        except OSError as exc:
            result.update(failed=True, changed=False, msg="maand.core.job_create: cannot write job %s in %s: %s"
                          % (job, bucket, exc))
            return result
        result.update(changed=True, job=job, path=os.path.dirname(paths[0]), files=paths,
                      port=ops.scaffold.port_name(job),
                      msg="created job %s in %s (%s)" % (job, os.path.dirname(paths[0]),
                                                         ", ".join(os.path.basename(p) for p in paths)))
        return result

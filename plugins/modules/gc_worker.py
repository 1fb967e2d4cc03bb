#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gc_worker
short_description: Delete the job folders that removed maand allocations left on a worker
version_added: "1.0.0"
description:
  - "Internal task of the C(maand.core.gc) playbook, run on a worker."
  - Runs on a worker and deletes C(/opt/worker/<bucket_id>/jobs/<job>) for each job in O(jobs), with
    everything in it (C(data/), C(logs/), C(bin/)), as maand's C(gc) does.
  - With O(bucket_tree=true) (a worker that left C(workers.json)) it then deletes the whole
    C(/opt/worker/<bucket_id>) folder, C(data/) and C(logs/) of every job included; refused while the
    worker holds a deploy record (C(deploy/<job>.json) or C(deploy/<job>.pending), jobs no deploy
    stopped) or when the folder is a symbolic link.
  - Otherwise only paths directly under C(/opt/worker/<bucket_id>/jobs/) are ever deleted. A job name with a
    slash, C(.) or C(..) is refused. Symbolic links are never followed, neither C(jobs/) nor
    anything inside a job folder (a link is removed as a link).
  - A job the worker still holds a deploy record of (C(deploy/<job>.json) or C(deploy/<job>.pending))
    is left alone (a deploy has not stopped it yet).
  - Each job gets its own result; one failure does not stop the others, and the task itself fails only on
    invalid options.
  - Uses only the Python standard library.
author:
  - maand.core developers (@maand-sh)
options:
  bucket_id:
    description: The bucket's id (a UUID); the worker tree is C(/opt/worker/<bucket_id>).
    type: str
    required: true
  jobs:
    description: The job folders to delete.
    type: list
    elements: str
    default: []
  bucket_tree:
    description:
      - Delete the whole C(/opt/worker/<bucket_id>) folder (a departed worker), after O(jobs).
      - Its result is the entry whose C(job) is the empty string.
    type: bool
    default: false
  root:
    description: The folder holding the bucket trees (tests only).
    type: path
    default: /opt/worker
attributes:
  check_mode:
    support: full
    description: Reports what would be deleted and deletes nothing.
  diff_mode:
    support: none
    description: The C(maand.core.gc) playbook prints the plan.
  platform:
    support: full
    platforms: posix
    description: Any POSIX worker with Python 3.6 or later.
extends_documentation_fragment: [maand.core.private]
"""

EXAMPLES = r"""
- name: Delete the folders of removed allocations
  maand.core.gc_worker:
    bucket_id: 0b0f7a30-3f2b-4e3c-9a51-7f0a4c1d2e3f
    jobs: [old_api]

- name: Delete the whole bucket folder of a worker that left workers.json
  maand.core.gc_worker:
    bucket_id: 0b0f7a30-3f2b-4e3c-9a51-7f0a4c1d2e3f
    bucket_tree: true
"""

RETURN = r"""
results:
  description: One entry per job, in the order given.
  returned: always
  type: list
  elements: dict
  sample: [{"job": "old_api", "path": "/opt/worker/0b0f7a30-3f2b-4e3c-9a51-7f0a4c1d2e3f/jobs/old_api",
            "ok": true, "deleted": true, "msg": "deleted"}]
"""

import os
import re
import shutil

from ansible.module_utils.basic import AnsibleModule

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def bad_job_name(job):
    return not job or "/" in job or "\0" in job or job in (".", "..")


def check_tree(root):
    """None, or why the bucket tree must not be entered: it or its jobs/ is a symbolic link."""
    for path in (root, os.path.join(root, "jobs")):
        if os.path.islink(path):
            return "%s is a symbolic link: gc never follows links; nothing was deleted" % path
    return None


def delete_one(root, job, check):
    path = os.path.join(root, "jobs", job)
    out = {"job": job, "path": path, "ok": True, "deleted": False}
    if bad_job_name(job):
        out.update(ok=False, msg="refused job name %r: not a folder name under jobs/" % (job,))
        return out
    for record in ("%s.json" % job, "%s.pending" % job):
        if os.path.lexists(os.path.join(root, "deploy", record)):
            out.update(ok=False, msg="%s: the worker still holds deploy/%s (a deploy has not removed it); "
                       "left alone: run maand.core.deploy first" % (path, record))
            return out
    try:
        os.lstat(path)
    except FileNotFoundError:
        out["msg"] = "already gone"
        return out
    if check:
        out.update(deleted=True, msg="would delete")
        return out
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)  # never follows links inside (fd-based on Linux)
        else:
            os.unlink(path)
    except OSError as exc:
        out.update(ok=False, msg="%s: could not delete it: %s" % (path, exc))
        return out
    out.update(deleted=True, msg="deleted")
    return out


def deploy_records(root):
    """The deploy records (deploy/<job>.json, deploy/<job>.pending) a bucket folder holds, sorted."""
    try:
        names = os.listdir(os.path.join(root, "deploy"))
    except OSError:
        return []
    return sorted(n for n in names if n.endswith((".json", ".pending")))


def delete_tree(root, check):
    """The whole bucket folder of a departed worker (its result has job "")."""
    out = {"job": "", "path": root, "ok": True, "deleted": False}
    if os.path.islink(root):
        out.update(ok=False, msg="%s is a symbolic link: gc never follows links; nothing was deleted" % root)
        return out
    if not os.path.lexists(root):
        out["msg"] = "already gone"
        return out
    held = deploy_records(root)
    if held:
        out.update(ok=False, msg="%s: the worker still holds deploy records (%s): jobs no deploy stopped; left alone: "
                   "stop them and delete %s/deploy, then run maand.core.gc again"
                   % (root, ", ".join("deploy/" + n for n in held), root))
        return out
    if check:
        out.update(deleted=True, msg="would delete")
        return out
    try:
        shutil.rmtree(root)  # never follows links inside (fd-based on Linux)
    except OSError as exc:
        out.update(ok=False, msg="%s: could not delete it: %s" % (root, exc))
        return out
    out.update(deleted=True, msg="deleted")
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            bucket_id=dict(type="str", required=True),
            jobs=dict(type="list", elements="str", default=[]),
            bucket_tree=dict(type="bool", default=False),
            root=dict(type="path", default="/opt/worker"),
        ),
        supports_check_mode=True,
    )
    bucket_id = module.params["bucket_id"]
    if not UUID.match(bucket_id or ""):
        module.fail_json(msg="bucket_id %r is not a bucket id (a UUID); run maand.core.build first" % (bucket_id,))
    root = os.path.join(os.path.abspath(module.params["root"]), bucket_id)
    jobs_dir = os.path.join(root, "jobs")
    refused = check_tree(root) if module.params["jobs"] else None
    if refused:
        results = [{"job": job, "path": os.path.join(jobs_dir, job), "ok": False, "deleted": False, "msg": refused}
                   for job in module.params["jobs"]]
    else:
        results = [delete_one(root, job, module.check_mode) for job in module.params["jobs"]]
    if module.params["bucket_tree"]:
        results.append(delete_tree(root, module.check_mode))
    # --check deletes nothing: not "changed" (its results say what would be deleted)
    module.exit_json(changed=not module.check_mode and any(r["deleted"] for r in results), results=results)


if __name__ == "__main__":
    main()

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_state
short_description: "Read a worker's promoted deploy state"
version_added: 1.0.0
description:
  - "Reads C(/opt/worker/<bucket_id>/worker.json), C(jobs.json), every C(deploy/<job>.json) and the pending
    markers in one SSH round trip, with the worker agent (C(plugins/plugin_utils/worker/agent.py)); lists the
    other bucket ids found under C(/opt/worker/)."
  - "Outside check mode the same round trip installs the agent as C(/opt/worker/.maand/agent-<sha12>.py), with
    C(sandbox-<sha12>.py) beside it, for the later steps of the run; in check mode the agent runs from stdin and
    nothing is written."
  - "With O(status=true) (the deploy's read) the same round trip also asks C(make status) of every job whose
    promoted record says running, whose Makefile has a C(status) target and that a deploy started (the agent keeps
    its environment in C(deploy/<job>.status)), side by side, each bounded by 5 seconds: an allocation that is not
    running is started again by the plan (reason C(not running)). In check mode this needs the installed agent
    (from an earlier deploy); a worker without it reports no status."
  - "Read-only; runs in check mode."
options:
  status:
    description: "Also report, in C(state.status), whether each running job still runs (C(make status))."
    type: bool
    default: false
author:
  - maand.core developers (@maand-sh)
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.id,
                                 maand.core.controller.remote, maand.core.deploy_role, maand.core.private]
"""

EXAMPLES = r"""
- name: Read the deploy state
  maand.core.deploy_state:
    bucket_id: "{{ maand_bucket_id }}"
  register: deploy_state_read
"""

RETURN = r"""
state:
  description:
    - "C(exists), C(worker), C(jobs), C(deployed) (job -> record), C(trees) (job folders present),
      C(pending) (starts not promoted), C(others) (other bucket trees under /opt/worker), C(bad) (unreadable files),
      C(status) (with O(status), job -> C(running) true, false or null, C(rc), C(tail), C(seconds)) and C(reachable=true)."
    - "The task never fails on a worker it cannot read (unreachable, vanished, agent error): it returns
      C(reachable=false) and C(error) with a warning, and the plan fails that worker's allocations naming the error."
  returned: always
  type: dict
"""

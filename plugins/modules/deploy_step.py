# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_step
short_description: "Advance a deploy run by one step (controller side)"
version_added: 1.0.0
description:
  - "Private: internal to the C(maand.core.deploy) role; its options and results may change in any
    release without notice. Do not call it from your own playbooks or roles."
  - "Internal task of the C(maand.core.deploy) role, run once on the controller before each step."
  - "Folds the step in flight into the run state (C(<run_dir>/state.json)): reads the per-host result files the
    C(maand.core.deploy_agent) tasks wrote (a missing file fails that host's operations), runs the health gates of
    the jobs whose batch succeeded, queues promotions of passed gates, blocks failed jobs and, once their wave is over,
    later waves. Then writes the agent requests of step O(step) and returns the hosts that act in it."
  - "Any error fails the task and so the run; the role's finish step refuses a run whose steps did not all complete."
author:
  - maand.core developers (@maand-sh)
options:
  run_dir:
    description: The run folder returned by C(maand.core.deploy_plan).
    type: path
    required: true
  step:
    description: The step index, or C(final) for the last promote pass.
    type: raw
    required: true
attributes:
  check_mode:
    support: none
    description: The role runs no step in check mode.
  diff_mode:
    support: none
    description: No diff.
extends_documentation_fragment:
  - maand.core.controller
notes:
  - An action plugin; see docs/deploy.md for the deploy engine.
"""

EXAMPLES = r"""
- name: Prepare step 1
  maand.core.deploy_step:
    run_dir: "{{ deploy_plan_result.run_dir }}"
    step: 1
  register: deploy_step_result
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
hosts:
  description: Hosts that have a request (operations or promotions) in this step.
  returned: success
  type: list
  elements: str
new_failures:
  description: Failures found while folding the previous step.
  returned: success
  type: list
  elements: str
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_step
short_description: "Advance a deploy run by one step (controller side)"
version_added: 1.0.0
description:
  - "Internal task of the C(maand.core.deploy) role, run once on the controller before each step."
  - "Folds the step in flight into the run state (C(<run_dir>/state.json)): reads the per-host result files the
    C(maand.core.deploy_agent) tasks wrote (a missing file fails that host's operations), runs the health gates of
    the jobs whose batch succeeded, queues promotions of passed gates, blocks failed jobs and, once their wave is over,
    later waves. Then writes the agent requests of step O(step) and returns the hosts that act in it."
  - "Any error fails the task and so the run; the role's finish step refuses a run whose steps did not all complete."
author:
  - maand.core developers (@maand-sh)
attributes:
  check_mode:
    support: none
    details: The role runs no step in check mode.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.controller,
                                 maand.core.deploy_role, maand.core.deploy_role.step, maand.core.private]
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

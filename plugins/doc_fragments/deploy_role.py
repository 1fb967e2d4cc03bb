# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # maand.core.deploy_role: the internal actions of the maand.core.deploy role (notes only; they also carry
    # maand.core.private, after this fragment).
    DOCUMENTATION = r"""
options: {}
notes:
  - "A task of the C(maand.core.deploy) role."
  - An action plugin; see docs/deploy.md for the deploy design.
"""

    # maand.core.deploy_role.step: a step of a deploy run (spec: DEPLOY_RUN in plugins/plugin_utils/adapter/specs.py).
    STEP = r"""
options:
  run_dir:
    description: The run folder (C(data/.deploy-run/<run_id>)) the C(maand.core.deploy_plan) task returned.
    type: path
    required: true
  step:
    description: The step index, or C(final) for the last promote pass.
    type: raw
    required: true
"""

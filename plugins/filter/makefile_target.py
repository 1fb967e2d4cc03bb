# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: makefile_target
short_description: Why a Makefile target cannot run for maand.core.job (empty when it can)
version_added: 1.1.0
author: maand.core developers
description:
  - >-
    Checks a target for C(maand.core.job -e maand_target=NAME), as maand's C(maand job run --target) takes
    C(start), C(stop), C(restart), C(reload), C(status) or any safe custom name such as C(migrate).
  - >-
    A name that is not safe (letters, digits, C(_), C(.) and C(-), not starting with C(-) or C(.)) is refused,
    so a target can never be a make option. When the Makefile text is given, a custom target must be one
    it defines, unless the Makefile includes other makefiles (not followed); the lifecycle targets are
    always accepted, as in maand.
  - >-
    Returns an empty string when the target can run, else the reason, naming the Makefile's targets.
options:
  _input:
    description: The target name.
    type: str
    required: true
  makefile:
    description: The text of the job's Makefile; none skips the check of the defined targets.
    type: str
  name:
    description: The Makefile's file name, for the message.
    type: str
    default: Makefile
"""

EXAMPLES = r"""
- name: Refuse a target the job's Makefile does not define
  ansible.builtin.assert:
    that: problem | length == 0
    fail_msg: "{{ problem }}"
  vars:
    problem: "{{ 'migrate' | maand.core.makefile_target(lookup('ansible.builtin.file', 'jobs/api/Makefile')) }}"
"""

RETURN = r"""
_value:
  description: The empty string when the target can run, else why not.
  type: str
"""

from ansible_collections.maand.core.plugins.plugin_utils.bucket import target_problem


def makefile_target(target, makefile=None, name="Makefile"):
    """'' when `make target` can run for the job, else the reason (see DOCUMENTATION)."""
    return target_problem(target, makefile, name) or ""


class FilterModule:
    def filters(self):
        return {"makefile_target": makefile_target}

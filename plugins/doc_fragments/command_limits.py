# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # maand.core.command_limits: how long a command may run and how much of its output is kept
    # (spec: COMMAND_LIMITS in plugins/plugin_utils/adapter/specs.py).
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds a command (a Makefile target, a job command, an rsync) may run; then it is killed and fails.
    type: int
    default: 600
  tail:
    description: Lines of a command's output to report (the last ones).
    type: int
    default: 20
"""

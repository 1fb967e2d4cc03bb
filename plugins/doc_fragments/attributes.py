# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # maand.core.attributes: what check_mode and diff_mode mean; a module adds support and details.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and tell what would change without changing it.
  diff_mode:
    description: Returns what changed (or would change) as a diff with C(--diff).
"""

    # maand.core.attributes.read_only: changes nothing (with maand.core.attributes).
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: Changes nothing, so it runs the same in check mode.
  diff_mode:
    support: N/A
    details: Changes nothing, so there is nothing to diff.
"""

    # maand.core.attributes.no_diff: reports its result, not a diff (with maand.core.attributes).
    NO_DIFF = r"""
options: {}
attributes:
  diff_mode:
    support: none
    details: Reports its result, not a diff.
"""

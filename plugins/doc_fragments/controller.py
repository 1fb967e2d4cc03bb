# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The attribute every controller-side action of this collection shares.
    DOCUMENTATION = r"""
attributes:
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only (an action plugin; it opens no connection to the target).
"""

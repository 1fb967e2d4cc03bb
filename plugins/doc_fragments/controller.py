# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Where every action of this collection runs. maand.core.controller: on the controller only.
    DOCUMENTATION = r"""
attributes:
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only (an action plugin; it opens no connection to the target).
"""

    # maand.core.controller.remote: on the controller, doing its work on the worker over the host's connection.
    REMOTE = r"""
attributes:
  platform:
    support: full
    platforms: posix
    description: Runs on the controller; the work is done on the worker over the host's SSH connection.
"""

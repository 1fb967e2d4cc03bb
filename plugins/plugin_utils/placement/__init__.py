# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement: which jobs run on which workers.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

select.py compiles the rules (labels, RFC 31 constraints, hardware), fleet.py is the one worker index,
place.py places and returns allocations and shortfalls as data, explain.py words why a job is (not)
placed; constraints.py, hardware.py, hostlist.py, idset.py, bits.py are the rule languages.

The door: place.py (place); select.py compiles the rules it places with.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"explain_lines": "explain", "explain_worker": "explain", "summary": "explain"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

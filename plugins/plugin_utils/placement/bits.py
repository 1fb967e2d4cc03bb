# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Worker sets are Python ints used as bitsets (bit i = the worker at index i)."""

from __future__ import annotations


def iter_bits(mask):
    """Set bit positions, ascending: O(bits of mask) in C (bin), then O(set bits) in Python."""
    text = bin(mask)[:1:-1]  # least significant bit first, without the "0b"
    i = text.find("1")
    while i >= 0:
        yield i
        i = text.find("1", i + 1)

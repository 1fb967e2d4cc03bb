# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # maand.core.private: an action that only the collection's own playbooks call.
    DOCUMENTATION = r"""
options: {}
notes:
  - "Private: internal to the maand.core playbooks and roles named above; its options and results may change in any release
    without notice. Run the playbook instead of calling it from your own playbooks or roles."
"""

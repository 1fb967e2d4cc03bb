# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # maand.core.output: how a read-only report prints (status, info, logs; the playbooks' -e maand_format).
    # The specs differ in choices, so a module that lists them adds them under its own `format:` (Ansible
    # merges an option's keys with the fragment's): info and logs let Ansible check choices [table, json];
    # status takes any case and checks the word itself, naming -e maand_format (ops/status.check_format).
    DOCUMENTATION = r"""
options:
  format:
    description: C(table) for people, C(json) for scripts (the same data as the module returns); the playbook's
      C(-e maand_format). Under the stdout callback C(maand.core.deploy) the JSON document is alone on standard
      output. Either way the result holds C(maand_report) (lines, data, counts, outcome) and the run's custom
      stats get it as C(maand_<verb>) (what AWX keeps as the job's artifacts).
    type: str
    default: table
"""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Worker: what runs on the workers, stdlib only (the agent, the maand helper, the worker paths).

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

agent.py is the worker agent (run once per host and step) and sandbox.py how it runs a job's make target
(user/group, namespaces, timeout), installed beside it; maand_helper.py is the ``maand`` module staged
beside hook scripts; layout.py is the controller's one definition of the worker paths. agent.py,
sandbox.py and maand_helper.py import nothing else of the collection: they run alone (the agent also runs
from stdin alone, for reads).

The door: agent.py (with its sandbox.py, run alone on the worker); layout.py for the controller's paths.
"""

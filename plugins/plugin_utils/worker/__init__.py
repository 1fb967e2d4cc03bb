# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Worker: what runs on the workers, stdlib only (the agent, the maand helper, the worker paths).

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

agent.py is the worker agent (run once per host and step) and sandbox.py how it runs a job's make target
(user/group, namespaces, timeout), installed beside it; maand_helper.py is the ``maand`` module staged
beside hook scripts; layout.py is the controller's one definition of the worker paths. agent.py,
sandbox.py and maand_helper.py import nothing else of the collection but the error family's base
(errors/__init__.py, stdlib only, shipped beside them): they run alone (the agent also runs from stdin
alone, for reads).

The door (for the controller): the worker paths of layout.py and what the controller reads of agent.py; on the
worker, agent.py (with its sandbox.py) runs alone.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used.
_DOOR = {"AGENT_DIR": "layout", "CERTS_DIR": "layout", "WORKER_ROOT": "layout", "bucket_root": "layout",
         "job_root": "layout", "ANSWER_MARK": "agent", "ENV_PREFIX": "agent", "KEEP": "agent",
         "MAX_FILE_BYTES": "agent", "REQUEST_HEADER": "agent", "SYNCED_MARK": "agent", "text_or_binary": "agent",
         "tail_lines": "sandbox"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)

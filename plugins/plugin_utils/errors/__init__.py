# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors: the one error family of the core (MaandError with kind, file, field and fix). PRIVATE to the collection.

Every stage may import it (rank -1).

Every error the core raises derives from ``MaandError``, which carries what an operator needs to act:
``kind`` (a short word: ``input``, ``state``, ``worker``, ``refused``...), the ``file`` and ``field`` the
problem sits in and the ``fix``. The adapter (``adapter/action_base.MaandAction.run``) maps the family
once into a failed task result, as kubernetes.core maps ``CoreException`` with ``fail_from_exception``.

This file also runs alone, stdlib only (Python >= 3.6): the deploy installs it beside the worker agent as
errors-<sha12>.py (deploy/remote.py; worker/sandbox.py's OpFailed derives it there), and the hooks' ``maand``
module (worker/maand_helper.py) is staged with it as maand_errors.py (hooks/commands.stage).
"""

__all__ = ["MaandError"]


class MaandError(Exception):
    """Base of every core error. ``str()`` is the message, as before; the fields ride along."""

    kind = "error"

    def __init__(self, *args, kind=None, file=None, field=None, fix=None):
        super().__init__(*args)
        if kind is not None:
            self.kind = kind
        self.file = file
        self.field = field
        self.fix = fix

    def as_result(self):
        """The fields a failed task result carries (msg plus what is known of kind, file, field, fix)."""
        out = {"failed": True, "msg": str(self), "error_kind": self.kind}
        for name in ("file", "field", "fix"):
            if getattr(self, name, None):
                out["error_" + name] = getattr(self, name)
        return out

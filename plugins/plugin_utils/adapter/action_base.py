# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base class of maand.core's action plugins: the Ansible side, not the pure core (the
stage packages of plugin_utils import nothing of Ansible; adapter/ is their only caller's glue).

Every action plugin validates its ARGUMENT_SPEC the same way and, when it takes a bucket, resolves
it to an absolute path; it then implements ``act(result, args, task_vars)``. An error of the core
(``errors.MaandError``) that ``act`` lets through becomes a failed task here, once for every action
(``MaandError.as_result``: msg, error_kind and what is known of error_file, error_field, error_fix).
"""

from __future__ import annotations

import os

from ansible import constants
from ansible.plugins.action import ActionBase

from ..deploy import remote
from ..doors import load_used
from ..errors import MaandError


class MaandAction(ActionBase):
    """run(): Ansible's bookkeeping, ARGUMENT_SPEC validated, ``bucket`` made absolute, then act()."""

    TRANSFERS_FILES = False
    ARGUMENT_SPEC: dict = {}

    def __init_subclass__(cls, **kwargs):
        """An action's doors are resolved as the controller imports it, before it forks the task's workers
        (doors.load_used: each fork would compile them again)."""
        super().__init_subclass__(**kwargs)
        load_used(cls.__module__)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        if args.get("bucket"):
            args["bucket"] = os.path.abspath(os.path.expanduser(args["bucket"]))
        try:
            return self.act(result, args, task_vars)
        except MaandError as exc:  # the core's one error family: a failed task naming the problem and its fix
            result.update(exc.as_result())
            return result

    def act(self, result, args, task_vars):
        raise NotImplementedError

    @staticmethod
    def worker_python(task_vars, host=None):
        """The python the worker agent runs with: the host's ansible_python_interpreter, else Ansible's
        interpreter_python setting (ansible.cfg, ANSIBLE_PYTHON_INTERPRETER), else python3."""
        return remote.interpreter(task_vars, host, constants.config.get_config_value("INTERPRETER_PYTHON"))

    def exec(self, cmd, stdin=None):
        """deploy/remote.Shell over this task's connection: (rc, stdout, stderr) of one command on the host
        (sudo when the play becomes), stdin on its stdin."""
        res = self._low_level_execute_command(cmd, sudoable=True, in_data=stdin)
        return res.get("rc"), res.get("stdout"), res.get("stderr")


class ControllerAction(MaandAction):
    """An action that runs on the controller only (no connection to the host) and supports check mode."""

    _requires_connection = False
    _supports_check_mode = True

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Ansible side of the controller for the deploy's door (deploy/service.py) and the actions that
reach workers: hostvars -> connection settings and addresses, Display -> show/warn, the stdout
callback, the run's pid, the registered deploy_state results -> worker states. The core never sees
hostvars: it gets a ``service.Controller`` and plain records."""

from __future__ import annotations

import os

from ansible import constants
from ansible.utils.display import Display

from ..bucket import ssh_hint, ssh_result_words
from ..deploy import gate, remote, service
from ..hooks import run
from . import support

display = Display()


def watched():
    """Whether the maand.core.deploy stdout callback shows this run (it reads the progress file, so
    the task's own lines go there instead of the screen, where they would break its live line)."""
    return constants.DEFAULT_STDOUT_CALLBACK in ("maand.core.deploy", "deploy")


def show(msg, color=None, stderr=False):
    display.display(msg, color=color, stderr=stderr)


def warn(msg):
    display.warning(msg)


def run_pid():
    """The ansible-playbook process (it holds the deploy lock): actions run in a worker forked from it."""
    return os.getppid()


def ssh_args(task_vars):
    return support.ssh_args(constants.config, task_vars)


def connections(task_vars, hosts=None):
    """{host: connection settings} of hosts (None: every host of the inventory) from their hostvars."""
    hostvars = (task_vars or {}).get("hostvars") or {}
    return support.hosts_from_hostvars(hostvars, list(hostvars) if hosts is None else hosts, ssh_args(task_vars))


def python_of(task_vars):
    """python_of(host) -> the worker's python (its ansible_python_interpreter, else Ansible's interpreter_python
    setting, else python3), for the controller's own ssh calls to the worker agent (gates' and health_check's
    `make status`)."""
    hostvars = (task_vars or {}).get("hostvars") or {}
    return lambda host: remote.interpreter(
        {"ansible_python_interpreter": (hostvars.get(host) or {}).get("ansible_python_interpreter")},
        None, constants.config.get_config_value("INTERPRETER_PYTHON"))


def deploy_controller(templar, task_vars):
    """The service.Controller of a task: connection settings and addresses read from hostvars when the
    deploy needs them, the screen, the maand_hook_timeout / maand_deploy_output_tail budgets."""
    task_vars = task_vars or {}
    return service.Controller(
        connections=lambda hosts=None: connections(task_vars, hosts),
        addresses=lambda: gate.host_addresses(task_vars.get("hostvars") or {}),
        show=show, warn=warn, watched=watched(),
        python_of=python_of(task_vars),
        hook_timeout=support.int_var(templar, task_vars, "maand_hook_timeout", run.DEFAULT_TIMEOUT),
        output_tail=support.int_var(templar, task_vars, "maand_deploy_output_tail", run.DEFAULT_TAIL))


def worker_state(hostvars, host, var):
    """The deploy state of host from its registered maand.core.deploy_state result (hostvars[host][var]);
    a worker not read (skipped, failed, unreachable) is {reachable: False, error}."""
    try:
        hv = hostvars[host]
        reg = hv.get(var)
    except Exception:  # pragma: no cover - hostvars of an unknown host
        reg = None
    if not isinstance(reg, dict):
        return {"reachable": False, "error": "its state was not read (host skipped or failed earlier)"}
    hint = ssh_hint(ssh_result_words(reg), host)  # first contact: host key, login, sudo
    if reg.get("unreachable"):
        error = (reg.get("msg") or "unreachable").strip().splitlines()[-1]
        return {"reachable": False, "error": "%s; %s" % (error, hint) if hint else error}
    if reg.get("failed") or not isinstance(reg.get("state"), dict):
        error = (reg.get("msg") or "state read failed").strip()
        return {"reachable": False, "error": "%s; %s" % (error, hint) if hint else error}
    state = dict(reg["state"])
    if state.get("reachable") is False:  # deploy_state reports a worker it could not read
        return {"reachable": False, "error": str(state.get("error") or "state read failed")}
    state["reachable"] = True
    return state

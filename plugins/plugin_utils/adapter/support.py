# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers the action plugins share: an integer extra var and Ansible's ssh settings.

Pure (no Ansible imports): the templar and Ansible's config manager are passed in.
"""

from __future__ import annotations


def int_var(templar, task_vars, name, default):
    """An integer extra var (maand_hook_timeout, maand_deploy_output_tail), templated; the default
    when unset or not an integer, as the role's argument spec would have refused it earlier."""
    value = (task_vars or {}).get(name)
    if value is None:
        return default
    try:
        return int(templar.template(value))
    except Exception:  # pylint: disable=broad-exception-caught
        return default


def ssh_args(config, task_vars):
    """The ssh options every connection of the run starts with, as Ansible's ssh connection plugin
    builds them: its ssh_args setting (ansible.cfg / ANSIBLE_SSH_ARGS), then ``-o
    StrictHostKeyChecking=no`` when host_key_checking is off (ansible.cfg, ANSIBLE_HOST_KEY_CHECKING,
    ansible_host_key_checking). For the controller's own ssh calls to workers (hooks' run_ssh, ssh
    probes, a gate's `make status`, the status tail of a failed gate), so they reach a worker whenever
    the deploy does. ``config`` is ``ansible.constants.config``."""
    try:
        args = config.get_config_value("ssh_args", plugin_type="connection", plugin_name="ssh",
                                       variables=task_vars) or ""
    except Exception:  # pylint: disable=broad-exception-caught
        args = ""
    if host_key_checking(config, task_vars) is False:
        args = (args + " " + NO_HOST_KEY_CHECKING).strip()
    return args


NO_HOST_KEY_CHECKING = "-o StrictHostKeyChecking=no"


def host_key_checking(config, task_vars):
    """Ansible's host_key_checking for the ssh connection plugin (its variables included), else the
    general setting; True when neither can be read."""
    for kwargs in ({"plugin_type": "connection", "plugin_name": "ssh"}, {}):
        try:
            value = config.get_config_value("host_key_checking" if kwargs else "HOST_KEY_CHECKING",
                                            variables=task_vars, **kwargs)
        except Exception:  # pylint: disable=broad-exception-caught
            continue
        if value is not None:
            return bool(value)
    return True

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers the action plugins share: an integer extra var and Ansible's ssh_args setting.

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
    """Ansible's ssh_args setting (ansible.cfg / ANSIBLE_SSH_ARGS) for the hooks' run_ssh; ``config``
    is ``ansible.constants.config``. Empty when the ssh connection plugin has no such setting."""
    try:
        return config.get_config_value("ssh_args", plugin_type="connection", plugin_name="ssh",
                                       variables=task_vars) or ""
    except Exception:  # pylint: disable=broad-exception-caught
        return ""

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers the action plugins share: an integer extra var, Ansible's ssh_args setting and the
workers' connection settings from hostvars (the core never sees hostvars).

Pure (no Ansible imports): the templar, Ansible's config manager and hostvars are passed in.
"""

from __future__ import annotations

import shlex
from typing import Any, Iterable, Mapping


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


def hosts_from_hostvars(hostvars: Mapping[str, Any], hosts: Iterable[str], ssh_args: str = "") -> dict[str, dict[str, Any]]:
    """{host: {address, port, user, key, options, sudo}} from Ansible's connection variables (and its
    ssh_args setting), for the maand module's run_ssh, ssh probes and status tails."""
    out = {}
    for host in hosts:
        try:
            hv = hostvars[host]
        except Exception:  # pragma: no cover - not in the inventory
            continue
        opts = shlex.split(ssh_args or "")
        for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
            if hv.get(var):
                opts += shlex.split(str(hv.get(var)))
        out[host] = {"address": str(hv.get("ansible_host") or host), "port": hv.get("ansible_port") or None,
                     "user": hv.get("ansible_user") or None, "key": hv.get("ansible_ssh_private_key_file") or None,
                     "options": opts, "sudo": bool(hv.get("ansible_become"))}
    return out

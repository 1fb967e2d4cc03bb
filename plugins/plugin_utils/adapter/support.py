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
    # a value that does not template to a number: the documented default, as for an unset variable
    except Exception:  # pylint: disable=broad-exception-caught
        return default


def warn_stale(result, bucket_dir, task_vars, note):
    """Add the stale-catalog warning `note(bucket_dir)` (catalog.stale_note) to a read-only verb's result, unless
    the maand.core.workspace inventory of the run already gave it (it sets maand_catalog_stale)."""
    if (task_vars or {}).get("maand_catalog_stale"):
        return
    text = note(bucket_dir)
    if text:
        result.setdefault("warnings", []).append(text)


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
    # a setting Ansible cannot resolve for this host: no extra ssh options, as when none is set
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
        # this source cannot be read (an older Ansible, no ssh plugin options): try the next one
        except Exception:  # pylint: disable=broad-exception-caught
            continue
        if value is not None:
            return bool(value)
    return True


def hosts_from_hostvars(hostvars: Mapping[str, Any], hosts: Iterable[str], ssh_args: str = "") -> dict[str, dict[str, Any]]:
    """{host: {address, port, user, key, options, sudo}} from Ansible's connection variables (and its
    ssh_args setting with the host-key policy, adapter/support.ssh_args), for the maand module's run_ssh,
    ssh probes and a gate's status calls: the connection settings the deploy's own ssh uses."""
    out = {}
    for host in hosts:
        try:
            hv = hostvars[host]
        except Exception:  # pragma: no cover - not in the inventory
            continue
        opts = shlex.split(ssh_args or "")
        if _is_false(hv.get("ansible_ssh_host_key_checking", hv.get("ansible_host_key_checking"))):
            opts += ["-o", "StrictHostKeyChecking=no"]  # as Ansible's ssh plugin, after ssh_args
        for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
            if hv.get(var):
                opts += shlex.split(str(hv.get(var)))
        out[host] = {"address": str(hv.get("ansible_host") or host), "port": hv.get("ansible_port") or None,
                     "user": hv.get("ansible_user") or None, "key": hv.get("ansible_ssh_private_key_file") or None,
                     "options": opts, "sudo": bool(hv.get("ansible_become"))}
    return out


def _is_false(value: Any) -> bool:
    """An Ansible boolean variable that is set and false (False, "false", "no", "0", ...)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return not value
    return str(value).strip().lower() in ("false", "no", "n", "0", "off", "f")

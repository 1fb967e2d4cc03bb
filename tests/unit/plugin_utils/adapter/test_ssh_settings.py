"""The controller's own ssh calls to workers (ssh probes, a gate's `make status`, the status tail of a failed
gate, hooks' run_ssh) use the connection settings of the deploy's ssh (issue 22 item 5): Ansible's ssh_args,
then its host-key policy (host_key_checking=False adds StrictHostKeyChecking=no, as the ssh connection
plugin does), then the host's common/extra args; the same argv for probes and diagnostics."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import support as _support
from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.health import tails as _tails


class Config:
    """Ansible's config manager as the actions pass it: get_config_value(name, plugin_type=, plugin_name=, variables=)."""

    def __init__(self, ssh_args="", hkc=True, plugin_loaded=True):
        self.values = {"ssh_args": ssh_args, "host_key_checking": hkc, "HOST_KEY_CHECKING": hkc}
        self.plugin_loaded = plugin_loaded

    def get_config_value(self, name, plugin_type=None, plugin_name=None, variables=None):
        if plugin_type and not self.plugin_loaded:
            raise KeyError("No config definition exists for %r" % name)
        if name == "host_key_checking" and "ansible_host_key_checking" in (variables or {}):
            return variables["ansible_host_key_checking"]
        return self.values[name]


def test_ssh_args_carry_ansibles_host_key_policy():
    assert _support.ssh_args(Config("-o ControlMaster=auto"), {}) == "-o ControlMaster=auto"
    assert _support.ssh_args(Config("-o ControlMaster=auto", hkc=False), {}) == "-o ControlMaster=auto -o StrictHostKeyChecking=no"
    assert _support.ssh_args(Config("", hkc=True), {"ansible_host_key_checking": False}) == "-o StrictHostKeyChecking=no"
    assert _support.ssh_args(Config("-C", hkc=False, plugin_loaded=False), {}) == "-o StrictHostKeyChecking=no"  # general setting


def test_a_hosts_own_host_key_checking_false_is_honoured():
    hostvars = {"h1": {"ansible_host": "10.0.0.1", "ansible_host_key_checking": "False", "ansible_ssh_common_args": "-o A=b"},
                "h2": {"ansible_host": "10.0.0.2"}}
    conns = _support.hosts_from_hostvars(hostvars, ["h1", "h2"], "-C")
    assert conns["h1"]["options"] == ["-C", "-o", "StrictHostKeyChecking=no", "-o", "A=b"]
    assert conns["h2"]["options"] == ["-C"]


def test_probes_and_diagnostics_use_one_ssh_command_line():
    conn = {"address": "10.0.0.1", "port": 2222, "user": "agent", "key": "/k", "sudo": True,
            "options": ["-o", "UserKnownHostsFile=/tmp/kh", "-o", "StrictHostKeyChecking=no"]}
    tail = _tails.ssh_argv(conn, "tail logs/x", connect_timeout=7)
    assert tail[:-1] == health.ssh_argv(conn, 7) and tail[-1] == health.ssh_remote("tail logs/x", sudo=True)
    # the run's policy comes before the probes' own accept-new: ssh keeps the first value of an option
    assert tail.index("StrictHostKeyChecking=no") < tail.index("StrictHostKeyChecking=accept-new")

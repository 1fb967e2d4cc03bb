"""A deploy step reads the vars of the hosts it needs, never the whole fleet's (issue 25: the time between
rolling batches grew with the fleet while every step built every host's addresses and connection settings
from Ansible's hostvars, an Ansible variable pass per host)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import callbacks as _callbacks, gate as _gate, run as _run, service as _service


class CountingHostvars(dict):
    """hostvars whose reads are counted per host (Ansible's HostVars runs a variable pass per read)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.reads = []

    def __getitem__(self, host):
        self.reads.append(host)
        return super().__getitem__(host)


def fleet(n):
    return CountingHostvars({"h%d" % i: {"ansible_host": "10.0.0.%d" % i} for i in range(n)})


def test_addresses_read_only_the_hosts_a_gate_asks_for():
    hostvars = fleet(64)
    addresses = _gate.host_addresses(hostvars)
    assert hostvars.reads == []  # building it reads nothing
    assert addresses.get("h3", "h3") == "10.0.0.3" and addresses["h3"] == "10.0.0.3"
    assert addresses.get("nope", "nope") == "nope"
    assert hostvars.reads == ["h3"]  # once, cached
    assert len(addresses) == 64 and "h63" in addresses


def test_connections_are_built_per_host_and_all_only_when_iterated(tmp_path):
    asked = []

    def connections(hosts=None):
        asked.append(None if hosts is None else list(hosts))
        names = ["h%d" % i for i in range(64)] if hosts is None else [h for h in hosts if h.startswith("h")]
        return {h: {"address": "10.0.0.%s" % h[1:], "options": []} for h in names}

    folder = tmp_path / "cm"
    lazy = _callbacks.LazyConnections(connections, lambda: str(folder))
    assert asked == [] and not folder.exists()
    conn = lazy["h5"]
    assert conn["address"] == "10.0.0.5" and any("ControlPath=" in o for o in conn["options"])  # with_mux
    assert lazy.get("x1") is None and lazy.get("h5") is conn
    assert asked == [["h5"], ["x1"]]
    assert sorted(health.by_address(lazy)) == sorted("10.0.0.%d" % i for i in range(64))  # ssh probes: all, once
    assert len(lazy) == 64 and asked[-1] is None and asked.count(None) == 1


def test_a_step_without_hooks_never_builds_the_connections(tmp_path):
    calls = []

    def hosts():
        calls.append(1)
        return {}

    catalog = {"jobs": [{"name": "api"}], "allocations": []}
    run = _run.RunContext(str(tmp_path), str(tmp_path), {"steps": [], "rows": []}, None, catalog)
    ctl = _service.Controller(connections=lambda hosts_=None: hosts())
    with _callbacks.StepCallbacks.opened(run, ctl, rerender=None) as cbs:
        assert not cbs.hooked and cbs.after_results({"wave": None}, [{"job": "api", "target": "stop"}]) == []
        assert cbs.gate({"job": "api", "hosts": ["h1"], "checks": []}) == []
    assert calls == []

"""maand's port allocator tests (maand-sh/maand build/build_ports_test.go) against _validate._PortAllocator.

Each case names its Go test and gives the ports stored by the previous build, the pool, then operations in
order with maand's expected outcome: ("pool", job, name, port | "exhausted"), ("fixed", job, name, port, port |
"collision"), ("release", job, [names kept])."""

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog.validate import _PortAllocator

CASES = [
    ("StableAndReuse", "TestPortAllocatorStableAndReuse", {"a": {"web_port": 30001}}, (30000, 30002),
     [("pool", "a", "web_port", 30001), ("pool", "b", "api_port", 30000), ("pool", "b", "api_port", 30000)]),
    ("ReleaseRemoved", "TestPortAllocatorReleaseRemoved", {"a": {"web_port": 30000, "admin_port": 30001}}, (30000, 30001),
     [("release", "a", ["admin_port"]), ("pool", "b", "other_port", 30000)]),
    ("Exhausted", "TestPortAllocatorExhausted", {"a": {"p1": 30000}}, (30000, 30000), [("pool", "b", "p2", "exhausted")]),
    ("StableAcrossMultipleJobs", "TestPortAllocatorStableAcrossMultipleJobs", {"api": {"http_port": 30001}, "database": {"db_port": 30002}}, (30000, 30005),
     [("pool", "api", "http_port", 30001), ("pool", "database", "db_port", 30002), ("pool", "api", "http_port", 30001),
      ("pool", "database", "db_port", 30002), ("pool", "worker", "metrics_port", 30000),
      ("pool", "api", "http_port", 30001)]),
    ("FixedPort", "TestPortAllocatorFixedPort", {}, (30000, 30005),
     [("fixed", "api", "http_port", 30001, 30001), ("fixed", "api", "http_port", 30001, 30001),
      ("fixed", "db", "db_port", 30001, "collision"), ("pool", "worker", "metrics_port", 30000)]),
    ("FixedPortChangeReleasesPrevious", "TestPortAllocatorFixedPortChangeReleasesPrevious", {"api": {"http_port": 30001}}, (30000, 30005),
     [("fixed", "api", "http_port", 30002, 30002), ("fixed", "worker", "metrics_port", 30001, 30001)]),
    ("ResolveProvisionedAndFixed", "TestPortAllocatorResolveProvisionedAndFixed", {}, (30000, 30005),
     [("fixed", "api", "http_port", 30001, 30001), ("pool", "worker", "metrics_port", 30000)]),
    ("FixedPortOutsidePoolAllowed", "TestPortAllocatorFixedPortOutsidePoolAllowed", {}, (30000, 30005),
     [("fixed", "database", "database_port", 5432, 5432), ("pool", "api", "http_port", 30000)]),
    ("ProvisionedReassignWhenOutsidePool", "TestPortAllocatorProvisionedReassignWhenOutsidePool",
     {"node_agent": {"node_agent_port_metrics": 9500}}, (30000, 30005),
     [("pool", "node_agent", "node_agent_port_metrics", 30000), ("pool", "node_agent", "node_agent_port_metrics", 30000)]),
    ("ProvisionedReuseOutsideNarrowedPool", "TestPortAllocatorProvisionedReuseOutsideNarrowedPool", {"api": {"http_port": 30001}}, (30000, 30000),
     [("pool", "api", "http_port", 30000)]),
]


@pytest.mark.parametrize("name, source, existing, pool, steps", CASES, ids=[c[0] for c in CASES])
def test_port_allocator_as_maand(name, source, existing, pool, steps):
    alloc = _PortAllocator(existing, *pool)
    for step in steps:
        if step[0] == "release":
            alloc.release_missing(step[1], set(step[2]))
        elif step[0] == "pool":
            got = alloc.provisioned(step[1], step[2])
            assert got == (None if step[3] == "exhausted" else step[3]), (source, step)
        else:
            owner = alloc.fixed(step[1], step[2], step[3])
            assert (owner is not None) == (step[4] == "collision"), (source, step, owner)

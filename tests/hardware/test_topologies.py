"""The topology registry: every registered topology joins any number of chips and routes between them."""
from __future__ import annotations

import networkx as nx
import pytest

from memsim import hardware
from memsim.errors import ConfigError
from memsim.hardware import topologies

NAMES = topologies.names()


def test_the_shipped_topologies_are_registered():
    assert set(NAMES) == {"switch", "ring", "mesh2d", "torus2d"}
    assert topologies.get("switch").transfer_hops == 2  # chip -> switch -> chip
    assert all(topologies.get(name).transfer_hops == 1 for name in ("ring", "mesh2d", "torus2d"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", range(1, 10))
def test_every_topology_builds_a_connected_graph_and_routes_between_all_pairs(name, n):
    topology = topologies.get(name)
    g = topology.build(n)
    assert set(range(n)) <= set(g.nodes)
    assert nx.is_strongly_connected(g)
    assert all(g.has_edge(b, a) for a, b in g.edges)  # every link works in both directions
    for src in range(n):
        for dst in range(n):
            route = topology.route(g, src, dst)
            if src == dst:
                assert route == []
                continue
            assert route[0][0] == src and route[-1][1] == dst
            assert all(g.has_edge(*edge) for edge in route)
            assert all(a[1] == b[0] for a, b in zip(route, route[1:]))  # a walk, not scattered links
            assert len({node for edge in route for node in edge}) == len(route) + 1  # never revisits a node


def test_system_topology_accepts_exactly_the_registered_names():
    for name in NAMES:
        assert hardware.load("h100-sxm", [("system.topology", name)]).system.topology == name
    with pytest.raises(ConfigError) as info:
        hardware.load("h100-sxm", [("system.topology", "hypercube")])
    assert info.value.field == "system.topology"
    assert f"'hypercube' is not one of {', '.join(NAMES)}" in str(info.value)


def test_an_unknown_topology_built_in_python_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        topologies.get("hypercube")
    assert info.value.field == "system.topology" and "switch" in str(info.value)

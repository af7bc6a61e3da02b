"""The topology registry: every registered topology joins any number of chips and routes between them."""
from __future__ import annotations

import itertools

import networkx as nx
import pytest

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.hardware import topologies
from memsim.hardware.topologies import Wiring
from memsim.hardware.topologies.dragonfly import groups
from memsim.hardware.topologies.grid import cube_shape

NAMES = topologies.TOPOLOGIES.names()
# Enough links for every neighbour of every topology up to 9 chips; a dragonfly of groups of 4.
WIRING = Wiring(count=16, group=4, global_links=4)


def test_the_shipped_topologies_are_registered():
    assert set(NAMES) == {"switch", "ring", "mesh2d", "torus2d", "torus3d", "fully_connected", "dragonfly"}
    assert topologies.TOPOLOGIES.get("switch").transfer_hops == 2  # chip -> switch -> chip
    assert all(topologies.TOPOLOGIES.get(name).transfer_hops == 1 for name in NAMES if name != "switch")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", range(1, 10))
def test_every_topology_builds_a_connected_graph_and_routes_between_all_pairs(name, n):
    topology = topologies.TOPOLOGIES.get(name)
    g = topology.build(n, WIRING)
    assert all(d["links"] >= 1 for _, _, d in g.edges(data=True))
    assert all(g.edges[b, a]["links"] == d["links"] for a, b, d in g.edges(data=True))  # a cable works both ways
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
            assert all(a[1] == b[0] for a, b in itertools.pairwise(route))  # a walk, not scattered links
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
        topologies.TOPOLOGIES.get("hypercube")
    assert info.value.field == "system.topology" and "switch" in str(info.value)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "dragonfly"])
@pytest.mark.parametrize("n", [2, 3, 4, 8, 9, 16])
def test_a_chip_never_uses_more_links_than_it_has(name, n):
    """Every chip's cables bundle at most its ``count`` links; where every chip has the same
    neighbours, the spread leaves idle only the remainder of an uneven share."""
    wiring = Wiring(count=240)
    g = topologies.TOPOLOGIES.get(name).build(n, wiring)
    used = {c: sum(d["links"] for _, _, d in g.out_edges(c, data=True)) for c in range(n)}
    assert max(used.values()) <= wiring.count
    ports = {"switch": 1, "ring": 2, "fully_connected": n - 1}.get(name)
    if ports is not None:
        assert set(used.values()) == {240 - 240 % ports}


def test_links_per_peer_sets_every_cable_and_too_few_links_are_a_config_error():
    g = topologies.TOPOLOGIES.get("fully_connected").build(4, Wiring(count=7, per_peer=1))
    assert {d["links"] for _, _, d in g.edges(data=True)} == {1}
    spread = topologies.TOPOLOGIES.get("fully_connected").build(4, Wiring(count=7))
    assert {d["links"] for _, _, d in spread.edges(data=True)} == {2}
    with pytest.raises(ConfigError) as info:
        topologies.TOPOLOGIES.get("torus2d").build(16, Wiring(count=2))
    assert info.value.field == "system.topology" and "2 links per chip cannot reach the 4 neighbours" in str(info.value)


def test_a_torus_dimension_of_two_bundles_both_ports_and_one_of_one_none():
    g = topologies.TOPOLOGIES.get("torus3d").build(4, Wiring(count=6))  # 1 x 2 x 2: the first dimension is unused
    assert cube_shape(4) == (1, 2, 2)
    assert {d["links"] for _, _, d in g.edges(data=True)} == {2}
    assert all(sum(d["links"] for _, _, d in g.out_edges(c, data=True)) == 4 for c in range(4))
    cube = topologies.TOPOLOGIES.get("torus3d").build(64, Wiring(count=6))
    assert all(g_ == 6 for _, g_ in cube.out_degree()) and {d["links"] for *_, d in cube.edges(data=True)} == {1}
    assert len(topologies.TOPOLOGIES.get("torus3d").route(cube, 0, 63)) == 3  # one wraparound hop in each dimension


@pytest.mark.parametrize("n", [16, 64, 72, 576])
def test_a_dragonfly_joins_full_groups_with_global_links_within_each_chips_ports(n):
    """Groq's wiring: groups of 8 fully connected by one link a pair, 4 global links a chip."""
    wiring = Wiring(count=16, per_peer=1, group=8, global_links=4)
    g = topologies.TOPOLOGIES.get("dragonfly").build(n, wiring)
    parts = groups(n, wiring)
    assert [len(p) for p in parts] == [8] * (n // 8)
    for part in parts:
        assert all(g.has_edge(a, b) and g.edges[a, b]["links"] == 1 for a in part for b in part if a != b)
    for chip in range(n):
        out = sum(d["links"] for _, b, d in g.out_edges(chip, data=True) if b // 8 != chip // 8)
        assert 1 <= out <= 4
    if n // 8 - 1 <= 8 * 4:  # every group has a cable to every other: local, global, local at most
        route = topologies.TOPOLOGIES.get("dragonfly").route(g, 1, n - 2)
        assert len(route) <= 3 and sum(a // 8 != b // 8 for a, b in route) == 1

"""System topologies, registered by the name used in YAML (``system.topology``).

A topology cables N chips together as they are built: a networkx graph whose edges are the
cables between neighbours, each with the number of physical links it bundles (``links``; an
edge of k parallel links carries k times one link's bandwidth each way), and a rule for the
route a transfer takes. A transfer occupies every edge on its route; where the route passes
through another chip, that chip forwards it (ring, grids, fully connected, dragonfly: no switch
node and no switch hop), and only ``switch`` has a node that is not a chip. How many links an
edge bundles follows from ``Wiring``: the links each chip has, spread over its neighbours,
unless the system says how many join each pair. Each topology lives in one module of this
package and registers itself; adding a topology means adding one file.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import networkx as nx

from memsim.core.errors import ConfigError
from memsim.core.registry import Registry

Edge = tuple[Hashable, Hashable]
Cable = tuple[Hashable, Hashable, int]  # two ends and the parallel links between them


@dataclass(frozen=True, slots=True)
class Wiring:
    """How chips are cabled: ``count`` physical links per chip; ``per_peer`` links join each
    pair of neighbours (0: the count spread evenly over a chip's neighbours); a dragonfly's
    ``group`` of fully connected chips and the ``global_links`` of each chip that leave it."""
    count: int = 1
    per_peer: int = 0
    group: int = 0
    global_links: int = 0

    def spread(self, ports: int, what: str) -> int:
        """Links per neighbour when a chip's links are shared among ``ports`` neighbours."""
        links = self.per_peer or self.count // ports
        if links < 1:
            raise ConfigError(f"{self.count} links per chip cannot reach the {ports} neighbours a chip has in {what}",
                              field="system.topology")
        return links


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    cables: Callable[[int, Wiring], list[Cable]]  # the cables joining chips 0..n-1 (n >= 2)
    path: Callable[[nx.DiGraph, int, int], Sequence[Hashable]]  # the nodes a transfer visits, src and dst included
    transfer_hops: int = 1  # link hops a transfer between group neighbours pays (two through a switch)
    dims: Callable[[int], tuple[int, ...]] | None = None  # a grid's sizes for n chips, the fastest-varying last

    def build(self, n: int, wiring: Wiring | None = None) -> nx.DiGraph:
        """The chips and, in both directions, the cables between them (edge attribute ``links``:
        the physical links bundled; without a wiring, one each); one chip needs none."""
        g: nx.DiGraph[Hashable] = nx.DiGraph()
        g.add_nodes_from(range(n))
        for a, b, links in self.cables(n, wiring or Wiring(per_peer=1)) if n > 1 else ():
            g.add_edge(a, b, links=links)
            g.add_edge(b, a, links=links)
        return g

    def route(self, g: nx.DiGraph, src: int, dst: int) -> list[Edge]:
        """The links (directed edges) a transfer from ``src`` to ``dst`` crosses."""
        if src == dst:
            return []
        path = self.path(g, src, dst)
        return list(itertools.pairwise(path))


def shortest_path(g: nx.DiGraph, src: int, dst: int) -> list[Hashable]:
    return nx.shortest_path(g, src, dst)


TOPOLOGIES: Registry[Topology] = Registry("topology", field="system.topology", package=__name__)


def register(topology: Topology) -> Topology:
    return TOPOLOGIES.add(topology.name, topology)

"""System topologies, registered by the name used in YAML (``system.topology``).

A topology joins N chips with links, as a networkx graph whose directed edges are link
directions (each with the bandwidth and latency of the chip's interconnect), and says how a
transfer is routed over it; a transfer occupies every link on its route. Each topology lives
in one module of this package and registers itself; adding a topology means adding one file.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import networkx as nx

from memsim.errors import ConfigError

Edge = tuple[Hashable, Hashable]


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    links: Callable[[int], list[Edge]]  # the undirected links joining chips 0..n-1 (n >= 2)
    path: Callable[[nx.DiGraph, int, int], list[Hashable]]  # the nodes a transfer visits, src and dst included
    transfer_hops: int = 1  # link hops a transfer between group neighbours pays (two through a switch)

    def build(self, n: int) -> nx.DiGraph:
        """The chips and, in both directions, the links between them; one chip needs none."""
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        for a, b in self.links(n) if n > 1 else ():
            g.add_edge(a, b)
            g.add_edge(b, a)
        return g

    def route(self, g: nx.DiGraph, src: int, dst: int) -> list[Edge]:
        """The links (directed edges) a transfer from ``src`` to ``dst`` crosses."""
        if src == dst:
            return []
        path = self.path(g, src, dst)
        return list(zip(path, path[1:]))


def shortest_path(g: nx.DiGraph, src: int, dst: int) -> list[Hashable]:
    return nx.shortest_path(g, src, dst)


TOPOLOGIES: dict[str, Topology] = {}


def register(topology: Topology) -> Topology:
    TOPOLOGIES[topology.name] = topology
    return topology


def names() -> tuple[str, ...]:
    _discover()
    return tuple(sorted(TOPOLOGIES))


def get(name: str) -> Topology:
    _discover()
    if name not in TOPOLOGIES:
        raise ConfigError(f"{name!r} is not one of {', '.join(names())}", field="system.topology")
    return TOPOLOGIES[name]


@functools.cache
def _discover() -> None:
    """Import every module of this package once, so that each registers its topologies."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")

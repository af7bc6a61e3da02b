"""Switch: every chip's links go to a central switch (NVSwitch-like, or SwarmX).

A transfer between two chips crosses two links, chip to switch and switch to chip, so it
pays two link latencies. All of a chip's links go into the switch unless the system says how
many (``system.links_per_peer``): the switch node stands for the switch chips of a node, so
one edge bundles them (an HGX H100's 18 NVLinks into its four NVSwitches).
"""
from __future__ import annotations

import networkx as nx

from memsim.hardware.topologies import Cable, Topology, Wiring, register

SWITCH = "sw"  # the switch's node in the graph


def cables(n: int, wiring: Wiring) -> list[Cable]:
    return [(i, SWITCH, wiring.spread(1, "a switch")) for i in range(n)]


def through(g: nx.DiGraph, src: int, dst: int) -> list:
    """Chip to switch to chip: the one shortest path, without searching for it."""
    return [src, SWITCH, dst]


register(Topology("switch", cables, through, transfer_hops=2))

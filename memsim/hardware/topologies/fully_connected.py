"""Fully connected: a cable between every pair of chips, no switch (an MI300X platform's xGMI
mesh, a Groq node's eight chips).

A transfer goes straight to its destination over the one cable, one hop. A chip's links are
shared among its n - 1 peers unless the system says how many join each pair
(``system.links_per_peer``: a platform wired for eight chips keeps one per pair when a run uses
four of them).
"""
from __future__ import annotations

import networkx as nx

from memsim.hardware.topologies import Cable, Topology, Wiring, register


def cables(n: int, wiring: Wiring) -> list[Cable]:
    links = wiring.spread(n - 1, f"a fully connected system of {n}")
    return [(a, b, links) for a in range(n) for b in range(a + 1, n)]


def direct(g: nx.DiGraph, src: int, dst: int) -> list[int]:
    return [src, dst]


register(Topology("fully_connected", cables, direct))

"""Dragonfly: fully connected groups of chips (``system.group``), groups joined by global links
(``system.global_links`` per chip), as Groq's TSP systems are built (Abts et al., ISCA 2022).

Chips are the routers: a transfer between groups goes local, global, local (minimal routing),
each chip on the way forwarding it. Inside a group every pair of chips has a cable of
``links_per_peer`` links (default: the links left after the global ones, spread over the
group's other chips). Each group has ``group x global_links`` global ports; when they can
reach every other group, each group pair is joined directly by as many cables as the ports
allow (up to one per chip), each cable taking the next chip of either group in turn. Beyond that
size each group is joined to its nearest groups on a circle (a circulant of as many groups as
it has ports), and a route may take several global hops.
"""
from __future__ import annotations

from collections.abc import Hashable

import networkx as nx

from memsim.core.errors import ConfigError
from memsim.hardware.topologies import Cable, Topology, Wiring, register, shortest_path


def groups(n: int, wiring: Wiring) -> list[range]:
    size = wiring.group if 0 < wiring.group < n else n
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


def _neighbour_groups(g: int, count: int, ports: int) -> list[int]:
    if count - 1 <= ports:
        return [h for h in range(count) if h != g]
    reach = max(1, ports // 2)
    return sorted({(g + d) % count for d in range(-reach, reach + 1) if d} - {g})


def cables(n: int, wiring: Wiring) -> list[Cable]:
    parts = groups(n, wiring)
    out: list[Cable] = []
    size = len(parts[0])
    if size > 1:
        local = wiring.per_peer or Wiring(wiring.count - wiring.global_links).spread(size - 1, "a dragonfly group")
        out += [(a, b, local) for part in parts for a in part for b in part if a < b]
    if len(parts) == 1:
        return out
    if wiring.global_links < 1:
        raise ConfigError("a dragonfly of several groups needs global links (system.global_links)",
                          field="system.global_links")
    ports = size * wiring.global_links
    peers = {g: _neighbour_groups(g, len(parts), ports) for g in range(len(parts))}
    fan = max(len(p) for p in peers.values())
    per_pair = min(size, max(1, ports // fan))  # cables between two joined groups
    per_chip = -(-fan * per_pair // size)  # global cables a chip ends
    links = max(1, wiring.global_links // per_chip)
    cursor = [0] * len(parts)  # the next chip of each group to end a global cable
    for g, others in peers.items():
        for h in others:
            if g > h:
                continue
            for _ in range(per_pair):
                a, b = parts[g][cursor[g] % len(parts[g])], parts[h][cursor[h] % len(parts[h])]
                cursor[g], cursor[h] = cursor[g] + 1, cursor[h] + 1
                out.append((a, b, links))
    return out

def minimal(g: nx.DiGraph, src: int, dst: int) -> list[Hashable]:
    """The fewest hops, local cables first: direct, through one chip, or local, global, local
    (a chip of either group forwarding); past that, a shortest path."""
    if g.has_edge(src, dst):
        return [src, dst]
    ahead = list(g.successors(src))
    for x in ahead:
        if g.has_edge(x, dst):
            return [src, x, dst]
    behind = list(g.predecessors(dst))
    for a in ahead:
        for b in behind:
            if g.has_edge(a, b):
                return [src, a, b, dst]
    return shortest_path(g, src, dst)


register(Topology("dragonfly", cables, minimal))

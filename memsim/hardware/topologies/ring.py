"""Ring: chip i is linked to chip i+1, and the last chip back to the first.

Transfers take the shorter way round. A chip's links are split between its two ring ports;
with two chips, both ports reach the one neighbour.
"""
from __future__ import annotations

from memsim.hardware.topologies import Cable, Topology, Wiring, register, shortest_path


def cables(n: int, wiring: Wiring) -> list[Cable]:
    links = wiring.spread(2, "a ring")
    if n == 2:
        return [(0, 1, wiring.per_peer or 2 * links)]
    return [(i, (i + 1) % n, links) for i in range(n)]


register(Topology("ring", cables, shortest_path))

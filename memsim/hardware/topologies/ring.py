"""Ring: chip i is linked to chip i+1, and the last chip back to the first.

Transfers take the shorter way round.
"""
from __future__ import annotations

from memsim.hardware.topologies import Edge, Topology, register, shortest_path


def links(n: int) -> list[Edge]:
    return [(i, (i + 1) % n) for i in range(n if n > 2 else 1)]  # two chips share one link


register(Topology("ring", links, shortest_path))

"""Switch: every chip has one link to a central switch (NVSwitch-like, or SwarmX).

A transfer between two chips crosses two links, chip to switch and switch to chip, so it
pays two link latencies.
"""
from __future__ import annotations

from memsim.hardware.topologies import Edge, Topology, register, shortest_path

SWITCH = "sw"  # the switch's node in the graph


def links(n: int) -> list[Edge]:
    return [(i, SWITCH) for i in range(n)]


register(Topology("switch", links, shortest_path, transfer_hops=2))

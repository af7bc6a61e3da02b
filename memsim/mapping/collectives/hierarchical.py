"""Hierarchical all-reduce: within each node, then across nodes, then back (``Shape.node``
members per node: a dragonfly's group, a GPU server).

A direct reduce-scatter inside each node leaves every member the sum of one part over its node;
members in the same place of every node then all-reduce that part directly (reduce-scatter
and all-gather among themselves); a direct all-gather inside each node spreads the parts. Four
rounds, and only a node's share of the message crosses between nodes. With one node it is a
two-shot. As a runtime kernel it ends with a barrier (``Shape.barrier``).
"""
from __future__ import annotations

from memsim.mapping.collectives import (
    LinkCost,
    Moves,
    Shape,
    allreduce_algorithm,
    barrier,
    direct_all_gather,
    direct_reduce_scatter,
    parallel,
)


def hierarchical_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + 2 steps inside nodes of k (a port sends k - 1 parts of n / k pieces) + 2 steps
    across the m nodes (a port sends m - 1 pieces), pieces of ⌈bytes / n⌉."""
    if n < 2:
        return 0.0
    k = shape.node_size(n)
    m, size = n // k, -(-nbytes // n)
    total = link.launch_s + link.step_s * shape.barrier
    for parts, pieces in ((k, m), (m, 1)):
        if parts > 1:
            total += 2 * ((parts - 1) * pieces * size / link.bandwidth_bytes_per_s + link.step_s)
    return total


@allreduce_algorithm("hierarchical", hierarchical_cost, general=True)
def hierarchical(n: int, shape: Shape) -> tuple[int, Moves]:
    k = shape.node_size(n)
    nodes = [list(range(j, j + k)) for j in range(0, n, k)]
    inside, owned = [], {}
    for node in nodes:
        moves, got = direct_reduce_scatter(node, tuple(range(n)))
        inside.append(moves)
        owned.update(got)
    across, gather = [], []
    for place in range(k):
        peers = [node[place] for node in nodes]
        moves, got = direct_reduce_scatter(peers, owned[peers[0]])
        across.append(moves + direct_all_gather(peers, got))
    for node in nodes:
        gather.append(direct_all_gather(node, owned))
    return n, parallel(*inside) + parallel(*across) + parallel(*gather) + barrier(n, shape)

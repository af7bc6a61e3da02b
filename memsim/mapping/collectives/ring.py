"""Ring all-reduce: reduce-scatter then all-gather around a ring, 2(n - 1) rounds.

Each round every member passes one n-th of its channel's share on to the next. With several
ring channels (``Shape.rings``: over a fully connected group, rings that share no link) the
message is split among them and they run at once, each over its own links. NCCL's default
for large messages.
"""
from __future__ import annotations

from memsim.mapping.collectives import (
    LinkCost,
    Moves,
    Shape,
    allreduce_algorithm,
    parallel,
    ring_all_gather,
    ring_reduce_scatter,
)


def ring_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + 2(n - 1) steps in which a port sends one piece per channel (⌈bytes / (n c)⌉ each)."""
    if n < 2:
        return 0.0
    c = len(shape.channels(n))
    return link.launch_s + 2 * (n - 1) * (c * -(-nbytes // (n * c)) / link.bandwidth_bytes_per_s + link.step_s)


@allreduce_algorithm("ring", ring_cost)
def ring(n: int, shape: Shape) -> tuple[int, Moves]:
    rings = shape.channels(n)
    scatter, gather = [], []
    for r, order in enumerate(rings):
        moves, owned = ring_reduce_scatter(order, tuple(range(r * n, (r + 1) * n)))
        scatter.append(moves)
        gather.append(ring_all_gather(order, owned))
    return n * len(rings), parallel(*scatter) + parallel(*gather)

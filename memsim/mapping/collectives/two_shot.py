"""Two-shot all-reduce: a direct reduce-scatter (each member sends part j to member j, which
sums it) then a direct all-gather, two rounds that move a ring's bytes. TensorRT-LLM's and
vLLM's custom all-reduce for mid-sized messages. As a runtime kernel it ends with a barrier
(``Shape.barrier``).
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
)


def two_shot_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + 2 steps in which a port sends n - 1 pieces of ⌈bytes / n⌉ (+ a barrier's step)."""
    if n < 2:
        return 0.0
    return link.launch_s + 2 * ((n - 1) * -(-nbytes // n) / link.bandwidth_bytes_per_s + link.step_s) + \
        link.step_s * shape.barrier


@allreduce_algorithm("two_shot", two_shot_cost)
def two_shot(n: int, shape: Shape) -> tuple[int, Moves]:
    members = range(n)
    scatter, owned = direct_reduce_scatter(members, tuple(range(n)))
    return n, scatter + direct_all_gather(members, owned) + barrier(n, shape)

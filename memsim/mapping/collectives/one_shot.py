"""One-shot all-reduce: every member sends its whole message to every other and each sums what
it receives, one round. The fewest rounds, the most bytes ((n - 1) messages per member): the
small-message all-reduce of TensorRT-LLM's and vLLM's custom kernels on NVSwitch or a full mesh.
As a runtime kernel it ends with a barrier (``Shape.barrier``).
"""
from __future__ import annotations

from memsim.mapping.collectives import LinkCost, Move, Moves, Shape, allreduce_algorithm, barrier


def one_shot_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + one step in which a port sends n - 1 whole messages (+ a barrier's step)."""
    if n < 2:
        return 0.0
    return link.launch_s + (n - 1) * nbytes / link.bandwidth_bytes_per_s + link.step_s * (1 + shape.barrier)


@allreduce_algorithm("one_shot", one_shot_cost)
def one_shot(n: int, shape: Shape) -> tuple[int, Moves]:
    return 1, [[Move(a, b, (0,), True) for a in range(n) for b in range(n) if a != b], *barrier(n, shape)]

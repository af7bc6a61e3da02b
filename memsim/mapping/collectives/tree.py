"""Tree all-reduce: the whole message up a binary tree and back down, 2⌈log2 n⌉ rounds."""
from __future__ import annotations

import math

from memsim.mapping.collectives import LinkCost, Move, Moves, Shape, allreduce_algorithm


def tree_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + 2⌈log2 n⌉ steps of the whole message each."""
    if n < 2:
        return 0.0
    return link.launch_s + 2 * math.ceil(math.log2(n)) * (nbytes / link.bandwidth_bytes_per_s + link.step_s)


@allreduce_algorithm("tree", tree_cost)
def tree(n: int, shape: Shape) -> tuple[int, Moves]:
    """Reduce up: in round k member i (i mod 2^(k+1) = 2^k) adds its sum into member i - 2^k;
    then broadcast down the same edges in reverse."""
    up: Moves = []
    for k in range(math.ceil(math.log2(n)) if n > 1 else 0):
        step = 1 << k
        up.append([Move(i, i - step, (0,), True) for i in range(n) if i % (2 * step) == step])
    down = [[Move(m.dst, m.src, m.pieces, False) for m in moved] for moved in reversed(up)]
    return 1, up + down

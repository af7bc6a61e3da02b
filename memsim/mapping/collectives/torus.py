"""Torus all-reduce: rings along each dimension of the torus the group spans, one dimension
after another (a 2D torus's row rings, then its column rings on a row's share; TPU pods).

Reduce-scatter along the fastest-varying dimension, then along the next on the share each
member owns, and so on; then all-gather back in the reverse order. Along a dimension of three
or more, the share goes half one way round and half the other, so both directions of every
link carry bytes. With one dimension it is a (bidirectional) ring.
"""
from __future__ import annotations

import math

from memsim.mapping.collectives import (
    LinkCost,
    Moves,
    Pieces,
    Shape,
    allreduce_algorithm,
    parallel,
    ring_all_gather,
    ring_reduce_scatter,
    split,
)


def _ways(size: int) -> int:
    return 2 if size > 2 else 1


def torus_cost(n: int, nbytes: float, link: LinkCost, shape: Shape = Shape()) -> float:
    """Launch + per dimension of size s, 2(s - 1) steps in which a port sends 1/s of the share
    left from the dimensions before it."""
    if n < 2:
        return 0.0
    dims = shape.grid(n)
    pieces = n * math.prod(_ways(s) for s in dims)
    size = -(-nbytes // pieces)
    share, total = pieces, link.launch_s
    for s in reversed(dims):
        if s > 1:
            total += 2 * (s - 1) * (share // s * size / link.bandwidth_bytes_per_s + link.step_s)
            share //= s
    return total


def _lines(dims: tuple[int, ...], d: int) -> list[list[int]]:
    """The positions along dimension ``d`` (row-major, the last dimension fastest), one list per line."""
    stride = math.prod(dims[d + 1:])
    n = math.prod(dims)
    starts = [i for i in range(n) if (i // stride) % dims[d] == 0]
    return [[start + k * stride for k in range(dims[d])] for start in starts]


@allreduce_algorithm("torus", torus_cost, general=True)
def torus(n: int, shape: Shape) -> tuple[int, Moves]:
    dims = shape.grid(n)
    pieces = n * math.prod(_ways(s) for s in dims)
    share: dict[int, Pieces] = {i: tuple(range(pieces)) for i in range(n)}
    scatter: Moves = []
    gathers: list[Moves] = []
    for d in reversed(range(len(dims))):
        if dims[d] < 2:
            continue
        down: list[Moves] = []
        up: list[Moves] = []
        owned: dict[int, Pieces] = {}
        for line in _lines(dims, d):
            orders = [line, line[::-1]][:_ways(dims[d])]
            for order, part in zip(orders, split(share[line[0]], len(orders))):
                moves, got = ring_reduce_scatter(order, part)
                down.append(moves)
                up.append(ring_all_gather(order, got))
                for member, block in got.items():
                    owned[member] = owned.get(member, ()) + block
        scatter += parallel(*down)
        gathers.append(parallel(*up))
        share = owned
    return pieces, scatter + [r for moves in reversed(gathers) for r in moves]

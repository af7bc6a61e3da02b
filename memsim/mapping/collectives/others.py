"""The collectives other than all-reduce, registered by the op kind they run: all-gather and
reduce-scatter around the ring channels, and all-to-all."""
from __future__ import annotations

from collections.abc import Sequence

from memsim.mapping.collectives import Round, Shape, collective


@collective("allgather")
def ring_allgather(group: Sequence[int], nbytes: int, shape: Shape = Shape()) -> list[Round]:
    """n - 1 rounds; around each ring channel each member forwards one of the n parts of its
    channel's share of the gathered ``nbytes``."""
    n = len(group)
    rings = shape.channels(n)
    part = -(-nbytes // (n * len(rings)))
    one = tuple((group[r[i]], group[r[(i + 1) % n]], part) for r in rings for i in range(n))
    return [one] * (n - 1)


ring_reduce_scatter = collective("reduce_scatter")(ring_allgather)  # the same traffic, reducing on arrival


@collective("alltoall")
def alltoall(group: Sequence[int], nbytes: int, shape: Shape = Shape()) -> list[Round]:
    """n - 1 rounds; in round r member i sends its part for member i + r."""
    n = len(group)
    part = -(-nbytes // n)
    return [tuple((group[i], group[(i + r) % n], part) for i in range(n)) for r in range(1, n)]

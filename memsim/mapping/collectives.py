"""Collectives decomposed into rounds of point-to-point chunk transfers, as pure functions.

A round is a set of transfers (src, dst, bytes) that start together; the next round starts
when the slowest one has arrived. Ring and tree all-reduce, all-gather, reduce-scatter and
all-to-all are provided, plus the textbook costs the algorithm choice and the tests use.
"""
from __future__ import annotations

import math

Round = tuple[tuple[int, int, int], ...]


def ring_allreduce(group: list[int], nbytes: int) -> list[Round]:
    """Reduce-scatter then all-gather around the ring: 2(n-1) rounds of bytes/n per member."""
    n = len(group)
    part = -(-nbytes // n)
    one = tuple((group[i], group[(i + 1) % n], part) for i in range(n))
    return [one] * (2 * (n - 1))


def tree_allreduce(group: list[int], nbytes: int) -> list[Round]:
    """Reduce up a binary tree, then broadcast down it: 2 ceil(log2 n) rounds of the full message."""
    n = len(group)
    rounds: list[Round] = []
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    for k in range(levels):
        step = 1 << k
        rounds.append(tuple((group[i], group[i - step], nbytes) for i in range(n) if i % (2 * step) == step))
    return rounds + [tuple((b, a, x) for a, b, x in r) for r in reversed(rounds)]


def ring_allgather(group: list[int], nbytes: int) -> list[Round]:
    """n-1 rounds; each member forwards one of the n parts of the gathered ``nbytes``."""
    n = len(group)
    part = -(-nbytes // n)
    return [tuple((group[i], group[(i + 1) % n], part) for i in range(n))] * (n - 1)


ring_reduce_scatter = ring_allgather  # the same traffic pattern, with reductions on arrival


def alltoall(group: list[int], nbytes: int) -> list[Round]:
    """n-1 rounds; in round r member i sends its part for member i+r."""
    n = len(group)
    part = -(-nbytes // n)
    return [tuple((group[i], group[(i + r) % n], part) for i in range(n)) for r in range(1, n)]


def ring_cost(n: int, nbytes: int, bw: float, latency_s: float) -> float:
    """Textbook ring all-reduce: 2(n-1)/n x bytes / bandwidth + 2(n-1) latencies."""
    return 2 * (n - 1) * (nbytes / n / bw + latency_s)


def tree_cost(n: int, nbytes: int, bw: float, latency_s: float) -> float:
    return 2 * math.ceil(math.log2(n)) * (nbytes / bw + latency_s) if n > 1 else 0.0


def allreduce(group: list[int], nbytes: int, bw: float, latency_s: float, algorithm: str = "auto") -> list[Round]:
    """All-reduce with the named algorithm, or the cheaper of ring and tree for this size."""
    if len(group) < 2:
        return []
    if algorithm == "auto":
        algorithm = "tree" if tree_cost(len(group), nbytes, bw, latency_s) < ring_cost(
            len(group), nbytes, bw, latency_s) else "ring"
    return (tree_allreduce if algorithm == "tree" else ring_allreduce)(group, nbytes)


COLLECTIVES = {
    "allgather": ring_allgather,
    "reduce_scatter": ring_reduce_scatter,
    "alltoall": alltoall,
}

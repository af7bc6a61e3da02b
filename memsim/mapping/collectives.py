"""Collectives decomposed into rounds of point-to-point chunk transfers, as pure functions.

A round is a set of transfers (src, dst, bytes) that start together; the next round starts
when the slowest one has arrived. All-reduce algorithms register by the name used in YAML
(``system.collective``), each with its rounds and its textbook cost; ``auto`` picks the
cheapest registered one for the message. The other collectives register by op kind.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from memsim.errors import ConfigError

Round = tuple[tuple[int, int, int], ...]
Rounds = Callable[[list[int], int], list[Round]]  # (group, bytes) -> rounds
Cost = Callable[[int, int, float, float], float]  # (members, bytes, bandwidth B/s, latency s) -> seconds

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class AllReduce:
    name: str
    rounds: Rounds
    cost: Cost


ALLREDUCE: dict[str, AllReduce] = {}  # by algorithm name, in registration order
COLLECTIVES: dict[str, Rounds] = {}  # the other collectives, by op kind


def allreduce_algorithm(name: str, cost: Cost) -> Callable[[Rounds], Rounds]:
    def deco(rounds: Rounds) -> Rounds:
        ALLREDUCE[name] = AllReduce(name, rounds, cost)
        return rounds
    return deco


def collective(kind: str) -> Callable[[Rounds], Rounds]:
    def deco(rounds: Rounds) -> Rounds:
        COLLECTIVES[kind] = rounds
        return rounds
    return deco


def algorithms() -> tuple[str, ...]:
    """The names ``system.collective`` accepts."""
    return (AUTO, *ALLREDUCE)


def check_algorithm(name: str) -> None:
    if name not in algorithms():
        raise ConfigError(f"{name!r} is not one of {', '.join(algorithms())}", field="system.collective")


def ring_cost(n: int, nbytes: int, bw: float, latency_s: float) -> float:
    """Textbook ring all-reduce: 2(n-1)/n x bytes / bandwidth + 2(n-1) latencies."""
    return 2 * (n - 1) * (nbytes / n / bw + latency_s)


def tree_cost(n: int, nbytes: int, bw: float, latency_s: float) -> float:
    """Textbook tree all-reduce: 2 ceil(log2 n) x (bytes / bandwidth + latency)."""
    return 2 * math.ceil(math.log2(n)) * (nbytes / bw + latency_s) if n > 1 else 0.0


def _ring_pass(group: list[int], nbytes: int, rounds: int) -> list[Round]:
    """``rounds`` rounds in which each member sends one of n parts of ``nbytes`` to the next."""
    n = len(group)
    part = -(-nbytes // n)
    return [tuple((group[i], group[(i + 1) % n], part) for i in range(n))] * rounds


# Registered first, so that it wins a tie under ``auto``.
@allreduce_algorithm("ring", ring_cost)
def ring_allreduce(group: list[int], nbytes: int) -> list[Round]:
    """Reduce-scatter then all-gather around the ring: 2(n-1) rounds of bytes/n per member."""
    return _ring_pass(group, nbytes, 2 * (len(group) - 1))


@allreduce_algorithm("tree", tree_cost)
def tree_allreduce(group: list[int], nbytes: int) -> list[Round]:
    """Reduce up a binary tree, then broadcast down it: 2 ceil(log2 n) rounds of the full message."""
    n = len(group)
    rounds: list[Round] = []
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    for k in range(levels):
        step = 1 << k
        rounds.append(tuple((group[i], group[i - step], nbytes) for i in range(n) if i % (2 * step) == step))
    return rounds + [tuple((b, a, x) for a, b, x in r) for r in reversed(rounds)]


@collective("allgather")
def ring_allgather(group: list[int], nbytes: int) -> list[Round]:
    """n-1 rounds; each member forwards one of the n parts of the gathered ``nbytes``."""
    return _ring_pass(group, nbytes, len(group) - 1)


ring_reduce_scatter = collective("reduce_scatter")(ring_allgather)  # the same traffic, reducing on arrival


@collective("alltoall")
def alltoall(group: list[int], nbytes: int) -> list[Round]:
    """n-1 rounds; in round r member i sends its part for member i+r."""
    n = len(group)
    part = -(-nbytes // n)
    return [tuple((group[i], group[(i + r) % n], part) for i in range(n)) for r in range(1, n)]


def cheapest(n: int, nbytes: int, bw: float, latency_s: float) -> str:
    """The registered all-reduce algorithm with the lowest textbook cost (the first on a tie)."""
    return min(ALLREDUCE.values(), key=lambda a: a.cost(n, nbytes, bw, latency_s)).name


def resolve(n: int, nbytes: int, bw: float, latency_s: float, algorithm: str = AUTO) -> AllReduce:
    """The named all-reduce algorithm, or with ``auto`` the cheapest for this size."""
    check_algorithm(algorithm)
    return ALLREDUCE[cheapest(n, nbytes, bw, latency_s) if algorithm == AUTO else algorithm]


def allreduce(group: list[int], nbytes: int, bw: float, latency_s: float, algorithm: str = AUTO) -> list[Round]:
    """All-reduce with the named algorithm, or with ``auto`` the cheapest for this size."""
    check_algorithm(algorithm)
    if len(group) < 2:
        return []
    return resolve(len(group), nbytes, bw, latency_s, algorithm).rounds(group, nbytes)

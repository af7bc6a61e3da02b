"""Collectives decomposed into rounds of point-to-point chunk transfers, as pure functions.

A round is a set of transfers (src, dst, bytes) that start together; the next round starts
when the slowest one has arrived. All-reduce algorithms register by the name used in YAML
(``system.collective``), each with its rounds and its cost; ``auto`` picks the cheapest
registered one for the message. The other collectives register by op kind.

An algorithm's cost is what the engine charges for its rounds: the launch of its kernel once,
then every round a step latency (the protocol's handshake with the peer plus the link latency
on every hop of the route) and its slowest transfer's bytes at the achievable bandwidth (the
link's bandwidth times its efficiency).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from memsim.errors import ConfigError

Round = tuple[tuple[int, int, int], ...]
Rounds = Callable[[list[int], int], list[Round]]  # (group, bytes) -> rounds


@dataclass(frozen=True, slots=True)
class LinkCost:
    """What a collective pays over a system's links: ``bandwidth_bytes_per_s`` achievable per
    direction, ``step_s`` every round (protocol latency plus the route's link latencies) and
    ``launch_s`` once (its kernel's launch)."""
    bandwidth_bytes_per_s: float
    step_s: float = 0.0
    launch_s: float = 0.0

    def __post_init__(self) -> None:
        if self.bandwidth_bytes_per_s <= 0 or self.step_s < 0 or self.launch_s < 0:
            raise ValueError(f"a link cost needs a positive bandwidth and no negative latency: {self}")


Cost = Callable[[int, float, LinkCost], float]  # (members, bytes, link) -> seconds

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


def ring_cost(n: int, nbytes: float, link: LinkCost) -> float:
    """Ring all-reduce: launch + 2(n-1) steps of bytes/n each."""
    if n < 2:
        return 0.0
    return link.launch_s + 2 * (n - 1) * (nbytes / n / link.bandwidth_bytes_per_s + link.step_s)


def tree_cost(n: int, nbytes: float, link: LinkCost) -> float:
    """Tree all-reduce: launch + 2 ceil(log2 n) steps of the whole message each."""
    if n < 2:
        return 0.0
    return link.launch_s + 2 * math.ceil(math.log2(n)) * (nbytes / link.bandwidth_bytes_per_s + link.step_s)


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


def cheapest(n: int, nbytes: float, link: LinkCost) -> str:
    """The registered all-reduce algorithm with the lowest cost (the first on a tie)."""
    return min(ALLREDUCE.values(), key=lambda a: a.cost(n, nbytes, link)).name


def resolve(n: int, nbytes: float, link: LinkCost, algorithm: str = AUTO) -> AllReduce:
    """The named all-reduce algorithm, or with ``auto`` the cheapest for this size."""
    check_algorithm(algorithm)
    return ALLREDUCE[cheapest(n, nbytes, link) if algorithm == AUTO else algorithm]


def allreduce(group: list[int], nbytes: int, link: LinkCost, algorithm: str = AUTO) -> list[Round]:
    """All-reduce with the named algorithm, or with ``auto`` the cheapest for this size."""
    check_algorithm(algorithm)
    if len(group) < 2:
        return []
    return resolve(len(group), nbytes, link, algorithm).rounds(group, nbytes)

"""Collectives decomposed into rounds of point-to-point transfers, as pure functions.

A round is a set of transfers (src, dst, bytes) that start together; the next round starts
when the slowest has arrived. All-reduce algorithms register by the name used in YAML
(``system.collective``), one module each in this package; ``auto`` picks the one that costs
least on the system as it is built (``memsim.mapping.fabric``). The other collectives register
by op kind.

An all-reduce is written as rounds of moves of pieces of the buffer between the positions
0..n-1 of its group: a move sends a set of pieces, which the receiver adds to its own (reduce)
or takes (copy). Its transfers are those moves, a piece being ⌈bytes / pieces⌉ bytes. Played on
sets of contributions, the moves show that every member ends with every piece summed over
every member exactly once (tests/mapping/test_collectives.py). ``Shape`` says how the group
sits on the system: the orders of its ring channels, the torus dimensions it spans, its nodes.

Each algorithm also has its textbook cost on a switch, where every pair of chips is one route
apart and a chip's links form one port: the launch once, then every round its step latency
and the bytes a port moves at the achievable bandwidth. On a switch the fabric's cost of the
rounds is exactly this (tests/mapping/test_fabric.py).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memsim.core.errors import ConfigError
from memsim.core.registry import Registry

Round = tuple[tuple[int, int, int], ...]
Pieces = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LinkCost:
    """What a collective pays over a switch's ports: ``bandwidth_bytes_per_s`` achievable per
    direction, ``step_s`` every round (protocol latency plus the route's link latencies) and
    ``launch_s`` once (its kernel's launch, if it has one)."""
    bandwidth_bytes_per_s: float
    step_s: float = 0.0
    launch_s: float = 0.0

    def __post_init__(self) -> None:
        if self.bandwidth_bytes_per_s <= 0 or self.step_s < 0 or self.launch_s < 0:
            raise ValueError(f"a link cost needs a positive bandwidth and no negative latency: {self}")


@dataclass(frozen=True, slots=True)
class Shape:
    """How a group of n members sits on the system. ``rings``: the orders (of positions
    0..n-1) of the ring channels a ring runs at once, over different links where the system has
    them (default: one, in group order); ``dims``: the sizes of the torus dimensions the group
    spans, the last varying fastest (default: one of n); ``node``: members per node, which the
    hierarchical all-reduce works within (default: all, one node); ``barrier``: members that
    read and write each other's buffers directly synchronize when they are done, before any
    reuses its buffers (runtime kernels such as vLLM's custom all-reduce, whose
    ``cross_device_reduce_1stage`` ends with ``barrier_at_end``; a statically scheduled program
    needs none)."""
    rings: tuple[tuple[int, ...], ...] = ()
    dims: tuple[int, ...] = ()
    node: int = 0
    barrier: bool = False

    def channels(self, n: int) -> tuple[tuple[int, ...], ...]:
        return self.rings or (tuple(range(n)),)

    def grid(self, n: int) -> tuple[int, ...]:
        return self.dims or (n,)

    def node_size(self, n: int) -> int:
        return self.node if 0 < self.node < n and n % self.node == 0 else n


@dataclass(frozen=True, slots=True)
class Move:
    """``src`` sends its ``pieces`` to ``dst``, which adds them to its own (``reduce``) or takes them."""
    src: int
    dst: int
    pieces: Pieces
    reduce: bool


Moves = list[list[Move]]
Pattern = tuple[tuple[tuple[int, int, int], ...], ...]  # per round: (sender, receiver, pieces)
Schedule = Callable[[int, Shape], tuple[int, Moves]]  # (members, shape) -> (pieces, rounds of moves)
Cost = Callable[[int, float, LinkCost, Shape], float]  # (members, bytes, switch port, shape) -> seconds
Rounds = Callable[[Sequence[int], int, Shape], list[Round]]  # (group, bytes, shape) -> rounds

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class AllReduce:
    name: str
    schedule: Schedule
    cost: Cost
    general: bool = False  # it becomes a simpler algorithm on a flat system (one torus dimension, one node)

    def moves(self, n: int, shape: Shape = Shape()) -> tuple[int, Moves]:
        """The pieces the buffer is cut into and the rounds of moves among positions 0..n-1."""
        pieces, moves, _ = _schedule(self, n, shape)
        return pieces, moves

    def rounds(self, group: Sequence[int], nbytes: int, shape: Shape = Shape()) -> tuple[Round, ...]:
        """The rounds of transfers among ``group`` for a message of ``nbytes`` (one shared tuple
        for the same arguments: a model's collectives of one size are built once)."""
        return _rounds(self, tuple(group), nbytes, shape)


ALLREDUCE: Registry[AllReduce] = Registry("all-reduce algorithm", field="system.collective", package=__name__)
COLLECTIVES: Registry[Rounds] = Registry("collective", field="kind", package=__name__)  # the others, by op kind
collective = COLLECTIVES.register


def allreduce_algorithm(name: str, cost: Cost, general: bool = False) -> Callable[[Schedule], Schedule]:
    def deco(schedule: Schedule) -> Schedule:
        ALLREDUCE.add(name, AllReduce(name, schedule, cost, general))
        return schedule
    return deco


def algorithms() -> tuple[str, ...]:
    """The names ``system.collective`` accepts."""
    return (AUTO, *ALLREDUCE.names())


def check_algorithm(name: str) -> None:
    if name not in algorithms():
        raise ConfigError(f"{name!r} is not one of {', '.join(algorithms())}", field="system.collective")


@functools.lru_cache(maxsize=1024)
def _schedule(algorithm: AllReduce, n: int, shape: Shape) -> tuple[int, Moves, Pattern]:
    pieces, moves = algorithm.schedule(n, shape)
    return pieces, moves, pattern(moves)


@functools.lru_cache(maxsize=256)
def _rounds(algorithm: AllReduce, group: tuple[int, ...], nbytes: int, shape: Shape) -> tuple[Round, ...]:
    if len(group) < 2:
        return ()
    pieces, _, moved = _schedule(algorithm, len(group), shape)
    return transfers(group, nbytes, pieces, moved)


def transfers(group: Sequence[int], nbytes: int, pieces: int, pattern: Pattern) -> tuple[Round, ...]:
    """Rounds of transfers among ``group`` from a pattern of moves (see ``pattern``), each piece
    ⌈nbytes / pieces⌉ bytes; equal rounds are one tuple."""
    size = -(-nbytes // pieces)
    made: dict[tuple, Round] = {}
    return tuple(made.setdefault(moved, tuple((group[a], group[b], k * size) for a, b, k in moved))
                 for moved in pattern)


def pattern(moves: Moves) -> Pattern:
    """Per round, the moves from one position to another as one transfer: (sender, receiver,
    pieces it carries)."""
    out = []
    for moved in moves:
        sent: dict[tuple[int, int], int] = {}
        for m in moved:
            sent[(m.src, m.dst)] = sent.get((m.src, m.dst), 0) + len(m.pieces)
        out.append(tuple((a, b, k) for (a, b), k in sent.items()))
    return tuple(out)


def split(pieces: Pieces, parts: int) -> list[Pieces]:
    """``pieces`` in ``parts`` consecutive blocks of near-equal size."""
    q, r = divmod(len(pieces), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + q + (i < r)
        out.append(pieces[start:end])
        start = end
    return out


def parallel(*phases: Moves) -> Moves:
    """Phases that run at once on disjoint members or links: their i-th rounds together."""
    rounds = max(map(len, phases), default=0)
    return [[m for phase in phases if i < len(phase) for m in phase[i]] for i in range(rounds)]


def ring_reduce_scatter(order: Sequence[int], pieces: Pieces) -> tuple[Moves, dict[int, Pieces]]:
    """Reduce ``pieces`` around the ring ``order`` (s members): s - 1 rounds in which each member
    adds the block it received to its own and passes a block on; member i ends owning the sum of
    block i + 1. Returns the rounds and what each member owns."""
    s = len(order)
    blocks = split(pieces, s)
    moves = [[Move(order[i], order[(i + 1) % s], blocks[(i - t) % s], True) for i in range(s)] for t in range(s - 1)]
    return moves, {order[i]: blocks[(i + 1) % s] for i in range(s)}


def ring_all_gather(order: Sequence[int], owned: dict[int, Pieces]) -> Moves:
    """Pass each member's owned block around the ring ``order`` until every member has all: s - 1 rounds."""
    s = len(order)
    return [[Move(order[i], order[(i + 1) % s], owned[order[(i - t) % s]], False) for i in range(s)]
            for t in range(s - 1)]


def direct_reduce_scatter(members: Sequence[int], pieces: Pieces) -> tuple[Moves, dict[int, Pieces]]:
    """One round: each member sends block j of ``pieces`` to member j, which sums them."""
    if len(members) < 2:
        return [], {m: pieces for m in members}
    blocks = split(pieces, len(members))
    moves = [[Move(a, b, blocks[j], True) for a in members for j, b in enumerate(members) if a != b]]
    return moves, {b: blocks[j] for j, b in enumerate(members)}


def barrier(n: int, shape: Shape) -> Moves:
    """A round of flags among all n members (no bytes), where the shape asks for one."""
    if not shape.barrier or n < 2:
        return []
    return [[Move(a, b, (), False) for a in range(n) for b in range(n) if a != b]]


def direct_all_gather(members: Sequence[int], owned: dict[int, Pieces]) -> Moves:
    """One round: each member sends its owned block to every other member."""
    if len(members) < 2:
        return []
    return [[Move(b, a, owned[b], False) for b in members for a in members if a != b]]

"""The system as it is built, and what a collective's rounds cost on it.

A ``Fabric`` is the topology's graph over a run's chips with ``system.link``'s physical links
on its edges: an edge bundling k parallel links moves k times one link's bandwidth each way,
at the link's efficiency. It routes transfers and costs rounds exactly as the engine runs them
(``memsim.engine.system``): every transfer of a round asks every link direction on its route at
once, each direction serves its transfers one after another in the order asked, and a transfer
arrives when its last link has finished plus one link latency per hop and the protocol's step
latency; the next round starts when the last transfer of this one has arrived. So a round costs
about its busiest link direction's bytes over that direction's bandwidth plus the longest
route's latencies. ``auto`` runs the all-reduce algorithm that costs least here, as NCCL's
tuner picks by its cost model.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

from memsim.core.errors import ConfigError
from memsim.core.units import PS_PER_S, transfer_ps
from memsim.hardware import topologies
from memsim.hardware.spec import ChipSpec
from memsim.mapping import collectives
from memsim.mapping.collectives.channels import disjoint_rings, grid_ring

Edge = topologies.Edge


def wiring(chip: ChipSpec) -> topologies.Wiring:
    link, system = interconnect(chip), chip.system
    return topologies.Wiring(link.count, system.links_per_peer, system.group, system.global_links)


def interconnect(chip: ChipSpec):
    link = chip.interconnect
    if link is None:
        raise ConfigError("a multi-chip run needs a link between chips", field="links")
    return link


class Fabric:
    """The chips of a run joined by ``system.topology``: routes, link directions with their
    bandwidths, and the cost of rounds of transfers on them."""

    def __init__(self, chip: ChipSpec, chips: int) -> None:
        link = interconnect(chip)
        self.chips, self.link, self.system = chips, link, chip.system
        self.kernel = chip.execution.collective_launch == "kernel"
        self.topology = topologies.TOPOLOGIES.get(chip.system.topology)
        self.graph = self.topology.build(chips, wiring(chip))
        self.links: dict[Edge, int] = {(a, b): d["links"] for a, b, d in self.graph.edges(data=True)}
        self.rate = {e: link.achievable(k) for e, k in self.links.items()}  # achievable bytes/s each way
        self.peak = {e: k * link.bandwidth_bytes_per_s for e, k in self.links.items()}
        self.launch_ps = chip.execution.collective_launch_ps
        self._routes: dict[tuple[int, int], tuple[Edge, ...]] = {}
        self._paths: dict[tuple[int, int], tuple[tuple[tuple[Edge, int], ...], int]] = {}  # (edge, rate)s, latency
        self._costs: dict[tuple, float] = {}
        self._cheapest: dict[tuple, str] = {}
        self._shapes: dict[tuple[int, ...], collectives.Shape] = {}

    def route(self, src: int, dst: int) -> tuple[Edge, ...]:
        key = (src, dst)
        if key not in self._routes:
            self._routes[key] = tuple(self.topology.route(self.graph, src, dst))
        return self._routes[key]

    def latency_ps(self, src: int, dst: int, step_ps: int = -1) -> int:
        """What a transfer between chips pays besides its bytes: the protocol's step latency (the
        chip's ``system.step_latency``, or ``step_ps`` where a library's protocol sets its own) and
        the link latency of every hop."""
        step = self.system.step_latency_ps if step_ps < 0 else step_ps
        return step + len(self.route(src, dst)) * self.link.latency_ps

    def round_ps(self, transfers: Sequence[tuple[int, int, int]], step_ps: int = -1, channel_rate: int = 0) -> int:
        """How long a round takes on idle links, as the engine runs it (a rank's transfers no sooner
        than what it sends in the round at a library's ``channel_rate``, where it has one)."""
        free: dict[Edge, int] = {}
        paths = self._paths
        took: dict[tuple[int, int], int] = {}  # (bytes, rate) -> ps, as few as the round's sizes
        floors = channel_floors(transfers, channel_rate)
        end = 0
        for src, dst, nbytes in transfers:
            path = paths.get((src, dst))
            if path is None:
                path = paths[src, dst] = (tuple((e, self.rate[e]) for e in self.route(src, dst)),
                                          self.latency_ps(src, dst, 0))
            done = floors.get(src, 0)
            for edge, rate in path[0]:
                ps = took.get((nbytes, rate))
                if ps is None:
                    ps = took[nbytes, rate] = transfer_ps(nbytes, rate)
                free[edge] = busy = free.get(edge, 0) + ps
                if busy > done:
                    done = busy
            latency = path[1] + (self.system.step_latency_ps if step_ps < 0 else step_ps)
            if done + latency > end:
                end = done + latency
        return end

    def seconds(self, rounds: Sequence[Sequence[tuple[int, int, int]]], launch: bool = True, step_ps: int = -1,
                channel_rate: int = 0) -> float:
        """Rounds one after another, and the launch once (if ``launch`` and the chip pays one);
        ``step_ps``: a library protocol's latency a round in place of the chip's; ``channel_rate``:
        what the library's channels carry a second (0: no limit)."""
        each: dict[int, int] = {}  # a round repeated as one tuple (a ring's) is costed once
        total = sum(each[id(r)] if id(r) in each else each.setdefault(id(r), self.round_ps(r, step_ps, channel_rate))
                    for r in rounds)
        return (total + (self.launch_ps if launch and rounds else 0)) / PS_PER_S

    def shape(self, group: Sequence[int]) -> collectives.Shape:
        """How ``group`` sits on the system: ring channels that share no link where its members
        are fully connected (both directions of a ring where they form one, or where a 2D grid
        of them holds one through neighbours, ``channels.grid_ring``), the torus
        dimensions it spans on a grid, its nodes (``system.group``), and whether its direct
        algorithms end with a barrier."""
        key = tuple(group)
        if key not in self._shapes:
            self._shapes[key] = self._shape(key)
        return self._shapes[key]

    def _shape(self, group: tuple[int, ...]) -> collectives.Shape:
        n = len(group)
        rings: tuple[tuple[int, ...], ...] = ()
        if n > 2 and all((a, b) in self.links for a in group for b in group if a != b):
            rings = disjoint_rings(n)
        elif n > 2 and all((group[i], group[(i + 1) % n]) in self.links for i in range(n)):
            rings = (tuple(range(n)), tuple(range(n))[::-1])
        elif n > 2 and (snake := grid_ring(self._dims(group))) is not None and \
                all((group[snake[i]], group[snake[(i + 1) % n]]) in self.links for i in range(n)):
            rings = (snake, snake[::-1])  # a ring laid on a mesh as a path through neighbours: one hop a round
        # A runtime kernel synchronizes its members with flags; a compiled program is scheduled.
        return collectives.Shape(rings, self._dims(group), self.system.group, self.kernel)

    def _dims(self, group: Sequence[int]) -> tuple[int, ...]:
        """The grid dimensions a group of consecutive chips fills, whole dimensions from the
        fastest-varying one (``()``: not a grid)."""
        if self.topology.dims is None or group[0] % len(group):
            return ()
        out: list[int] = []
        left = len(group)
        for size in reversed(self.topology.dims(self.chips)):
            if left % size:
                break
            out.insert(0, size)
            left //= size
        if left > 1:
            out.insert(0, left)
        return tuple(d for d in out if d > 1) if math.prod(out) == len(group) else ()

    def algorithm(self, group: Sequence[int], nbytes: int, name: str = collectives.AUTO) -> collectives.AllReduce:
        """The named all-reduce, or with ``auto`` the one that costs least here."""
        collectives.check_algorithm(name)
        return collectives.ALLREDUCE[self.cheapest(group, nbytes) if name == collectives.AUTO else name]

    def allreduce(self, group: Sequence[int], nbytes: int, algorithm: str = collectives.AUTO
                  ) -> tuple[collectives.AllReduce, tuple[collectives.Round, ...]]:
        """The named all-reduce, or with ``auto`` the one that costs least here, and its rounds."""
        chosen = self.algorithm(group, nbytes, algorithm)
        return chosen, chosen.rounds(group, nbytes, self.shape(group))

    def cost(self, algorithm: str, group: Sequence[int], nbytes: int, launch: bool = True) -> float:
        """Seconds the named all-reduce of ``nbytes`` over ``group`` takes here."""
        key = (algorithm, tuple(group), nbytes, launch)
        if key not in self._costs:
            rounds = collectives.ALLREDUCE[algorithm].rounds(group, nbytes, self.shape(group))
            self._costs[key] = self.seconds(rounds, launch)
        return self._costs[key]

    def cheapest(self, group: Sequence[int], nbytes: int) -> str:
        """The registered all-reduce that costs least on this system; on a tie, the one of fewest
        transfers, then the simpler (a torus of one dimension is a ring), then by name."""
        key = (tuple(group), nbytes)
        if key not in self._cheapest:
            shape = self.shape(group)
            ranked = []
            for name, a in collectives.ALLREDUCE.items():
                transfers = sum(map(len, a.rounds(group, nbytes, shape)))
                ranked.append((self.cost(name, group, nbytes), transfers, a.general, name))
            self._cheapest[key] = min(ranked)[-1]
        return self._cheapest[key]

    def allreduce_seconds(self, group: Sequence[int], nbytes: int, algorithm: str = collectives.AUTO,
                          launch: bool = True) -> float:
        return self.cost(self.algorithm(group, nbytes, algorithm).name, group, nbytes, launch)


def channel_floors(transfers: Sequence[tuple[int, int, int]], channel_rate: int) -> dict[int, int]:
    """Per sender of a round: the least time its transfers take when its library's channels carry
    ``channel_rate`` bytes a second in all (empty: no limit)."""
    if not channel_rate:
        return {}
    sent: dict[int, int] = {}
    for src, _, nbytes in transfers:
        sent[src] = sent.get(src, 0) + nbytes
    return {src: transfer_ps(n, channel_rate) for src, n in sent.items()}


def fabric(chip: ChipSpec, chips: int) -> Fabric:
    """The fabric of ``chips`` chips of ``chip``'s system, built once for all chips that share
    its links, system and collective launch (a sensitivity rerun of a memory level's value
    reuses its routes and costs)."""
    execution = chip.execution
    key = (chip.interconnect, chip.system, execution.collective_launch, execution.collective_launch_ps, chips)
    built = _BUILT.get(key)
    if built is None:
        built = _BUILT[key] = Fabric(chip, chips)
        if len(_BUILT) > 32:
            _BUILT.popitem(last=False)
    _BUILT.move_to_end(key)
    return built


_BUILT: OrderedDict[tuple, Fabric] = OrderedDict()  # the fabrics used last

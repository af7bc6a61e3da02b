"""Multi-chip mapping: pipeline stages, stage-to-stage sends and collectives as link rounds.

The DAG describes one tensor-parallel rank. Ranks of a stage run identical shards, so the
plan runs each stage's ops on its first rank's chip; collectives are expanded into rounds
of point-to-point transfers among all ranks, which the engine routes over the topology.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from memsim.core.units import PS_PER_S
from memsim.hardware import topologies
from memsim.hardware.resource import SYSTEM, Ref, ResourceId
from memsim.hardware.spec import ChipSpec
from memsim.mapping import collectives, fabric, overlap
from memsim.mapping.collectives import Round, scatter_gather
from memsim.mapping.plan import COMM, OpTask, unit_chip
from memsim.mapping.roofline import Bound
from memsim.stack.spec import SYSTEM_ALGORITHM, CollectiveImpl
from memsim.workload.graph import Op, OpGraph

if TYPE_CHECKING:
    from memsim.mapping.lower import Context


def _link(chip: ChipSpec):
    return fabric.interconnect(chip)


def link_cost(chip: ChipSpec) -> collectives.LinkCost:
    """The port the textbook costs assume (``collectives``): every link of the chip into one
    switch port at its achievable bandwidth; every step the protocol latency and the link's
    latency on every hop between neighbours of the topology; and once the collective's launch."""
    link = _link(chip)
    hops = topologies.TOPOLOGIES.get(chip.system.topology).transfer_hops * link.latency_ps
    return collectives.LinkCost(link.effective_bandwidth, (chip.system.step_latency_ps + hops) / PS_PER_S,
                                chip.execution.collective_launch_ps / PS_PER_S)


def allreduce_seconds(chip: ChipSpec, members: int, nbytes: int, algorithm: str | None = None) -> float:
    """What an all-reduce of ``nbytes`` over ``members`` chips of ``chip``'s system costs with
    ``algorithm`` (default: the preset's ``system.collective``), as the engine runs it on the
    system as built (``memsim.mapping.fabric``)."""
    return fabric.fabric(chip, members).allreduce_seconds(range(members), nbytes, algorithm or chip.system.collective)


def library(cx: Context, kind: str, nbytes: int, members: Sequence[int], system: fabric.Fabric
            ) -> CollectiveImpl | None:
    """The stack's implementation that runs a ``kind`` collective of ``nbytes`` over ``members``
    (None: the stack has none for it, and the chip's own algorithm runs at the hardware's cost):
    of those of the lowest tier whose limits admit it, the one that finishes soonest here, as a
    library's tuner picks by its cost model."""
    impls = cx.stack.collective(kind, nbytes, len(members))
    if len(impls) < 2:
        return impls[0] if impls else None
    return min(impls, key=lambda c: (implementation_seconds(cx.chip, c, kind, nbytes, members, system), c.name))


def implementation_seconds(chip: ChipSpec, impl: CollectiveImpl, kind: str, nbytes: int, members: Sequence[int],
                           system: fabric.Fabric) -> float:
    """What ``impl`` takes for the collective on idle links: its call, and its rounds at its
    protocol's step latency with the wire's bytes (the chip's launch is the same whichever runs)."""
    wire = wire_bytes(nbytes, impl.efficiency)
    rounds = _rounds(chip, kind, members, wire, system, impl.algorithm)
    pieces = _pieces(chip, kind, members, wire, system, impl.algorithm)
    return impl.call_ps / PS_PER_S + system.seconds(rounds, launch=False, step_ps=_step(impl),
                                                    channel_rate=channel_rate(impl, wire, pieces, rounds))


def channel_rate(impl: CollectiveImpl, wire: int, pieces: int, rounds: Sequence[collectives.Round]) -> int:
    """What ``impl``'s channels carry a second for a message of ``wire`` bytes on the wire in ``pieces``
    over ``rounds`` (0: no limit); the peers a member sends to are counted only where a channel is a route."""
    routes = peers(rounds) if impl.channel == "routes" and impl.channel_bandwidth else 0
    return impl.channel_rate(whole_transfers(wire, pieces, rounds), routes)


def peers(rounds: Sequence[collectives.Round]) -> int:
    """The most peers one member sends to in any of ``rounds`` (what bounds a library whose channels
    are routes)."""
    most, seen = 0, set()
    for r in rounds:
        if id(r) in seen:
            continue
        seen.add(id(r))
        sends: dict[int, set[int]] = {}
        for src, dst, _ in r:
            sends.setdefault(src, set()).add(dst)
        most = max(most, max(map(len, sends.values()), default=0))
    return most


def whole_transfers(nbytes: int, pieces: int, rounds: Sequence[collectives.Round]) -> int:
    """A message as its rounds' transfers carry it: whole transfers of the largest one's bytes (its
    ``pieces`` where it has no rounds). What a library's channels are counted on, so that a transfer's
    bytes and the channels that carry it grow together and more bytes never take less time (a ring
    in both directions cuts a message into twice its members' pieces)."""
    biggest = max((b for r in rounds for _, _, b in r), default=0)
    if not biggest:
        return -(-nbytes // pieces) * pieces
    return -(-nbytes // biggest) * biggest


def _pieces(chip: ChipSpec, kind: str, members: Sequence[int], nbytes: int, system: fabric.Fabric,
            algorithm: str = SYSTEM_ALGORITHM) -> int:
    if kind != "allreduce":
        return len(members)
    return system.algorithm(members, nbytes, _algorithm(chip, algorithm)).moves(len(members), system.shape(members))[0]


def _step(impl: CollectiveImpl | None) -> int:
    """An implementation's protocol latency a round (-1: the chip's ``system.step_latency``)."""
    return impl.step_ps if impl is not None and impl.step_ps is not None else -1


def wire_bytes(nbytes: int, efficiency: float) -> int:
    """What a protocol that carries ``efficiency`` of payload a byte puts on the wire for ``nbytes``."""
    return nbytes if efficiency >= 1 else math.ceil(nbytes / efficiency)


def _algorithm(chip: ChipSpec, name: str) -> str:
    return chip.system.collective if name == SYSTEM_ALGORITHM else name


def _rounds(chip: ChipSpec, kind: str, members: Sequence[int], nbytes: int, system: fabric.Fabric,
            algorithm: str = SYSTEM_ALGORITHM) -> Sequence[collectives.Round]:
    """The rounds of a whole collective among ``members`` (chips) for costing."""
    shape = system.shape(members)
    if kind == "allreduce":
        return system.algorithm(members, nbytes, _algorithm(chip, algorithm)).rounds(members, nbytes, shape)
    return collectives.COLLECTIVES[kind](members, nbytes, shape)


def collective_tasks(op: Op, cx: Context, stage: int, tp: int, deps: list[tuple[str, ...]],
                     names: list[str], chips: int, regions: int = 1) -> list[OpTask]:
    """The collective ``op`` as one task, or as ``len(names)`` chunks of its message on the comm
    stream, chunk i waiting for ``deps[i]``; the launch (where a collective pays one) and the
    library's call are paid once. An all-reduce's chunks run the algorithm the whole message would,
    so they move the same bytes over every link as the whole. The stack's collective library
    (``StackSpec.collectives``) picks the implementation: its algorithm, its protocol's latency a
    round and the bytes its protocol puts on the wire. ``chips`` is the system's size."""
    chip = cx.chip
    link = _link(chip)
    group = [stage * tp + r for r in range(tp)]
    system = fabric.fabric(chip, chips)
    members = [unit_chip(u, tp, regions) for u in group]
    nbytes = op.dim("bytes")
    shape = system.shape(members)
    impl = library(cx, op.kind, nbytes, members, system) if tp > 1 else None
    name = _algorithm(chip, impl.algorithm) if impl is not None else chip.system.collective
    efficiency = impl.efficiency if impl is not None else 1.0
    algorithm = None
    if op.kind == "allreduce" and tp > 1:
        algorithm = system.algorithm(members, nbytes, name)
    pieces = algorithm.moves(tp, shape)[0] if algorithm is not None else tp
    kernel = chip.execution.collective_launch == "kernel"
    device = cx.dispatch.device_ps if kernel else 0
    host = cx.dispatch.host_ps + (impl.host_ps if impl is not None else 0) if kernel and cx.dispatch.host_ps else 0
    tasks = []
    for i, (task_name, size, flops) in enumerate(zip(names, overlap.chunk_bytes(nbytes, len(names), pieces),
                                                     overlap.split(op.flops, len(names)))):
        rounds: Sequence[collectives.Round]
        wire = wire_bytes(size, efficiency)
        if algorithm is not None:
            rounds = algorithm.rounds(group, wire, shape)
        elif op.kind == "allreduce":
            rounds = []
        else:
            rounds = collectives.COLLECTIVES[op.kind](group, wire, shape)
        first = i == 0
        tasks.append(OpTask(op=task_name, kind=op.kind, layer=op.layer, flops=flops,
                            overhead_ps=device if first else 0, host_ps=host if first else 0,
                            library_ps=impl.call_ps if first and impl is not None else 0,
                            step_ps=_step(impl),
                            channel_rate=channel_rate(impl, wire_bytes(nbytes, efficiency), pieces, rounds)
                            if impl is not None else 0,
                            steps=(), deps=deps[i],
                            bound=Ref.link(link.name), chip=stage * tp, rounds=tuple(rounds), stream=COMM,
                            graph_op=op.name))
    return tasks


def overlap_chunks(op: Op, chip: ChipSpec, tp: int, gemm_s: float, chips: int) -> int:
    """How many chunks the all-reduce ``op`` and the GEMM of ``gemm_s`` before it are cut into
    (at most ``execution.comm_overlap``; 1: neither is cut), by what the chunks cost on the
    system of ``chips`` chips."""
    nbytes = op.dim("bytes")
    if op.kind != "allreduce" or tp < 2:
        return 1
    system = fabric.fabric(chip, chips)
    group = list(range(tp))
    algorithm = system.algorithm(group, nbytes, chip.system.collective)
    limit = min(chip.execution.comm_overlap, -(-nbytes // algorithm.moves(tp, system.shape(group))[0]))
    if limit < 2:
        return 1
    # The chunks are one kernel: the first pays the launch, as in the engine.
    return overlap.chunk_count(limit, gemm_s,
                               lambda k: system.cost(algorithm.name, group, -(-nbytes // k), launch=False))


def send_task(last: Op, graph: OpGraph, chip: ChipSpec, src: int, dst: int, tp: int, dep: str,
              suffix: str = "", chips: int = 0) -> OpTask:
    """The activation from stage ``src`` to stage ``dst``: each rank sends it whole to its
    counterpart, or (tensor-parallel stages of whole chips) its slice, which the next stage
    all-gathers (``collectives.scatter_gather``), whichever the system of ``chips`` chips
    carries sooner."""
    link = _link(chip)
    return OpTask(op=f"send.stage{src}-{dst}{suffix}", kind="sendrecv", layer=last.layer, flops=0, overhead_ps=0,
                  steps=(), deps=(dep,), bound=Ref.link(link.name), chip=src * tp,
                  rounds=hop_rounds(chip, chips, src, dst, tp, graph.tensors[last.outputs[0]].bytes), stream=COMM)


@functools.lru_cache(maxsize=256)
def hop_rounds(chip: ChipSpec, chips: int, src: int, dst: int, tp: int, nbytes: int) -> tuple[Round, ...]:
    """The rounds of the hop from stage ``src`` to stage ``dst`` (``send_task``); on a tie the
    whole sends (fewest rounds). One tuple for the same arguments: the engine plays it once."""
    a, b = [src * tp + r for r in range(tp)], [dst * tp + r for r in range(tp)]
    best = scatter_gather.whole(a, b, nbytes)
    if tp < 2 or chips < 2 or chip.interconnect is None:
        return best
    system = fabric.fabric(chip, chips)
    least = system.seconds(best, launch=False)
    for moves in scatter_gather.gathers(tp, system.shape(b)).values():
        rounds = scatter_gather.scatter_gather(a, b, nbytes, moves)
        seconds = system.seconds(rounds, launch=False)
        if seconds < least:
            best, least = rounds, seconds
    return best


def region_link(chip: ChipSpec):
    """The link a layer-pipelined chip hands activations between its regions over."""
    if chip.execution.fabric:
        return chip.link(chip.execution.fabric)
    return _link(chip)


class Routes:
    """The routes of transfers between units (chips, or regions of chips) over the system's
    topology, and the least time a transfer takes on one. A route is the link directions it
    crosses, each (between regions of one chip?, from, to). A plan's routes are worked out once
    (``Plan.routes``): the roofline costs them and the engine gives each direction its link."""

    def __init__(self, chip: ChipSpec, chips: int, regions: int, tp: int) -> None:
        self.chip, self.regions, self.tp = chip, regions, tp
        self.fabric = fabric.fabric(chip, chips) if chips > 1 else None
        self._least: dict[tuple[int, int], tuple[int, float]] = {}  # (narrowest peak, latency s) of a route
        self._routes: dict[tuple[int, int], tuple[Direction, ...]] = {}

    def directions(self, src: int, dst: int) -> tuple[Direction, ...]:
        """The link directions a transfer between two units crosses."""
        key = (src, dst)
        if key not in self._routes:
            a, b = unit_chip(src, self.tp, self.regions), unit_chip(dst, self.tp, self.regions)
            if a == b:
                self._routes[key] = ((True, src, dst),)
            else:
                assert self.fabric is not None
                self._routes[key] = tuple((False, x, y) for x, y in self.fabric.route(a, b))
        return self._routes[key]

    def link(self, direction: Direction):
        """The link a direction belongs to: a chip's region link or the one between chips."""
        return region_link(self.chip) if direction[0] else self.chip.interconnect

    def peak(self, direction: Direction) -> int:
        """A direction's peak bandwidth: a region link's, or the parallel links of a cable between chips."""
        region, a, b = direction
        if region:
            return region_link(self.chip).peak_bandwidth
        assert self.fabric is not None
        return self.fabric.peak[(a, b)]

    def resource(self, direction: Direction) -> ResourceId:
        """The direction as the engine's resource (``link:nvlink[0>sw]`` in outputs)."""
        return Ref.link(self.link(direction).name).on(SYSTEM, direction[1:])

    def seconds(self, src: int, dst: int, nbytes: int, step_ps: int = -1) -> float:
        """The least time of a transfer: its bytes at the peak bandwidth of the narrowest cable
        on its route, plus the link's latency on every hop of the route and, between chips, the
        protocol's step latency (``step_ps``: a library protocol's, in place of the chip's)."""
        key = (src, dst)
        if key not in self._least:
            route = self.directions(src, dst)
            latency = len(route) * self.link(route[0]).latency_ps
            self._least[key] = (min(self.peak(d) for d in route), latency / PS_PER_S)
        peak, latency_s = self._least[key]
        return nbytes / peak + latency_s + self.step_latency_ps(src, dst, step_ps) / PS_PER_S

    def step_latency_ps(self, src: int, dst: int, step_ps: int = -1) -> int:
        """The protocol latency a transfer pays: between chips only (regions of a chip hand
        activations over its fabric without a handshake); the chip's, or ``step_ps`` where set."""
        same = unit_chip(src, self.tp, self.regions) == unit_chip(dst, self.tp, self.regions)
        return 0 if same else self.chip.system.step_latency_ps if step_ps < 0 else step_ps


Direction = tuple[bool, Hashable, Hashable]  # (between regions of one chip?, from, to)


def link_bytes(tasks: list[OpTask], routes: Routes) -> dict[Bound, tuple[int, int]]:
    """Every link direction's traffic for the roofline: (bytes, bandwidth) per direction of each
    link between chips (and between a chip's regions), and of each chip link a step moves bytes
    over (a wafer's fabric), for the chip that moves the most."""
    chip = routes.chip
    out: dict[Bound, tuple[int, int]] = {}
    edges: dict[Direction, int] = {}
    for transfers, times in _counted(r for t in tasks for r in t.rounds):  # a round shared by tasks: walked once
        for src, dst, nbytes in transfers:
            for direction in routes.directions(src, dst):
                edges[direction] = edges.get(direction, 0) + nbytes * times
    for direction, nbytes in edges.items():
        out[routes.resource(direction)] = (nbytes, routes.peak(direction))
    per_chip: dict[tuple[int, str], int] = {}
    for t in tasks:
        for step in t.steps:
            for ref, nbytes in step.total_loads + step.total_stores:
                if ref.is_link:
                    per_chip[(t.chip, ref.name)] = per_chip.get((t.chip, ref.name), 0) + nbytes
    for (_, name), nbytes in per_chip.items():  # the busiest chip's share of each chip link
        if nbytes > out.get(Ref.link(name), (0, 0))[0]:
            out[Ref.link(name)] = (nbytes, chip.link(name).peak_bandwidth)
    return out


def hop_seconds(tasks: list[OpTask], routes: Routes) -> dict[int, float]:
    """Per pipeline stage: the least time its send to the next stage takes."""
    tp = routes.tp
    out: dict[int, float] = {}
    for t in tasks:
        if t.kind != "sendrecv":
            continue
        stage = t.rounds[0][0][0] // tp
        seconds = sum(max(routes.seconds(a, b, n) for a, b, n in r) for r in t.rounds if r)
        out[stage] = max(out.get(stage, 0.0), seconds)
    return out


def collective_seconds(tasks: list[OpTask], routes: Routes) -> dict[tuple[int, int], float]:
    """Per (pipeline stage, micro-batch): the least time of its collectives, one after another
    (each round as long as its slowest transfer). A collective cut into chunks counts as the
    whole: any schedule may run it uncut and pay its latencies once."""
    if routes.chip.interconnect is None:
        return {}
    tp = routes.tp
    out: dict[tuple[int, int], float] = {}
    least: dict[tuple[int, ...], float] = {}  # by the chunks' rounds: equal collectives are costed once
    shared: dict[tuple[int, int], tuple[tuple, float]] = {}  # by round tuple (kept): a repeated round is costed once

    def slowest(transfers, step: int) -> float:
        return max(routes.seconds(a, b, n, step) for a, b, n in transfers)

    def slowest_shared(transfers: tuple, step: int) -> float:
        if (id(transfers), step) not in shared:
            shared[(id(transfers), step)] = (transfers, slowest(transfers, step))
        return shared[(id(transfers), step)][1]

    for (_, unit, microbatch), (step, parts) in _collective_parts(tasks).items():
        ids = (*map(id, parts), step)
        if ids not in least:
            least[ids] = sum(slowest_shared(r, step) for r in parts[0]) if len(parts) == 1 else \
                sum(slowest(r, step) for r in _whole(parts))
        key = (unit // tp, microbatch)
        out[key] = out.get(key, 0.0) + least[ids]
    return out


def _collective_parts(tasks: list[OpTask]) -> dict[tuple[str, int, int], tuple[int, list[tuple]]]:
    """Each collective's protocol step latency and its chunks' rounds by (operator, chip, micro-batch)."""
    out: dict[tuple[str, int, int], tuple[int, list[tuple]]] = {}
    for t in tasks:
        if t.kind != "sendrecv" and t.rounds:
            out.setdefault((t.graph_op or t.op, t.chip, t.microbatch), (t.step_ps, []))[1].append(t.rounds)
    return out


def _whole(parts: list[tuple]) -> list[list[tuple[int, int, int]]]:
    """A collective's rounds, its chunks' bytes summed transfer by transfer (they run the same
    algorithm) into the whole message's."""
    acc = [list(r) for r in parts[0]]
    for rounds in parts[1:]:
        acc = [[(a, b, n + m) for (a, b, n), (_, _, m) in zip(x, r)] for x, r in zip(acc, rounds)]
    return acc


def _counted(rounds) -> list[tuple[tuple, int]]:
    """Distinct round objects (one shared tuple is one round however many tasks hold it) with
    how often each occurs."""
    seen: dict[int, list] = {}
    for r in rounds:
        entry = seen.get(id(r))
        if entry is None:
            seen[id(r)] = [r, 1]
        else:
            entry[1] += 1
    return [(r, k) for r, k in seen.values()]



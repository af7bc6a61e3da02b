"""The plan an engine executes: per operator, a sequence of pipelined steps of identical chunks.

A ``Step`` is ``count`` identical chunks. Each chunk loads bytes from memory levels into
SRAM buffers, computes, and stores its share of the output. A chunk holds each level for its
share of the time the ``total_*`` bytes take (the totals are also what is accounted); the
per-chunk sizes, rounded up, describe a chunk's buffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING

from memsim.hardware.rates import WHOLE, Share
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.roofline import Bound
from memsim.stack.spec import IDEAL, StackSpec

if TYPE_CHECKING:
    from memsim.mapping.dispatch import HostPlan
    from memsim.mapping.system import Routes

COMPUTE, COPY, COMM, BRANCH = "compute", "copy", "comm", "branch"  # the streams a task can be issued on


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    label: str
    count: int  # identical chunks
    loads: tuple[tuple[Ref, int], ...]  # (level or link, bytes per chunk)
    stores: tuple[tuple[Ref, int], ...]  # (level or link, bytes per chunk)
    compute_ps: int  # per chunk
    flops: int  # total over all chunks
    depth: int  # SRAM buffers for loads (2 = double buffering)
    sram_bytes: int  # SRAM working set while this step runs
    total_loads: tuple[tuple[Ref, int], ...]
    total_stores: tuple[tuple[Ref, int], ...]
    tile: tuple[tuple[str, int], ...] = ()  # tile shape, for reports
    unpack_ps: int = 0  # per chunk: dequantising the loaded weights, serial with the load stream
    share: Share = WHOLE  # of each level's channels this step may use (a wafer region's share)
    direct: bool = False  # a copy between levels (DMA staging): SRAM is only the bounce buffer
    compute_fj: int = 0  # total over all chunks: the dynamic energy of the step's FLOPs (femtojoules)
    unpack_fj: int = 0  # total over all chunks: the dynamic energy of dequantising its weights
    throttle_ps: int = 0  # per chunk: the part of ``compute_ps`` the clock lowered under the power cap adds (``mapping.power``)
    feed_ps: int = 0  # per chunk: the part of ``compute_ps`` the matrix units wait for operands from SRAM (``lower.feed_ps``)
    # When nonzero, the latency the step's loads pay once in place of their levels' and links' own: a
    # wafer fabric traversal's, which depends on its region and vector (``mapping.mesh``).
    latency_ps: int = 0
    # Steps key the lowering caches and replay's memos: their hash (a share's is costly) is worked
    # out the first time it is asked for, and kept.
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(_step_values(self))
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other: object) -> bool:
        # Equal steps are mostly distinct objects (each layer's operator lowers to its own): their kept hashes
        # tell most unequal ones apart before any field is compared.
        if self is other:
            return True
        if type(other) is not Step:
            return NotImplemented
        return hash(self) == hash(other) and _step_values(self) == _step_values(other)

    def __reduce__(self):  # rebuilt where unpickled: a string's hash differs between processes
        return _step, (tuple((name, getattr(self, name)) for name in _STEP_FIELDS),)


_STEP_FIELDS = tuple(f.name for f in fields(Step) if f.compare)
_step_values = attrgetter(*_STEP_FIELDS)  # a step's compared fields, as one tuple


def _step(values: tuple[tuple[str, object], ...]) -> Step:
    return Step(**dict(values))  # type: ignore[arg-type]  # the fields of a Step, as __reduce__ gave them


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTask:
    op: str
    kind: str
    layer: int
    flops: int
    overhead_ps: int
    steps: tuple[Step, ...]
    deps: tuple[str, ...]
    bound: Ref | None  # analytic: the limiting level or link, None when compute bounds it
    chip: int = 0  # the chip that runs it (the first rank of its pipeline stage)
    rounds: tuple[tuple[tuple[int, int, int], ...], ...] = ()  # a collective: rounds of (src, dst, bytes)
    stream: str = COMPUTE  # the chip's stream it is issued on, in plan order
    graph_op: str = ""  # the operator of the step's graph it runs (empty for a send between stages)
    microbatch: int = 0
    acquires: int = 0  # bytes of the chip's SRAM staging area a prefetch takes before it starts
    releases: int = 0  # bytes of it the operator that used the prefetched weights gives back when done
    # Per level, the bytes of its lowering that SRAM capacity added (``lower.capacity_bytes``); the
    # rest of what it moves is compulsory. A copy, send or collective moves each byte once: none.
    capacity: tuple[tuple[Ref, int], ...] = ()
    # The host's work to issue it (its launch call; a collective's library call), which a host that
    # runs ahead overlaps with the kernels before it (``Plan.host``) and a serial one pays before it.
    host_ps: int = 0
    # A collective: the library's fixed device cost of the call beyond the kernel's launch, paid after
    # ``overhead_ps``; and its protocol's latency every round, in place of ``system.step_latency`` (-1: the chip's).
    library_ps: int = 0
    step_ps: int = -1
    # A collective: what its library's channels carry a second (0: no limit); a transfer takes at least
    # its bytes over this, whatever the link (the link is busy only for its own time).
    channel_rate: int = 0

    @property
    def signature(self) -> tuple:
        """Everything that decides the task's timing; equal signatures simulate identically."""
        return self.signature_on(self.chip)

    def signature_on(self, chip: int) -> tuple:
        """The signature of the same task run on ``chip``."""
        return (self.overhead_ps, self.steps, chip, self.rounds, self.stream, self.acquires, self.releases,
                self.library_ps, self.step_ps, self.channel_rate)

    @property
    def bound_name(self) -> str:
        return "compute" if self.bound is None else str(self.bound)

    def traffic(self) -> dict[Ref, tuple[int, int]]:
        """Per level or link it uses: (compulsory, capacity) bytes, which add up to what it moves.
        Its family may have moved some of its loads to another level (an RDU stages them into HBM):
        capacity bytes are at most what it moves at each."""
        return dict(_traffic(self.steps, self.capacity))

    def bytes_by_level(self) -> dict[Ref, tuple[int, int]]:
        out: dict[Ref, list[int]] = {}
        for s in self.steps:
            for lvl, b in s.total_loads:
                out.setdefault(lvl, [0, 0])[0] += b
            for lvl, b in s.total_stores:
                out.setdefault(lvl, [0, 0])[1] += b
        return {k: (v[0], v[1]) for k, v in out.items()}


@lru_cache(maxsize=4096)
def _traffic(steps: tuple[Step, ...], capacity: tuple[tuple[Ref, int], ...]) -> tuple[tuple[Ref, tuple[int, int]], ...]:
    """``OpTask.traffic`` of steps and capacity bytes, worked out once for the tasks that share them
    (the same operator in every layer)."""
    extras = dict(capacity)
    return tuple((where, (b - min(extras.get(where, 0), b), min(extras.get(where, 0), b)))
                 for where, b in level_bytes(steps).items())


def level_bytes(steps: tuple[Step, ...]) -> dict[Ref, int]:
    """Bytes the steps move at each level or link, loads and stores together."""
    out: dict[Ref, int] = {}
    for s in steps:
        for where, b in (*s.total_loads, *s.total_stores):
            out[where] = out.get(where, 0) + b
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    chip: ChipSpec
    tasks: tuple[OpTask, ...]  # in execution order
    homes: tuple[tuple[str, str], ...]  # tensor -> level
    roofline_s: float
    roofline_bound: Bound  # outputs write it with str: compute, hbm, link:nvlink[0>sw], pipeline hops
    compulsory_bytes: tuple[tuple[str, int], ...]  # level -> bytes any schedule must move
    chips: int = 1  # tensor-parallel ranks x pipeline stages
    tp: int = 1
    regions: int = 1  # pipeline stages within a chip: a task's ``chip`` is then its region's index
    clock: float = 1.0  # the fraction of its maximum clock ``chip`` runs at (below 1: lowered by the power cap)
    staging: tuple[int, ...] = ()  # per pipeline stage (chip or region): SRAM set aside for prefetched weights
    shares: tuple[Share, ...] = ()  # per pipeline stage: its share of its chip's compute and SRAM
    # The routes of its transfers between units (``mapping.system.Routes``), worked out once for
    # the roofline and the engine; None in a plan built by hand (the engine works them out).
    routes: Routes | None = field(default=None, compare=False, repr=False)
    stack: StackSpec = IDEAL  # the runtime stack the plan was made for
    host: HostPlan | None = None  # the host's part of the step (``mapping.dispatch``); None: it adds nothing

    def staging_of(self, unit: int) -> int:
        """SRAM bytes a unit (a chip's rank, or a region) sets aside for prefetched weights."""
        stage = unit // self.tp
        return self.staging[stage] if stage < len(self.staging) else 0

    def chip_of(self, unit: int) -> int:
        """The chip a task's unit (a chip, or a region of one) belongs to."""
        return unit_chip(unit, self.tp, self.regions)

    @property
    def units(self) -> int:
        """Chips, or regions of chips: what the engine gives compute units and SRAM of their own."""
        return self.chips * self.regions


def unit_chip(unit: int, tp: int, regions: int) -> int:
    """The chip a unit (a chip's tensor-parallel rank, or a region of it) belongs to."""
    return (unit // tp // regions) * tp + unit % tp

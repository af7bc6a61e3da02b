"""Weight prefetch: the copy stream stages the next operators' weights into SRAM.

With ``execution.weight_prefetch = N``, each GEMM whose weights live in a slower level gets
a prefetch task on its chip's copy stream: a direct copy of the weights it reads from their
home into the SRAM staging area. The prefetch for a chip's j-th such GEMM may start once its
(j - N - 1)-th has finished, so up to N GEMMs' weights are staged ahead of the running one,
and it takes its bytes of the staging area (half the SRAM, tiles getting the other half; on a
scratchpad that holds weights, what ``placement.sram_split`` leaves it) before it starts; the
GEMM gives them back when it is done. The staging area is double-buffered like a tile's operands (``prefetch_depth`` GEMMs'
weights at a time), so a GEMM stages at most that share of it: all its weights where they fit,
else the part that fits (its first weights, in input order), and the rest streams from their
home while it computes, as without prefetch.

Nor does it stage what its own work would hide as the rest streams (``kept``). A GEMM starts
once its prefetch has landed; then, after one latency of the levels it reads, its compute, its
reads of the staged part from SRAM and the stream of the rest from home overlap. Where the
home level is the bottleneck (the prefetch is on the critical path), staging S of its W weights
costs S / rate before it and max((W - S) / rate, S / SRAM rate, compute) after: flat, W / rate
plus the home latency, as long as the stream is the longest of the three, and longer by both
transfers beyond. So a GEMM leaves at least max(compute x rate, W x rate / (rate + SRAM rate))
to stream, or stages all of its weights where reading them from SRAM and computing take no
longer than the home level's latency over the SRAM's. More SRAM stages a larger part, up to
that, and never costs time: a compute-bound GEMM streams its weights, and the LM head, which
nothing follows, is not staged whole only to be read from SRAM after its whole transfer.

The copy is cut into few large transfers (a DMA engine moves big bursts) at the lowest
priority: demand traffic preempts it, so it uses the bandwidth the running operators leave
idle. Its writes land in the staging area's banks and are not charged to SRAM bandwidth.
"""
from __future__ import annotations

import dataclasses
import math

from memsim.core.units import PS_PER_S
from memsim.hardware import rates
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping import tiling
from memsim.mapping.lower import Context, gemm_compute_ps, staging
from memsim.mapping.plan import COPY, OpTask, Step
from memsim.workload.graph import Op

COPY_CHUNKS = 16  # transfers a prefetch is cut into
# A staged part is a whole number of grains (``grain``), at least of these, so that it splits into
# whole bytes over the copy's transfers and over the GEMM's chunks: a part one byte larger must not
# round every chunk up.
GRAIN = COPY_CHUNKS * tiling.CHUNKS
MAX_GRAIN = 64 * GRAIN  # a coarser grain would leave a small staging area unused: bytes are cut as GRAIN


def grain(chip: ChipSpec, source: Ref, share: rates.Share = rates.WHOLE) -> int:
    """The unit a GEMM's staged part (and what it leaves to stream) is cut in on ``chip`` from
    level ``source``: whole bytes over the copy's transfers and the GEMM's chunks, as ``GRAIN``,
    and whole picoseconds at the rate a step with ``share`` of the level gets (``hardware/rates``)
    and on the link it is reached over. A grain moved from the stream to the
    copy then moves whole picoseconds, so a larger part never rounds a transfer up (transfers are
    rounded up to the picosecond per chunk): where that takes more than ``MAX_GRAIN``, ``GRAIN``."""
    level = chip.level(source.name)
    units = [rates.exact_unit(level.effective_bandwidth(chip.compute.units), level.channels, share)]
    if level.via:
        units.append(rates.exact_unit(chip.link(level.via).effective_bandwidth))
    unit = GRAIN
    for exact in units:
        unit = math.lcm(unit, tiling.CHUNKS * exact)
    return unit if unit <= MAX_GRAIN else GRAIN


def staging_area(chip: ChipSpec, share: rates.Share = rates.WHOLE) -> int:
    """SRAM a chip (or a region with ``share`` of it) whose scratchpad holds no weights sets aside
    for prefetched weights: half of it (0 when prefetch is off)."""
    if not chip.execution.weight_prefetch:
        return 0
    return rates.shared_capacity(chip.chip_capacity(chip.scratchpad), share) // 2


def part_bytes(cx: Context, nbytes: int, unit: int = GRAIN) -> int:
    """Bytes of a GEMM's ``nbytes`` of weights that its prefetch stages: all of them if they fit
    in its share of the staging area, else as many whole grains (``unit``) as do.

    The share is the area over ``prefetch_depth``: the running GEMM's weights and the next one's
    (double buffering). With the whole area, a GEMM staged whole would hold it while it computes
    and the next prefetch could not start: the home level idles, and more SRAM could be slower."""
    share = cx.staging_bytes // cx.depth
    return nbytes if nbytes <= share else share - share % unit


def kept(total: int, compute_ps: int, rate: int, sram_rate: int, later_ps: int, unit: int = GRAIN) -> int:
    """Bytes of a GEMM's ``total`` bytes of weights that stream from home rather than being
    staged (module docstring): what its compute, or its reads of the staged part from SRAM,
    hide as they stream at ``rate``, in whole grains (``unit``); or none, where its compute and its
    read of them all from SRAM (at ``sram_rate``) take no longer than the ``later_ps`` by which
    the home level's first bytes arrive after the SRAM's."""
    stream = max(compute_ps * rate // PS_PER_S, -(-total * rate // (rate + sram_rate)))
    if stream >= total:
        return total
    if max(compute_ps, total * PS_PER_S // sram_rate) <= later_ps:
        return 0
    return min(total, -(-stream // unit) * unit)


def copy_step(label: str, loads: dict[Ref, int], into: Ref | None, depth: int) -> Step:
    """A direct (DMA) copy of ``loads`` into level ``into``, in few large transfers. Without
    ``into`` it lands in the SRAM staging area, whose writes are not charged."""
    nbytes = sum(loads.values())
    n = max(1, min(COPY_CHUNKS, math.ceil(nbytes / 4096)))
    per = tuple((ref, -(-b // n)) for ref, b in sorted(loads.items(), key=lambda kv: str(kv[0])))
    stores = ((into, -(-nbytes // n)),) if into is not None else ()
    return Step(label=label, count=n, loads=per, stores=stores, compute_ps=0, flops=0, depth=depth, sram_bytes=0,
                total_loads=tuple(sorted(loads.items(), key=lambda kv: str(kv[0]))),
                total_stores=((into, nbytes),) if into is not None else (), direct=True)


class Prefetcher:
    """Prefetch tasks for the GEMMs of every chip, in each chip's stream order."""

    def __init__(self) -> None:
        self.users: dict[int, list[str]] = {}  # chip -> its GEMMs with prefetched weights, in order

    def stage(self, op: Op, cx: Context, chip: int, name: str) -> tuple[OpTask | None, Context]:
        """The prefetch for ``op`` (None when it gets none) and the context to lower it in."""
        budget = cx.staging_bytes
        if not budget or op.kind != "matmul":
            return None, cx
        pad = staging(cx.chip)
        weights = [(r.tensor, r.bytes) for r in op.inputs if cx.graph.tensors[r.tensor].klass == "weight"
                   and cx.homes[r.tensor] != pad.name]
        homes = {cx.homes[t] for t, _ in weights}
        if not weights or len(homes) != 1:
            return None, cx
        source = Ref.level(homes.pop())
        total = sum(b for _, b in weights)
        later = cx.chip.level(source.name).latency_ps - cx.chip.level(pad.name).latency_ps
        unit = grain(cx.chip, source, cx.compute_share)
        keep = kept(total, gemm_compute_ps(op, cx), rates.shared(rates.effective_bandwidth(cx.chip, source), cx.compute_share),
                    rates.shared(rates.effective_bandwidth(cx.chip, pad), cx.compute_share), later, unit)
        room = part_bytes(cx, total - keep, unit)
        staged = []
        for tensor, nbytes in weights:  # the first part of the weights
            if room and nbytes:
                staged.append((tensor, min(nbytes, room)))
                room -= staged[-1][1]
        nbytes = sum(b for _, b in staged)
        if not nbytes:
            return None, cx
        users = self.users.setdefault(chip, [])
        ahead = cx.chip.execution.weight_prefetch
        deps = (users[-ahead - 1],) if len(users) > ahead else ()
        users.append(name)
        task = OpTask(op=f"prefetch.{name}", kind="prefetch", layer=op.layer, flops=0, overhead_ps=0,
                      steps=(copy_step("prefetch", {source: nbytes}, None, cx.depth),), deps=deps, bound=source,
                      chip=chip, stream=COPY, graph_op="", acquires=nbytes)
        return task, dataclasses.replace(cx, staged=tuple(staged))

    def finished_by(self, chip: int, name: str, task: str) -> None:
        """The GEMM ``name`` gives its staged weights back when ``task`` ends (its last part)."""
        users = self.users.get(chip, [])
        if name in users:
            users[users.index(name)] = task

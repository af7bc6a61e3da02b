"""How a step is laid out over a system: pipeline stages, micro-batches and per-stage placement.

Pipeline stages are cut by bytes and time (``memsim.mapping.partition``): runs of consecutive
blocks (the ops before the first layer, each layer, the ops after the last) that fit the chip's
memory, the slowest as fast as it can be. A chip that pipelines its layers (``execution.pipeline: layers``) splits its stage
further into regions, each with a share of the chip sized by its bytes and its time
(``memsim.mapping.regions``); when their bytes need more SRAM than the chip has, the chip runs
as one region and streams its weights. Every stage places only its own tensors (its layers'
weights and KV cache, its activations), so a stage holds its share of the model. Where the SRAM
holds weights or the KV cache, a stage keeps room in it beside them for its largest working set
of activations and, when some of its weights live in a slower level (to be prefetched), for the
staging area; a stage whose weights all live in SRAM stages nothing.
A step may run as several micro-batches, graphs with the same op names that flow through
the stages one after another; the stage placement reserves a KV cache for each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import networkx as nx

from memsim.core import memo
from memsim.core.errors import CapacityError
from memsim.hardware import rates
from memsim.hardware.spec import ChipSpec
from memsim.mapping import partition, regions
from memsim.mapping.placement import place, sram_split
from memsim.mapping.prefetch import staging_area
from memsim.workload.graph import Op, OpGraph


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """The chips a step runs on: ``tp`` tensor-parallel ranks (the step's graph is one rank's share
    of the model, ``StepMeta.tp``) in each of ``pp`` pipeline stages. What parallelism the mapping
    is given, in one value."""
    tp: int = 1
    pp: int = 1

    @classmethod
    def of(cls, graph: OpGraph, pp: int = 1) -> Grid:
        """The grid of a step whose graph is one rank's of its ``tp``, over ``pp`` stages."""
        return cls(tp=graph.meta.tp, pp=pp)


@dataclass(frozen=True)
class Layout:
    pp: int = 1  # pipeline stages across chips
    microbatches: tuple[OpGraph, ...] = ()  # run one after another; empty: the step's graph, once
    kv_copies: int = 1  # micro-batches that each keep a KV cache of the placed graph's size
    regions: int = 1  # pipeline stages within each chip (a wafer's layer regions)
    tp: int = 1  # tensor-parallel ranks in each stage

    @property
    def stages(self) -> int:
        return self.pp * self.regions

    def graphs(self, graph: OpGraph) -> tuple[OpGraph, ...]:
        return self.microbatches or (graph,)


@dataclass(frozen=True)
class Stages:
    """A step laid out: its stages (``layout.stages`` of them: chips, or regions of chips)."""

    layout: Layout  # with the regions it uses
    stage_of: dict[str, int]  # op -> stage
    homes: dict[str, str]  # tensor -> level
    shares: tuple[rates.Share, ...]  # per stage: its share of its chip's compute and SRAM
    staging: tuple[int, ...]  # per stage: SRAM bytes set aside for prefetched weights
    rooms: tuple[int, ...] = ()  # per stage: SRAM bytes its tiles and staging area share (empty: all its share)


def branches(graph: OpGraph) -> set[str]:
    """Ops of a layer that neither feed nor follow its attention: an independent branch, such as
    the MLP of a parallel block (GPT-J, Falcon), which may run beside the attention."""
    deps = memo.derived("dependencies", graph, OpGraph.graph)
    order = list(nx.topological_sort(deps))
    at = {name: i for i, name in enumerate(order)}
    by_layer: dict[int, list[Op]] = {}
    for op in graph:
        if op.layer >= 0:
            by_layer.setdefault(op.layer, []).append(op)
    out: set[str] = set()
    for ops in by_layer.values():
        attention = [op.name for op in ops if op.kind == "attention"]
        related = set(attention)
        # A path between two of the layer's ops only visits ops placed between them in a
        # topological order, so the search keeps to the layer's span of it (exact, and linear
        # in the graph over all layers rather than quadratic).
        span = deps.subgraph(order[min(at[op.name] for op in ops):max(at[op.name] for op in ops) + 1])
        for name in attention:
            related |= nx.ancestors(span, name) | nx.descendants(span, name)
        if attention:
            out |= {op.name for op in ops if op.name not in related}
    return out


def stage_graphs(graph: OpGraph, stage_of: dict[str, int], pp: int) -> list[OpGraph]:
    """Each stage's ops and the tensors they use."""
    names: list[list[str]] = [[] for _ in range(pp)]
    for name in graph.ops:
        names[stage_of[name]].append(name)
    return [graph.subgraph(n) for n in names]


def lay_out(graph: OpGraph, chip: ChipSpec, layout: Layout) -> Stages:
    """The stage of every op, the home of every tensor, and each stage's share of its chip and
    staging area."""
    items = partition.blocks(graph.order(), graph, chip, layout.kv_copies)
    chip_of = partition.cut(items, layout.pp, chip)
    if chip.execution.pipeline == "layers":
        laid = _in_regions(graph, chip, layout, items, chip_of)
        if laid is not None:
            return laid
    stage_of = _op_stages(items, chip_of)
    homes: dict[str, str] = {}
    staging, rooms = [], []
    for s, sub in enumerate(stage_graphs(graph, stage_of, layout.pp)):
        placed, room, staged = place_stage(sub, chip, layout.kv_copies,
                                           f"pipeline stage {s}: " if layout.pp > 1 else "")
        for name, home in placed.items():
            homes.setdefault(name, home)  # an activation sent between stages keeps its producer's home
        staging.append(staged)
        rooms.append(room)
    return Stages(dataclasses.replace(layout, regions=1), stage_of, homes, (rates.WHOLE,) * layout.pp, tuple(staging),
                  tuple(rooms))


def _in_regions(graph: OpGraph, chip: ChipSpec, layout: Layout, items: list[partition.Block],
                chip_of: list[int]) -> Stages | None:
    """The layout with each chip's stage in regions, or None when their weights do not all fit in
    their regions' SRAM (the chip then streams them)."""
    count, region_of = regions.groups(items, chip_of, layout.pp)
    stage_of = _op_stages(items, region_of)
    subs = stage_graphs(graph, stage_of, layout.pp * count)
    shares: list[rates.Share] = []
    for c in range(layout.pp):
        chip_shares = regions.shares(chip, subs[c * count:(c + 1) * count], layout.kv_copies)
        if chip_shares is None:
            return None
        shares += chip_shares
    homes: dict[str, str] = {}
    rooms: list[int] = []
    scratch = {lvl.name for lvl in chip.levels if lvl.is_scratchpad}
    for sub, share in zip(subs, shares):
        try:
            placed, room, staged = place_stage(sub, chip, layout.kv_copies, "", share)
        except CapacityError:
            return None
        if staged or any(placed[t.name] not in scratch for t in sub.tensors.values() if t.klass == "weight"):
            return None
        for name, home in placed.items():
            homes.setdefault(name, home)
        rooms.append(room)
    return Stages(dataclasses.replace(layout, regions=count), stage_of, homes, tuple(shares), (0,) * len(subs),
                  tuple(rooms))


def _op_stages(items: list[partition.Block], stage_of_block: list[int]) -> dict[str, int]:
    return {name: stage for block, stage in zip(items, stage_of_block) for name in block.ops}


def place_stage(sub: OpGraph, chip: ChipSpec, kv_copies: int, where: str,
                share: rates.Share = rates.WHOLE) -> tuple[dict[str, str], int, int]:
    """Homes for one stage's tensors (``share``: its share of its chip), the SRAM its tiles and
    staging area share, and the staging area's part of it (for prefetched weights). A scratchpad
    that holds no weights or KV cache gives tiles and staging all of it (half each with weight
    prefetch on). One that does first keeps room for the stage's working set of activations;
    weights and KV cache then get what the reserve for tiles and staging leaves
    (``placement.sram_reserve``), and tiles and staging what they leave (``placement.sram_split``)."""
    sram = chip.scratchpad
    capacity = rates.shared_capacity(chip.chip_capacity(sram), share)
    if not (sram.home_for("weight") or sram.home_for("kv")):
        return place(sub, chip, kv_copies, where), capacity, staging_area(chip, share)
    room = max(0, capacity - partition.working_set(sub))
    homes = place(sub, chip, kv_copies, where, {sram.name: room})
    tiles_and_staging, staging = sram_split(sub, chip, homes, kv_copies, room)
    return homes, tiles_and_staging, staging

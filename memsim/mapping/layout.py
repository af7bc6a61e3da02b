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

from memsim.errors import CapacityError
from memsim.hardware.spec import ChipSpec
from memsim.mapping import partition, regions
from memsim.mapping.placement import place
from memsim.mapping.prefetch import staging_area
from memsim.workload.graph import Op, OpGraph


@dataclass(frozen=True)
class Layout:
    pp: int = 1  # pipeline stages across chips
    microbatches: tuple[OpGraph, ...] = ()  # run one after another; empty: the step's graph, once
    kv_copies: int = 1  # micro-batches that each keep a KV cache of the placed graph's size
    regions: int = 1  # pipeline stages within each chip (a wafer's layer regions)

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
    shares: tuple[float, ...]  # per stage: its share of its chip's compute and SRAM
    staging: tuple[int, ...]  # per stage: SRAM bytes set aside for prefetched weights


def branches(graph: OpGraph) -> set[str]:
    """Ops of a layer that neither feed nor follow its attention: an independent branch, such as
    the MLP of a parallel block (GPT-J, Falcon), which may run beside the attention."""
    deps = graph.graph()
    by_layer: dict[int, list[Op]] = {}
    for op in graph:
        if op.layer >= 0:
            by_layer.setdefault(op.layer, []).append(op)
    out: set[str] = set()
    for ops in by_layer.values():
        attention = [op.name for op in ops if op.kind == "attention"]
        related = set(attention)
        for name in attention:
            related |= nx.ancestors(deps, name) | nx.descendants(deps, name)
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
    staging = []
    for s, sub in enumerate(stage_graphs(graph, stage_of, layout.pp)):
        placed, staged = place_stage(sub, chip, layout.kv_copies, f"pipeline stage {s}: " if layout.pp > 1 else "")
        for name, home in placed.items():
            homes.setdefault(name, home)  # an activation sent between stages keeps its producer's home
        staging.append(staged)
    return Stages(dataclasses.replace(layout, regions=1), stage_of, homes, (1.0,) * layout.pp, tuple(staging))


def _in_regions(graph: OpGraph, chip: ChipSpec, layout: Layout, items: list[partition.Block],
                chip_of: list[int]) -> Stages | None:
    """The layout with each chip's stage in regions, or None when their weights do not all fit in
    their regions' SRAM (the chip then streams them)."""
    count, region_of = regions.groups(items, chip_of, layout.pp)
    stage_of = _op_stages(items, region_of)
    subs = stage_graphs(graph, stage_of, layout.pp * count)
    shares: list[float] = []
    for c in range(layout.pp):
        chip_shares = regions.shares(chip, subs[c * count:(c + 1) * count], layout.kv_copies)
        if chip_shares is None:
            return None
        shares += chip_shares
    homes: dict[str, str] = {}
    scratch = {lvl.name for lvl in chip.levels if lvl.is_scratchpad}
    for sub, share in zip(subs, shares):
        try:
            placed, staged = place_stage(sub, chip, layout.kv_copies, "", share)
        except CapacityError:
            return None
        if staged or any(placed[t.name] not in scratch for t in sub.tensors.values() if t.klass == "weight"):
            return None
        for name, home in placed.items():
            homes.setdefault(name, home)
    return Stages(dataclasses.replace(layout, regions=count), stage_of, homes, tuple(shares), (0,) * len(subs))


def _op_stages(items: list[partition.Block], stage_of_block: list[int]) -> dict[str, int]:
    return {name: stage for block, stage in zip(items, stage_of_block) for name in block.ops}


def place_stage(sub: OpGraph, chip: ChipSpec, kv_copies: int, where: str,
                share: float = 1.0) -> tuple[dict[str, str], int]:
    """Homes for one stage's tensors (``share``: its share of its chip) and the SRAM it sets aside
    for prefetched weights. Where the SRAM holds weights or KV cache, they get what the stage's
    working set of activations and, if some weights live elsewhere, its staging area leave."""
    sram = chip.sram
    staging = staging_area(chip, share)
    if not (sram.home_for("weight") or sram.home_for("kv")):
        return place(sub, chip, kv_copies, where), staging
    room = round(chip.chip_capacity(sram) * share) - partition.working_set(sub)
    homes = place(sub, chip, kv_copies, where, {sram.name: room})
    if not staging or all(homes[t.name] == sram.name for t in sub.tensors.values() if t.klass == "weight"):
        return homes, 0
    # Beside resident weights the staging area is what the prefetches in flight can hold at once:
    # the running GEMM's weights and those of the ``weight_prefetch`` after it.
    gemms = sorted((sum(r.bytes for r in op.inputs if sub.tensors[r.tensor].klass == "weight")
                    for op in sub if op.kind == "matmul"), reverse=True)
    staging = min(staging, sum(gemms[:chip.execution.weight_prefetch + 1]))
    return place(sub, chip, kv_copies, where, {sram.name: room - staging}), staging

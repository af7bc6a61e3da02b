"""How a step is laid out over a system: pipeline stages, micro-batches and per-stage placement.

Layers are split evenly into ``pp`` stages; ops before the first layer go to the first
stage and ops after the last layer to the last. A chip that pipelines its layers
(``execution.pipeline: layers``) splits its stage further into one region per layer. Every stage places only its own tensors
(its layers' weights and KV cache, its activations), so a stage holds its share of the model.
A step may run as several micro-batches, graphs with the same op names that flow through
the stages one after another; the stage placement reserves a KV cache for each.
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from memsim.errors import ConfigError
from memsim.hardware.spec import ChipSpec
from memsim.mapping.placement import place
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


def stages(order: list[Op], pp: int) -> dict[str, int]:
    """The pipeline stage of each op."""
    layers = 1 + max((op.layer for op in order), default=0)
    if pp > max(1, layers):
        raise ConfigError(f"{pp} pipeline stages for {layers} layers", field="--pp")
    out, seen_layer = {}, False
    for op in order:
        if op.layer >= 0:
            seen_layer = True
            out[op.name] = op.layer * pp // layers
        else:
            out[op.name] = pp - 1 if seen_layer else 0
    return out


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


def place_stages(graph: OpGraph, chip: ChipSpec, stage_of: dict[str, int], layout: Layout) -> dict[str, str]:
    """Homes for every tensor, each chip's stages (its regions) placed together on it."""
    homes: dict[str, str] = {}
    on_chip = {name: s // layout.regions for name, s in stage_of.items()}
    for s, sub in enumerate(stage_graphs(graph, on_chip, layout.pp)):
        where = f"pipeline stage {s}: " if layout.pp > 1 else ""
        for name, home in place(sub, chip, layout.kv_copies, where).items():
            homes.setdefault(name, home)  # an activation sent between stages keeps its producer's home
    return homes

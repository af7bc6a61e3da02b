"""Wafer-scale engine (Cerebras WSE style): a 2D mesh of cores with local SRAM.

Layers are laid out as pipelined regions of the mesh, one region per layer, so an operator
runs on its layer's share of the cores, SRAM bandwidth and compute. Weights and the KV cache
stay in on-wafer SRAM when they fit; otherwise they stream in from external memory
(MemoryX) over the wafer's I/O links. Each matrix operator ends by moving its output across
its region over the fabric (``link:fabric``: per-hop latency times the hops crossed).
"""
from __future__ import annotations

import dataclasses

from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import make_step
from memsim.mapping.strategy import plan_with, register
from memsim.workload.graph import OpGraph

FABRIC_OPS = ("matmul", "attention")


@register("wafer")
def plan_wafer(graph: OpGraph, chip: ChipSpec):
    regions = max(1, 1 + max((op.layer for op in graph), default=0))
    has_fabric = any(lk.name == "fabric" for lk in chip.links)

    def regional(op, steps, cx):
        share = 1.0 / regions
        shaped = [dataclasses.replace(s, share=share, compute_ps=s.compute_ps * regions,
                                      unpack_ps=s.unpack_ps * regions) for s in steps]
        if has_fabric and op.kind in FABRIC_OPS:
            out = sum(cx.graph.tensors[t].bytes for t in op.outputs[:1])
            shaped.append(dataclasses.replace(
                make_step("fabric", {"link:fabric": out}, {}, 0, 0, cx.sram_bytes, cx.depth, cx.sram_bytes),
                share=share))
        return tuple(shaped), cx.chip.execution.kernel_overhead_ps

    return plan_with(graph, chip, regional)

"""Wafer-scale engine (Cerebras WSE style): a 2D mesh of cores with local SRAM.

Layers are laid out as pipelined regions of the mesh, one region per layer, so an operator
runs on its layer's share of the cores, SRAM bandwidth and compute. Weights and the KV cache
stay in on-wafer SRAM when they fit; otherwise they stream in from external memory
(MemoryX) over the wafer's I/O links. A matrix operator broadcasts its input across its
region and reduces its output across it over the link named by ``execution.fabric`` (whose
latency is the hop latency times the hops a traversal crosses); with none named, it does not.
"""
from __future__ import annotations

import dataclasses

from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import make_step
from memsim.mapping.layout import Layout
from memsim.mapping.strategy import plan_with, register
from memsim.workload.graph import OpGraph

FABRIC_OPS = ("matmul", "attention")


@register("wafer")
def plan_wafer(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout()):
    fabric = chip.execution.fabric
    shaped_for: dict[tuple, tuple] = {}  # (steps, share, broadcast and reduce bytes) -> shaped steps

    def regional(op, steps, cx):
        moves = (op.inputs[0].bytes, cx.graph.tensors[op.outputs[0]].bytes) if op.kind in FABRIC_OPS else ()
        key = (steps, cx.compute_share, moves, cx.sram_bytes, cx.depth)
        if key not in shaped_for:
            shaped_for[key] = _regional(op, steps, cx)
        return shaped_for[key], cx.chip.execution.kernel_overhead_ps

    def _regional(op, steps, cx):
        share = cx.compute_share  # the layer's region: its share of the cores and SRAM channels
        shaped = [dataclasses.replace(s, share=share) for s in steps]
        if fabric and op.kind in FABRIC_OPS:
            # The input is broadcast across the region and partial outputs are reduced across
            # it: two traversals of the fabric, each paying the hop latency once.
            moves = (("broadcast", op.inputs[0].bytes), ("reduce", cx.graph.tensors[op.outputs[0]].bytes))
            traversals = [dataclasses.replace(make_step(label, {Ref.link(fabric): n}, {}, 0, 0, cx.depth,
                                                        cx.sram_bytes), share=share) for label, n in moves]
            shaped = [traversals[0], *shaped, traversals[1]]
        return tuple(shaped)

    return plan_with(graph, chip, regional, layout)

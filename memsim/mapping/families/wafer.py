"""Wafer-scale engine (Cerebras WSE style): a 2D mesh of cores with local SRAM.

Layers are laid out as pipelined regions of the mesh, one region per layer, so an operator
runs on its layer's share of the cores, SRAM bandwidth and compute. Weights and the KV cache
stay in on-wafer SRAM when they fit; otherwise they stream in from external memory
(MemoryX) over the wafer's I/O links.

Weights that stay on the wafer stay where they were placed: a projection computes on the cores
of its region that hold its weights, its *part* of the region, sized by its share of the
region's weight bytes. (The KV cache is spread over the whole region, in the SRAM beside the
weights, so attention has the region.) With one micro-batch in flight the other parts idle
while a projection runs, so it reads and computes at its part's rate. With several, the parts
work on different micro-batches at once, and the region's shared channels and compute, which
the engine gives one operator at a time, model their combined rate; an operator then keeps
the region's.

A matrix operator broadcasts its input across its part and reduces its output across it over
the link named by ``execution.fabric``: two traversals, each as long as the part's block of the
core mesh and the vector make it (``memsim.mapping.mesh``). With no link named, it does not.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

from memsim.hardware.rates import WHOLE, Share, share_of
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.layout import Layout
from memsim.mapping.lower import Context, make_step
from memsim.mapping.mesh import traversal_latency_ps
from memsim.mapping.plan import Step
from memsim.mapping.strategy import plan_with, register
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.graph import Op, OpGraph

FABRIC_OPS = ("matmul", "attention")


@register("wafer")
def plan_wafer(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout(), stack: StackSpec = IDEAL):
    fabric = chip.execution.fabric
    alone = len(layout.graphs(graph)) == 1  # one micro-batch: an operator has only its part's rate
    parts: dict[str, Fraction] = {}  # matrix operator -> its part of its region (filled on first use)
    # (steps, region share, part, broadcast and reduce bytes, ...) -> shaped steps: a traversal's
    # latency is a function of the part's share and the bytes, the chip's mesh being fixed.
    shaped_for: dict[tuple, tuple[Step, ...]] = {}

    def regional(op: Op, steps: tuple[Step, ...], cx: Context):
        if not parts:
            parts.update(_parts(graph, cx.homes, chip) or {"": WHOLE})
        part = parts.get(op.name, WHOLE)
        moves = _moves(op, cx.graph) if op.kind in FABRIC_OPS else ()
        key = (steps, cx.compute_share, part, moves, cx.sram_bytes, cx.depth)
        if key not in shaped_for:
            shaped_for[key] = _regional(op, steps, cx, part)
        return shaped_for[key], 1

    def _regional(op: Op, steps: tuple[Step, ...], cx: Context, part: Fraction) -> tuple[Step, ...]:
        share = share_of(cx.compute_share * part)  # the cores, SRAM channels and mesh block the operator has
        if alone:
            shaped = [_on_part(s, share, part) for s in steps]
        else:
            shaped = [dataclasses.replace(s, share=cx.compute_share) for s in steps]
        if fabric and op.kind in FABRIC_OPS:
            moves = tuple(zip(("broadcast", "reduce"), _moves(op, cx.graph)))
            traversals = [dataclasses.replace(make_step(label, {Ref.link(fabric): n}, {}, 0, 0, cx.depth,
                                                        cx.sram_bytes), share=share,
                                              latency_ps=traversal_latency_ps(cx.chip, share, n))
                          for label, n in moves]
            shaped = [traversals[0], *shaped, traversals[1]]
        return tuple(shaped)

    return plan_with(graph, chip, regional, layout, stack)


def _moves(op: Op, graph: OpGraph) -> tuple[int, int]:
    """The bytes a matrix operator broadcasts (its input) and reduces (all its outputs: a fused
    QKV projection's three)."""
    return op.inputs[0].bytes, sum(graph.tensors[t].bytes for t in op.outputs)


def _on_part(step: Step, share: Share, part: Fraction) -> Step:
    """``step``, lowered for the whole region, on ``part`` of it: its channels' share and its
    compute (and unpacking) stretched by the cores it lacks, rounded up."""
    if part == 1:
        return dataclasses.replace(step, share=share)
    stretch = lambda ps: -(-ps * part.denominator // part.numerator)
    return dataclasses.replace(step, share=share, compute_ps=stretch(step.compute_ps),
                               unpack_ps=stretch(step.unpack_ps))


def _parts(graph: OpGraph, homes: dict[str, str], chip: ChipSpec) -> dict[str, Fraction]:
    """Each matrix operator whose weights stay in SRAM: its share of the bytes of such weights on
    its region. Operators outside the layers (the LM head) share the region of the layer next to
    them, as pipeline stages place them."""
    order = graph.order()
    region = _layer_regions(order)
    scratch = {lvl.name for lvl in chip.levels if lvl.is_scratchpad}
    own = {op.name: sum(r.bytes for r in op.inputs if graph.tensors[r.tensor].klass == "weight"
                        and homes.get(r.tensor) in scratch) for op in order if op.kind in FABRIC_OPS}
    total: dict[int, int] = {}
    for name, nbytes in own.items():
        total[region[name]] = total.get(region[name], 0) + nbytes
    return {name: Share(nbytes, total[region[name]]) for name, nbytes in own.items() if nbytes}


def _layer_regions(order: list[Op]) -> dict[str, int]:
    """Each operator's layer, the operators before the first layer in the first and those after
    the last in the last, as the regions place them (``memsim.mapping.regions``)."""
    last = max((op.layer for op in order), default=0)
    out, seen = {}, False
    for op in order:
        seen = seen or op.layer >= 0
        out[op.name] = op.layer if op.layer >= 0 else (last if seen else 0)
    return out

"""Dataflow RDU (SambaNova SN40L style): three memory tiers, a decoder layer per kernel.

A decoder layer runs as one fused dataflow kernel: its intermediates stay in on-chip SRAM
(the preset lets ``sram`` hold activations) and the launch cost is paid once per layer, or,
with ``execution.fused_kernel: step``, once for all the layers, which one call of a kernel
with a pipelined outer loop runs (SambaNova's kernel looping, arXiv:2410.23668). Its
collectives run inside that kernel (``execution.collective_launch: fused``).
Weights stream from HBM. Weights or experts that do not fit in HBM live in DDR and are
staged into HBM before use (``execution.stage_from`` into ``execution.stage_into``); the
staging copy is its own step, so its time is visible.
"""
from __future__ import annotations

import dataclasses

from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.layout import Layout
from memsim.mapping.lower import make_step
from memsim.mapping.plan import Step
from memsim.mapping.prefetch import copy_step
from memsim.mapping.strategy import plan_with, register
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.graph import OpGraph


def stage_through(steps: tuple[Step, ...], slow: set[Ref], fast: Ref) -> tuple[Step, ...]:
    """Copy what a step would load from a ``slow`` level into ``fast`` first, then load it from there."""
    out: list[Step] = []
    for step in steps:
        staged = {lvl: b for lvl, b in step.total_loads if lvl in slow}
        if not staged:
            out.append(step)
            continue
        moved = sum(staged.values())
        out.append(copy_step("stage", staged, fast, step.depth))
        loads = {lvl: b for lvl, b in step.total_loads if lvl not in slow}
        loads[fast] = loads.get(fast, 0) + moved
        remade = make_step(step.label, loads, dict(step.total_stores), step.compute_ps * step.count, step.flops,
                           step.depth, step.sram_bytes, dict(step.tile), step.unpack_ps * step.count,
                           energy_fj=step.compute_fj, unpack_fj=step.unpack_fj, feed_ps=step.feed_ps * step.count)
        out.append(dataclasses.replace(remade, share=step.share))
    return tuple(out)


@register("rdu")
def plan_rdu(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout(), stack: StackSpec = IDEAL):
    slow = {Ref.level(name) for name in chip.execution.stage_from}
    # The spec requires stage_into with stage_from: a level to stage into exactly when there is one to stage from.
    fast = Ref.level(chip.execution.stage_into) if slow else None
    seen_layers: set[tuple[int, int]] = set()  # (micro-batch graph, kernel) already launched
    # With kernel looping each pipeline stage's chip calls one kernel for all its layers.
    looped = chip.execution.fused_kernel == "step"

    def fused_layers(op, steps, cx):
        if fast is not None:
            steps = stage_through(steps, slow, fast)
        if op.layer < 0:  # outside the decoder layers: a kernel of its own
            return steps, 1
        key = (cx.microbatch, cx.stage if looped else op.layer)
        first = key not in seen_layers
        seen_layers.add(key)
        return steps, 1 if first else 0

    return plan_with(graph, chip, fused_layers, layout, stack)

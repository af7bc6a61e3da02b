"""GPU: one kernel per operator, launched in stream order.

Every kernel pays a fixed launch-and-sync overhead (graph-captured or eager). Intermediates
go through the activation level (L2 when they fit, else HBM). Weights that do not fit in
HBM are offloaded to host DDR and streamed over PCIe (FlexGen / ZeRO-Inference style).
"""
from __future__ import annotations

from memsim.hardware.spec import ChipSpec
from memsim.mapping.layout import Layout
from memsim.mapping.strategy import plan_with, register
from memsim.workload.graph import OpGraph


def kernel_per_op(op, steps, cx):
    return steps, cx.chip.execution.kernel_overhead_ps


@register("gpu")
def plan_gpu(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout()):
    return plan_with(graph, chip, kernel_per_op, layout, grid=True)

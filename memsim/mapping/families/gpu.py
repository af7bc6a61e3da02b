"""GPU: one kernel per operator, launched in stream order.

Every kernel pays a fixed launch-and-sync overhead (graph-captured or eager); a GEMM whose library
splits K launches a second kernel to add the partial sums. Intermediates
go through the activation level (L2 when they fit, else HBM). Weights that do not fit in
HBM are offloaded to host DDR and streamed over PCIe (FlexGen / ZeRO-Inference style).
"""
from __future__ import annotations

from memsim.hardware.spec import ChipSpec
from memsim.mapping import kerneltile
from memsim.mapping.layout import Layout
from memsim.mapping.strategy import plan_with, register
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.graph import OpGraph


def kernel_per_op(op, steps, cx):
    """Each operator is a kernel; a GEMM whose library splits K (``kerneltile``) is two, the second
    adding the partial sums, and each pays a kernel's fixed cost."""
    return steps, 2 if op.kind == "matmul" and kerneltile.for_op(op, cx).split > 1 else 1


@register("gpu")
def plan_gpu(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout(), stack: StackSpec = IDEAL):
    return plan_with(graph, chip, kernel_per_op, layout, stack, grid=True)

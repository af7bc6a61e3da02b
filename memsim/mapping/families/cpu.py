"""CPU: cores with L1/L2 caches, a shared L3 and DDR; one framework op at a time.

Operators tile against the per-core caches pooled as the ``sram`` budget; activations stay
in L3 when they fit. Attention is unfused (scores are written and read back), as in
framework CPU kernels, and each op pays the framework's dispatch overhead.
"""
from __future__ import annotations

from memsim.hardware.spec import ChipSpec
from memsim.mapping.families.gpu import kernel_per_op
from memsim.mapping.layout import Layout
from memsim.mapping.strategy import plan_with, register
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.graph import OpGraph


@register("cpu")
def plan_cpu(graph: OpGraph, chip: ChipSpec, layout: Layout = Layout(), stack: StackSpec = IDEAL):
    return plan_with(graph, chip, kernel_per_op, layout, stack, attention="unfused", grid=True)

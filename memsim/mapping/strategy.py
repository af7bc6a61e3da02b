"""Mapping strategies, one per accelerator family, registered by the name used in YAML.

A strategy turns an ``OpGraph`` into a ``Plan``: placement, then lowering of every op in
dependency order. The ``gpu`` strategy runs one kernel per operator in stream order with a
fixed launch overhead; intermediates go through the activation home level.
"""
from __future__ import annotations

from typing import Callable

from memsim.errors import ConfigError
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import Context, lower
from memsim.mapping.placement import place
from memsim.mapping.plan import OpTask, Plan, Step
from memsim.mapping.roofline import roofline
from memsim.units import transfer_ps
from memsim.workload.graph import OpGraph

STRATEGIES: dict[str, Callable[[OpGraph, ChipSpec], Plan]] = {}


def register(family: str):
    def deco(fn):
        STRATEGIES[family] = fn
        return fn
    return deco


def _bound(chip: ChipSpec, steps: tuple[Step, ...]) -> str:
    busy: dict[str, int] = {"compute": sum(s.compute_ps * s.count for s in steps)}
    for s in steps:
        for lvl, b in s.total_loads + s.total_stores:
            level = chip.level(lvl)
            busy[lvl] = busy.get(lvl, 0) + transfer_ps(b, level.effective_bandwidth(chip.compute.units))
    return max(busy, key=busy.__getitem__)


@register("gpu")
def plan_gpu(graph: OpGraph, chip: ChipSpec) -> Plan:
    homes = place(graph, chip)
    cx = Context(chip, graph, homes)
    deps = graph.graph()
    tasks = []
    for op in graph.order():
        steps = lower(op, cx)
        tasks.append(OpTask(op.name, op.kind, op.layer, op.flops, chip.execution.op_overhead_ps, steps,
                            tuple(sorted(deps.predecessors(op.name))), _bound(chip, steps)))
    seconds, bound, need = roofline(graph, chip, homes)
    return Plan(chip, tuple(tasks), tuple(sorted(homes.items())), seconds, bound, tuple(sorted(need.items())))


def make_plan(graph: OpGraph, chip: ChipSpec) -> Plan:
    if chip.family not in STRATEGIES:
        raise ConfigError(f"no mapping strategy for family {chip.family!r}", field="family")
    return STRATEGIES[chip.family](graph, chip)

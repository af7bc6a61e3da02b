"""Mapping strategies, one per accelerator family, registered by the name used in YAML.

A strategy turns an ``OpGraph`` into a ``Plan``: placement, lowering of every op in
dependency order, then the family's own shaping of the steps (launch overheads, fused
layers, staging, regions). Each family lives in one file of ``memsim.mapping.families``.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from memsim.errors import ConfigError
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import Context, lower
from memsim.mapping.placement import place
from memsim.mapping.plan import OpTask, Plan, Step
from memsim.mapping.roofline import peak_bandwidth, roofline
from memsim.units import transfer_ps
from memsim.mapping import collectives, system
from memsim.workload.graph import COLLECTIVE_KINDS, Op, OpGraph

STRATEGIES: dict[str, Callable[[OpGraph, ChipSpec], Plan]] = {}

# A family shapes each op's lowered steps and says what fixed overhead the op pays.
Shaper = Callable[[Op, tuple[Step, ...], Context], tuple[tuple[Step, ...], int]]


def register(family: str):
    def deco(fn):
        STRATEGIES[family] = fn
        return fn
    return deco


def bandwidth_of(chip: ChipSpec, where: Ref) -> int:
    """Achievable bandwidth of a level (limited by the link it is reached over) or a link."""
    if where.is_link:
        return chip.link(where.name).bandwidth_bytes_per_s
    level = chip.level(where.name)
    return min(level.effective_bandwidth(chip.compute.units), peak_bandwidth(chip, where))


def _bound(chip: ChipSpec, steps: tuple[Step, ...]) -> Ref | None:
    """What limits the steps analytically: the busiest level or link, or None for compute."""
    busy: dict[Ref | None, int] = {None: sum(s.compute_ps * s.count for s in steps)}
    for s in steps:
        for where, b in s.total_loads + s.total_stores:
            busy[where] = busy.get(where, 0) + transfer_ps(b, max(1, int(bandwidth_of(chip, where) * s.share)))
    return max(busy, key=busy.__getitem__)


def plan_with(graph: OpGraph, chip: ChipSpec, shape: Shaper, attention: str | None = None,
              compute_share: float = 1.0, pp: int = 1) -> Plan:
    """Place, lower every op in dependency order, and let the family shape its steps.

    Collectives become rounds of link transfers within their tensor-parallel group; with
    pipeline stages, the activation crossing a stage boundary is sent rank to rank.
    """
    homes = place(graph, chip)
    cx = Context(chip, graph, homes, attention or chip.execution.attention, compute_share)
    deps = graph.graph()
    tp = int(graph.meta.get("tp", 1))
    order = graph.order()
    stages = system.stages(order, pp)
    stage_of = {op.name: stages[n] for n, op in enumerate(order)}
    into: dict[int, str] = {}  # stage -> the send that brings the activation into it
    tasks = []
    for n, op in enumerate(order):
        stage = stages[n]
        if n and stage != stages[n - 1]:
            send = system.send_task(order[n - 1], graph, chip, stages[n - 1], stage, tp)
            tasks.append(send)
            into[stage] = send.op
        # A predecessor on another stage arrives through the send into this one.
        preds = dict.fromkeys(p if stage_of[p] == stage else into[stage] for p in sorted(deps.predecessors(op.name)))
        if op.kind in COLLECTIVE_KINDS:
            tasks.append(system.collective_task(op, chip, stage, tp, tuple(preds)))
            continue
        steps, overhead = shape(op, lower(op, cx), cx)
        tasks.append(OpTask(op.name, op.kind, op.layer, op.flops, overhead, steps, tuple(preds), _bound(chip, steps),
                            chip=stage * tp))
    seconds, bound, need = roofline(graph, chip, homes)
    return Plan(chip, tuple(tasks), tuple(sorted(homes.items())), seconds, bound, tuple(sorted(need.items())),
                chips=tp * pp, tp=tp)


def make_plan(graph: OpGraph, chip: ChipSpec, pp: int = 1) -> Plan:
    if not STRATEGIES:
        from memsim.mapping import families

        for mod in pkgutil.iter_modules(families.__path__):
            importlib.import_module(f"{families.__name__}.{mod.name}")
    if chip.family not in STRATEGIES:
        raise ConfigError(f"no mapping strategy for family {chip.family!r}", field="family")
    if pp < 1:
        raise ConfigError("must be at least 1", field="--pp")
    collectives.check_algorithm(chip.system.collective)
    return STRATEGIES[chip.family](graph, chip, pp)

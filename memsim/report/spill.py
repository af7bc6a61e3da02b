"""Where weights and the KV cache live, and what of them spills to host memory.

A level reached over a link (``via``: host DDR over PCIe, MemoryX) is host memory: weights or a KV
cache placed there stream over that link every step, which is seldom what a user meant. The
run says so in one line, naming the level, the link and the bytes.
"""
from __future__ import annotations

from memsim.core.errors import run_field
from memsim.core.units import human_bytes
from memsim.mapping import Plan
from memsim.mapping.placement import sram_may_hold
from memsim.workload.graph import OpGraph

NAMES = {"weight": "weights", "kv": "KV cache"}


def bytes_by_level(graph: OpGraph, plan: Plan) -> dict[str, dict[str, int]]:
    """Bytes of each persistent class (weights, KV cache) by the level that holds them, per chip."""
    homes = dict(plan.homes)
    out: dict[str, dict[str, int]] = {}
    for t in graph.tensors.values():
        if t.klass in NAMES and t.name in homes:
            per = out.setdefault(t.klass, {})
            per[homes[t.name]] = per.get(homes[t.name], 0) + t.bytes
    return out


def spill_warning(graph: OpGraph, plan: Plan) -> str | None:
    """One line naming what weights and KV cache a host level holds, or None where none does."""
    placed = bytes_by_level(graph, plan)
    parts = []
    for klass, levels in placed.items():
        host = {name: b for name, b in levels.items() if plan.chip.level(name).via}
        if not host:
            continue
        total = sum(levels.values())
        where = ", ".join(f"{human_bytes(b)} in {name} (over {plan.chip.level(name).via})" for name, b in host.items())
        rest = ", ".join(f"{name} {human_bytes(b)}" for name, b in levels.items() if name not in host)
        parts.append(f"{NAMES[klass]} {where} of {human_bytes(total)}" + (f" (the rest in {rest})" if rest else ""))
    if not parts:
        return None
    return ("host memory holds " + "; ".join(parts) + f": read over the link every step; more chips "
            f"({run_field('tp')}), a smaller dtype or more memory on the chip keeps them there")


def idle_warning(graph: OpGraph, plan: Plan) -> str | None:
    """One line naming a level that stays idle as a home, its ``holds`` naming no class at all, while weights or
    KV cache it has room for sit in a slower level; or None. A level that is a home for some class (a dataflow
    chip's SRAM kept for activations by design) is a choice, not an oversight; a GPU's shared memory and the
    caches are never named: they belong to one kernel at a time (``placement.default_holds``)."""
    chip = plan.chip
    order = [lvl.name for lvl in chip.levels]
    for klass, levels in bytes_by_level(graph, plan).items():
        for lvl in chip.levels:
            could = not lvl.kind_of.on_chip or (lvl.is_scratchpad and sram_may_hold(chip))  # a memory off the chip
            slower = sum(b for name, b in levels.items() if order.index(name) > order.index(lvl.name))
            idle = not any(lvl.home_for(k) for k in ("weight", "kv", "activation"))
            if could and idle and not lvl.via and slower and slower <= chip.chip_capacity(lvl):
                return (f"{lvl.name} ({human_bytes(chip.chip_capacity(lvl))}) is a home for nothing while "
                        f"{human_bytes(slower)} of {NAMES[klass]} live in slower levels: its holds: is empty "
                        f"(--set {lvl.name}.holds=weight,kv,activation keeps them there)")
    return None

"""Placement: every tensor gets a home memory level.

Each level says which tensor classes it can be a home for (``holds``; by default memories
hold everything, caches hold activations and scratchpads only stage tiles). Persistent
tensors (weights, then the KV cache) fill their eligible levels in order, fastest first,
spilling to the next one when a level is full. An activation lives in the first eligible
level large enough for it: caches keep small activations between operators.
"""
from __future__ import annotations

from memsim.errors import CapacityError
from memsim.hardware.spec import ChipSpec
from memsim.units import human_bytes
from memsim.workload.graph import OpGraph


def place(graph: OpGraph, chip: ChipSpec, kv_copies: int = 1, where: str = "") -> dict[str, str]:
    """Homes for a graph's tensors. ``kv_copies`` micro-batches each keep a KV cache of the
    graph's size; ``where`` names the pipeline stage in errors."""
    free = {lvl.name: chip.chip_capacity(lvl) for lvl in chip.levels}
    homes: dict[str, str] = {}
    # The class with fewer eligible levels goes first (a wafer's KV cache can only live in SRAM,
    # its weights can also stream from external memory); on a tie weights go first.
    order = sorted(("weight", "kv"), key=lambda k: sum(lvl.home_for(k) for lvl in chip.levels))
    persistent = [t for k in order for t in graph.tensors.values() if t.klass == k]
    size = {t.name: t.bytes * (kv_copies if t.klass == "kv" else 1) for t in persistent}
    for t in persistent:
        eligible = [lvl for lvl in chip.levels if lvl.home_for(t.klass)]
        for lvl in eligible:
            if free[lvl.name] >= size[t.name]:
                free[lvl.name] -= size[t.name]
                homes[t.name] = lvl.name
                break
        else:
            need = sum(size.values())
            have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" for lvl in eligible) or "none"
            raise CapacityError(f"{where}weights and KV cache need {need / 1e9:.2f} GB but fit in no memory level "
                                f"({have}); {t.name} has no room", field="levels")
    holders = [lvl for lvl in chip.levels if lvl.home_for("activation")] or list(chip.levels[-1:])
    for t in graph.tensors.values():
        if t.name not in homes:
            fits = [lvl for lvl in holders if chip.chip_capacity(lvl) >= t.bytes]
            homes[t.name] = (fits or holders[-1:])[0].name
    return homes

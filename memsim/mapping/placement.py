"""Placement: every tensor gets a home memory level.

Persistent tensors (weights, then KV cache) fill the off-chip levels in order, fastest
first, spilling to the next level when one is full. Activations live in the first
off-chip level and pass through SRAM tile buffers. A chip with no off-chip memory keeps
everything in its scratchpad.
"""
from __future__ import annotations

from memsim.errors import CapacityError
from memsim.hardware.spec import ChipSpec
from memsim.units import human_bytes
from memsim.workload.graph import OpGraph


def home_levels(chip: ChipSpec) -> list:
    off_chip = [lvl for lvl in chip.levels if not lvl.is_scratchpad]
    return off_chip or list(chip.levels)


def place(graph: OpGraph, chip: ChipSpec) -> dict[str, str]:
    levels = home_levels(chip)
    free = {lvl.name: chip.chip_capacity(lvl) for lvl in levels}
    homes: dict[str, str] = {}
    persistent = [t for k in ("weight", "kv") for t in graph.tensors.values() if t.klass == k]
    for t in persistent:
        for lvl in levels:
            if free[lvl.name] >= t.bytes:
                free[lvl.name] -= t.bytes
                homes[t.name] = lvl.name
                break
        else:
            need = sum(x.bytes for x in persistent)
            have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" for lvl in levels)
            raise CapacityError(f"weights and KV cache need {need / 1e9:.2f} GB but fit in no memory level "
                                f"({have}); {t.name} has no room", field="levels")
    for t in graph.tensors.values():
        homes.setdefault(t.name, levels[0].name)
    return homes

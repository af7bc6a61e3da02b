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
from memsim.workload.graph import OpGraph, Tensor


def place(graph: OpGraph, chip: ChipSpec, kv_copies: int = 1, where: str = "") -> dict[str, str]:
    """Homes for a graph's tensors. ``kv_copies`` micro-batches each keep a KV cache of the
    graph's size; ``where`` names the pipeline stage in errors."""
    # The class with fewer eligible levels goes first (a wafer's KV cache can only live in SRAM,
    # its weights can also stream from external memory); on a tie weights go first.
    order = sorted(("weight", "kv"), key=lambda k: sum(lvl.home_for(k) for lvl in chip.levels))
    persistent = [t for k in order for t in graph.tensors.values() if t.klass == k]
    size = {t.name: t.bytes * (kv_copies if t.klass == "kv" else 1) for t in persistent}
    homes, homeless = _fill(persistent, size, chip)
    if homeless is not None:
        need = sum(size.values())
        eligible = [lvl for lvl in chip.levels if lvl.home_for(homeless.klass)]
        have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" for lvl in eligible) or "none"
        message = (f"{where}weights and KV cache need {need / 1e9:.2f} GB but fit in no memory level ({have}); "
                   f"{homeless.name} has no room")
        weights = [t for t in persistent if t.klass == "weight"]
        if len(weights) < len(persistent) and _fill(weights, size, chip)[1] is None:
            # The weights fit by themselves: the KV cache, sized by the batch and the context, is what does not.
            meta = graph.meta
            option, length = (("--prompt", meta.get("tokens")) if meta.get("phase") == "prefill"
                              else ("--context", meta.get("context")))
            raise CapacityError(f"{message}; the weights alone fit: lower --batch or {option} (batch "
                                f"{meta.get('batch', '?')}, {option[2:]} {length if length is not None else '?'})",
                                field=f"--batch/{option}")
        raise CapacityError(message, field="levels")
    holders = [lvl for lvl in chip.levels if lvl.home_for("activation")] or list(chip.levels[-1:])
    for t in graph.tensors.values():
        if t.name not in homes:
            fits = [lvl for lvl in holders if chip.chip_capacity(lvl) >= t.bytes]
            homes[t.name] = (fits or holders[-1:])[0].name
    return homes


def _fill(tensors: list[Tensor], size: dict[str, int], chip: ChipSpec) -> tuple[dict[str, str], Tensor | None]:
    """Persistent tensors into their eligible levels in order, fastest first, spilling to the next
    level when one is full; and the first tensor that found no room (None when all did)."""
    free = {lvl.name: chip.chip_capacity(lvl) for lvl in chip.levels}
    homes: dict[str, str] = {}
    for t in tensors:
        for lvl in chip.levels:
            if lvl.home_for(t.klass) and free[lvl.name] >= size[t.name]:
                free[lvl.name] -= size[t.name]
                homes[t.name] = lvl.name
                break
        else:
            return homes, t
    return homes, None

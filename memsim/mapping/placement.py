"""Placement: every tensor gets a home memory level.

Each level says which tensor classes it can be a home for (``holds``; by default memories
hold everything, caches hold activations and scratchpads only stage tiles). Persistent
tensors (weights, then the KV cache) fill their eligible levels in order, fastest first,
spilling to the next one when a level is full; a table an op reads only rows of (an embedding
lookup) goes last, so it is the first to stay in a slower level (host memory). An activation lives in the first eligible
level large enough for it: caches keep small activations between operators.
"""
from __future__ import annotations

from memsim.errors import CapacityError
from memsim.hardware.spec import ChipSpec
from memsim.units import human_bytes
from memsim.workload.graph import OpGraph, Tensor


def place(graph: OpGraph, chip: ChipSpec, kv_copies: int = 1, where: str = "",
          room: dict[str, int] | None = None) -> dict[str, str]:
    """Homes for a graph's tensors. ``kv_copies`` micro-batches each keep a KV cache of the
    graph's size; ``where`` names the pipeline stage in errors; ``room`` gives the bytes a level
    has for weights and KV cache where that is less than its capacity."""
    # The class with fewer eligible levels goes first (a wafer's KV cache can only live in SRAM,
    # its weights can also stream from external memory); on a tie weights go first.
    order = sorted(("weight", "kv"), key=lambda k: sum(lvl.home_for(k) for lvl in chip.levels))
    looked_up = _lookup_tables(graph)
    persistent = sorted((t for k in order for t in graph.tensors.values() if t.klass == k),
                        key=lambda t: t.name in looked_up)  # stable: only the tables move, to the end
    size = {t.name: t.bytes * (kv_copies if t.klass == "kv" else 1) for t in persistent}
    free = {lvl.name: max(0, min(chip.chip_capacity(lvl), (room or {}).get(lvl.name, chip.chip_capacity(lvl))))
            for lvl in chip.levels}
    homes, homeless = _fill(persistent, size, chip, free)
    if homeless is not None:
        need = sum(size.values())
        eligible = [lvl for lvl in chip.levels if lvl.home_for(homeless.klass)]
        have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" + (
            f", {human_bytes(free[lvl.name])} of it left beside activations and staging"
            if free[lvl.name] < chip.chip_capacity(lvl) else "") for lvl in eligible) or "none"
        message = (f"{where}weights and KV cache need {need / 1e9:.2f} GB but fit in no memory level ({have}); "
                   f"{homeless.name} has no room")
        weights = [t for t in persistent if t.klass == "weight"]
        if len(weights) < len(persistent) and _fill(weights, size, chip, free)[1] is None:
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


def _lookup_tables(graph: OpGraph) -> set[str]:
    """Tensors that only embedding lookups read (each reads a row per token, not the table)."""
    readers: dict[str, set[str]] = {}
    for op in graph:
        for r in op.inputs:
            readers.setdefault(r.tensor, set()).add(op.kind)
    return {name for name, kinds in readers.items() if kinds == {"embedding"}}


def _fill(tensors: list[Tensor], size: dict[str, int], chip: ChipSpec,
          room: dict[str, int]) -> tuple[dict[str, str], Tensor | None]:
    """Persistent tensors into their eligible levels in order, fastest first, spilling to the next
    level when one is full (each level has ``room`` bytes); and the first tensor that found no
    room (None when all did)."""
    free = dict(room)
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

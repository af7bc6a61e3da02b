"""Placement: every tensor gets a home memory level.

Each level says which tensor classes it can be a home for (``holds``; by default memories
hold everything, caches hold activations and scratchpads only stage tiles). Persistent
tensors (weights, then the KV cache) fill their eligible levels in order, fastest first,
spilling to the next one when a level is full; a table an op reads only rows of (an embedding
lookup) goes last, so it is the first to stay in a slower level (host memory). An activation
lives in the first eligible level large enough for it: caches keep small activations between
operators. A level may offer less than its capacity (``room``: a pipeline stage's or a wafer
region's share of a scratchpad, less what its activations take).

A scratchpad that is a home for weights or the KV cache keeps a reserve for the operators'
tiles and the prefetch staging area (``sram_reserve``): persistent tensors that could live in a
slower level get only what is beyond it, so more SRAM never shrinks the room of tiles and
staging, and only tensors with nowhere else to go (an SRAM-only chip) may use the reserve.
"""
from __future__ import annotations

import dataclasses

from memsim.core.errors import CapacityError, run_field
from memsim.core.units import human_bytes
from memsim.hardware.families import ALWAYS, WITHOUT_DEVICE_MEMORY
from memsim.hardware.kinds import DEVICE
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import tile_floor
from memsim.workload.graph import OpGraph, Tensor

EVERY_CLASS = ("weight", "kv", "activation")


def sram_may_hold(chip: ChipSpec) -> bool:
    """Whether the chip's scratchpad can keep weights from one operator to the next: on a family that keeps
    them there (``Family.weights_on_chip``), always or where the chip has no device memory (its SRAM is its memory)."""
    keeps = chip.family_of.weights_on_chip
    return keeps == ALWAYS or (keeps == WITHOUT_DEVICE_MEMORY and
                               not any(lvl.kind_of.domain == DEVICE for lvl in chip.levels))


def default_holds(graph: OpGraph, chip: ChipSpec, kv_copies: int = 1) -> ChipSpec:
    """The chip with its scratchpad's ``holds`` decided where the YAML left it out. On a family that keeps
    weights in SRAM, every class. On a GPU-family chip with no device memory (no HBM, GDDR or LPDDR level:
    the SRAM is its memory, as on a chip designed around it), every class if all of the step's weights and KV
    cache fit in it beside its operators' tiles, so they live in the fastest level that holds them. Otherwise
    the kind's default: a GPU's shared memory and a CPU's caches belong to one kernel at a time and only stage
    tiles (a weight cannot stay in them from one kernel to the next)."""
    sram = chip.scratchpad
    if sram.holds is not None or not sram_may_hold(chip):
        return chip
    if chip.family_of.weights_on_chip != ALWAYS:
        persistent = [t for t in graph.tensors.values() if t.klass in ("weight", "kv")]
        need = sum(t.bytes * (kv_copies if t.klass == "kv" else 1) for t in persistent)
        if not persistent or need + _needs(graph, chip)[0] > chip.chip_capacity(sram):
            return chip
    levels = tuple(dataclasses.replace(lvl, holds=EVERY_CLASS) if lvl is sram else lvl for lvl in chip.levels)
    return dataclasses.replace(chip, levels=levels)


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
    sram = chip.scratchpad.name
    homes, homeless = _fill(persistent, size, chip, free, sram_reserve(graph, chip, persistent, size, free[sram]))
    if homeless is not None:
        need = sum(size.values())
        eligible = [lvl for lvl in chip.levels if lvl.home_for(homeless.klass)]
        have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" + (
            f", {human_bytes(free[lvl.name])} of it left beside activations and staging"
            if free[lvl.name] < chip.chip_capacity(lvl) else "") for lvl in eligible) or "none"
        message = (f"{where}weights and KV cache need {need / 1e9:.2f} GB but fit in no memory level ({have}); "
                   f"{homeless.name} has no room")
        weights = [t for t in persistent if t.klass == "weight"]
        if len(weights) < len(persistent) and \
                _fill(weights, size, chip, free, sram_reserve(graph, chip, weights, size, free[sram]))[1] is None:
            # The weights fit by themselves: the KV cache, sized by the batch and the context, is what does not.
            meta = graph.meta
            name, length = ("prompt", meta.tokens) if meta.phase == "prefill" else ("context", meta.context)
            batch, option = run_field("batch"), run_field(name)
            raise CapacityError(f"{message}; the weights alone fit: lower {batch} or {option} (batch "
                                f"{meta.batch if meta.batch is not None else '?'}, {name} "
                                f"{length if length is not None else '?'})", field=f"{batch}/{option}")
        raise CapacityError(message, field="levels")
    holders = [lvl for lvl in chip.levels if lvl.home_for("activation")] or list(chip.levels[-1:])
    for t in graph.tensors.values():
        if t.name not in homes:
            fits = [lvl for lvl in holders if chip.chip_capacity(lvl) >= t.bytes]
            if not fits:  # as weights and KV that fit nowhere: refused, not given the last level anyway
                have = ", ".join(f"{lvl.name} {human_bytes(chip.chip_capacity(lvl))}" for lvl in holders)
                raise CapacityError(f"{where}activation {t.name} needs {human_bytes(t.bytes)} but fits in no memory "
                                    f"level that holds activations ({have}): lower {run_field('batch')}, "
                                    f"{run_field('prompt')} or {run_field('context')}",
                                    field=f"tensors[{t.name}]")
            homes[t.name] = fits[0].name
    return homes


def _lookup_tables(graph: OpGraph) -> set[str]:
    """Tensors that only embedding lookups read (each reads a row per token, not the table)."""
    readers: dict[str, set[str]] = {}
    for op in graph:
        for r in op.inputs:
            readers.setdefault(r.tensor, set()).add(op.kind)
    return {name for name, kinds in readers.items() if kinds == {"embedding"}}


def tile_room(graph: OpGraph, chip: ChipSpec) -> int:
    """The scratchpad the tiles of ``graph``'s operators need (``_needs``)."""
    return _needs(graph, chip)[0]


def _needs(graph: OpGraph, chip: ChipSpec) -> tuple[int, int]:
    """What tiles and the staging area would use of the scratchpad: the largest least-traffic tile
    of any op (``lower.tile_floor``; more SRAM gives tiles nothing) and ``prefetch_depth`` times
    the largest GEMM's weights (each GEMM staged whole; 0 with weight prefetch off)."""
    ex = chip.execution
    tiles = max((tile_floor(op, graph, chip) for op in graph), default=0)
    weights = [r.bytes for op in graph if op.kind == "matmul" for r in op.inputs
               if graph.tensors[r.tensor].klass == "weight"]
    return tiles, ex.prefetch_depth * max(weights, default=0) if ex.weight_prefetch else 0


def sram_reserve(graph: OpGraph, chip: ChipSpec, persistent: list[Tensor], size: dict[str, int],
                 capacity: int | None = None) -> int:
    """Bytes of the scratchpad (of its ``capacity``: all of it, or a stage's room) kept for tiles
    and the staging area when it is also a home for persistent tensors (0 when it is not).

    Tiles get what they need first. If the eligible tensors all fit beside that, nothing is left
    to prefetch and that is the reserve. Otherwise the weights left in a slower level are staged
    through the scratchpad: the staging area gets what it needs, but at most half of what the
    tiles leave, and resident weights the rest. Each of the three only grows with the capacity."""
    sram = chip.scratchpad
    if not any(sram.home_for(k) for k in ("weight", "kv")):
        return 0
    capacity = chip.chip_capacity(sram) if capacity is None else capacity
    tiles, staging = _needs(graph, chip)
    eligible = sum(size[t.name] for t in persistent if sram.home_for(t.klass))
    if eligible + tiles <= capacity:
        return min(capacity, tiles)
    return min(capacity, tiles + min(staging, max(0, capacity - tiles) // 2))


def _fill(tensors: list[Tensor], size: dict[str, int], chip: ChipSpec, room: dict[str, int], reserve: int = 0
          ) -> tuple[dict[str, str], Tensor | None]:
    """Persistent tensors into their eligible levels in order, fastest first, spilling to the next
    level when one is full (each level has ``room`` bytes); and the first tensor that found no
    room (None when all did).

    Tensors that can live nowhere but the scratchpad go first and may use all of it. Of the
    others it takes the smallest first, up to all but its ``reserve``, and stops at the first that
    does not fit: the most operators then read nothing from a slower level (each such read pays
    that level's latency), and a larger scratchpad holds a superset of what a smaller one holds."""
    free = dict(room)
    sram = chip.scratchpad.name
    last = {t.name: [lvl.name for lvl in chip.levels if lvl.home_for(t.klass)][-1:] == [sram] for t in tensors}
    homes: dict[str, str] = {}

    def put(t: Tensor, keep: int) -> bool:
        for lvl in chip.levels:
            if lvl.home_for(t.klass) and free[lvl.name] - (keep if lvl.name == sram else 0) >= size[t.name]:
                free[lvl.name] -= size[t.name]
                homes[t.name] = lvl.name
                return True
        return False

    for t in tensors:
        if last[t.name] and not put(t, 0):
            return homes, t
    keep = min(reserve, free[sram])
    for t in sorted((t for t in tensors if not last[t.name] and chip.scratchpad.home_for(t.klass)),
                    key=lambda t: size[t.name]):
        if free[sram] - keep < size[t.name]:
            break
        free[sram] -= size[t.name]
        homes[t.name] = sram
    for t in tensors:
        if t.name not in homes and not put(t, free[sram]):  # the scratchpad is full for them
            return homes, t
    return homes, None


def sram_split(graph: OpGraph, chip: ChipSpec, homes: dict[str, str], kv_copies: int = 1,
               capacity: int | None = None) -> tuple[int, int]:
    """The scratchpad (of its ``capacity``: a chip's, or a stage's room) that tiles and the staging
    area share, and the staging area's part.

    A scratchpad that holds no persistent tensors gives them all of it, half each with weight
    prefetch on. One that does gives them what the tensors placed in it leave (while some live in
    a slower level, no more than the reserve, so that the room only grows with the capacity):
    tiles what they need first, staging the rest, none when every weight is resident."""
    sram = chip.scratchpad
    capacity = chip.chip_capacity(sram) if capacity is None else capacity
    prefetch = chip.execution.weight_prefetch
    persistent = [t for t in graph.tensors.values() if t.klass in ("weight", "kv") and sram.home_for(t.klass)]
    if not persistent:
        return capacity, capacity // 2 if prefetch else 0
    size = {t.name: t.bytes * (kv_copies if t.klass == "kv" else 1) for t in persistent}
    resident = sum(size[t.name] for t in persistent if homes[t.name] == sram.name)
    if all(homes[t.name] == sram.name for t in graph.tensors.values() if t.klass == "weight"):
        return capacity - resident, 0
    kept = min(capacity, sram_reserve(graph, chip, persistent, size, capacity))
    room = capacity - max(resident, capacity - kept)
    return room, room - min(room, _needs(graph, chip)[0]) if prefetch else 0

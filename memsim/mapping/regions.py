"""A layer-pipelined chip's regions: which blocks each runs, and its share of the chip.

A region is a set of the chip's cores, each with its compute and its SRAM, so a region's share
of the chip is its share of both. Its layers' weights and KV cache live in its SRAM, with room
for the largest working set of activations one of its ops uses (``partition.working_set``), so
its share is at least what those bytes need. The rest of the chip is given out by time: a
region's least time on the whole chip (its roofline) divided by its share is how long it takes,
and the shares make the slowest region as fast as it can be. So a region gets
``max(needs / capacity, roofline / T)`` with ``T`` the least for which the shares fill the chip:
in a prefill the shares follow the FLOPs, in a decode the bytes read. When the bytes need more
than the chip, there are no regions (the caller streams the weights instead).

Regions follow the layers: one per layer of the chip's pipeline stage, the ops before the first
layer (the embedding) joining the first layer's region and those after the last (final norm,
LM head) the last one's, so the cores that hold a table also compute a layer. A chip with more
layers than regions (chips hold uneven stages) merges neighbouring layers.
"""
from __future__ import annotations

from memsim.hardware.rates import Share, share_of
from memsim.hardware.spec import ChipSpec
from memsim.mapping.partition import Block, working_set
from memsim.mapping.placement import tile_room
from memsim.mapping.roofline import roofline
from memsim.workload.graph import OpGraph


def groups(items: list[Block], chip_of: list[int], pp: int) -> tuple[int, list[int]]:
    """(regions per chip, the stage of each block: chip * regions + its region)."""
    units: list[list[list[int]]] = []  # per chip: runs of blocks that share a region at least
    for c in range(pp):
        runs: list[list[int]] = []
        for i in (i for i, ch in enumerate(chip_of) if ch == c):
            joins = runs and (items[i].kind == "post" or all(items[j].kind == "pre" for j in runs[-1]))
            if joins:
                runs[-1].append(i)
            else:
                runs.append([i])
        units.append(runs)
    regions = max(1, min(len(runs) for runs in units))
    out = [0] * len(items)
    for c, runs in enumerate(units):
        for u, run in enumerate(runs):
            for i in run:
                out[i] = c * regions + u * regions // len(runs)
    return regions, out


def needs(chip: ChipSpec, graph: OpGraph, kv_copies: int) -> int:
    """SRAM bytes a region running ``graph`` needs: the weights and KV cache the SRAM can hold,
    the largest working set of activations, and the room its tiles need (the reserve placement
    keeps for them, ``placement.sram_reserve``)."""
    sram = chip.scratchpad
    resident = sum(t.bytes * (kv_copies if t.klass == "kv" else 1) for t in graph.tensors.values()
                   if t.klass in ("weight", "kv") and sram.home_for(t.klass))
    return resident + working_set(graph) + tile_room(graph, chip)


def shares(chip: ChipSpec, graphs: list[OpGraph], kv_copies: int) -> list[Share] | None:
    """Each region's share of the chip (``graphs``: one chip's regions), or None when their bytes
    need more SRAM than the chip has."""
    capacity = chip.chip_capacity(chip.scratchpad)
    floor = [Share(needs(chip, g, kv_copies), capacity) for g in graphs]
    if sum(floor) > 1:
        return None
    times = [Share(roofline(g, chip, {n: chip.scratchpad.name for n in g.tensors})[0]) for g in graphs]
    return fill(floor, times)


def fill(floor: list[Share], times: list[Share]) -> list[Share]:
    """Shares at least ``floor`` (which sums to at most 1), the rest given out so that the largest
    ``times[r] / share[r]`` is least: ``share[r] = max(floor[r], times[r] / T)`` summing to 1,
    exactly (a region of a third of a chip of three channels has one)."""
    if not any(times):  # nothing takes time: the rest in proportion to the bytes
        times = list(floor) if any(floor) else [Share(1)] * len(floor)
    timed = {r for r, t in enumerate(times) if t > 0}
    while True:
        # The timed regions share what the others' floors leave, in proportion to their times.
        left = 1 - sum(f for r, f in enumerate(floor) if r not in timed)
        total = sum(times[r] for r in timed)
        share = {r: left * (times[r] / total) for r in timed}
        held = {r for r in timed if share[r] < floor[r]}
        if not held:
            break
        timed -= held
    if not timed:  # every region at its floor: the rest in proportion to it
        total = sum(floor)
        return [share_of(f / total) for f in floor]
    return [share_of(share[r] if r in timed else floor[r]) for r in range(len(floor))]

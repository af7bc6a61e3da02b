"""The power cap: a step's compute slowed until what it draws fits under its chip's cap.

A chip draws its static power (``power.static``) whenever it is on. On top of it, each chunk of
a step spends dynamic energy: its FLOPs (``Step.compute_fj``, ``Step.unpack_fj``) and the bits
it moves, at each level's and link's energy per bit (a level reached over a link costs both).
At its own pace (the longer of its compute and its busiest level or link at full bandwidth), a
chunk draws that energy over that time. When this exceeds what the cap leaves above the static
power (a region's share of it, on a chip cut into regions), the chunk's compute is slowed until
the chunk lasts energy / budget, as a GPU's power management lowers its clocks under a power
limit. The slowdown is kept apart (``Step.throttle_ps``) and shown as stall cause ``power``.

The energy per FLOP is kept as the clocks come down. Lowering the voltage with them (DVFS) would
also lower it, so this slowdown is an upper bound on the real one. Memory clocks are left as
they are: a bandwidth-bound step is only throttled once its traffic alone draws more than the cap.
"""
from __future__ import annotations

import dataclasses

from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import bandwidth_of
from memsim.mapping.plan import Step
from memsim.units import transfer_ps

BITS_PER_BYTE = 8


def bit_energy(chip: ChipSpec, where: Ref) -> int:
    """Femtojoules per bit moved at a level (and over the link it is reached over) or a link."""
    if where.is_link:
        return chip.link(where.name).energy_fj_per_bit
    level = chip.level(where.name)
    via = chip.link(level.via).energy_fj_per_bit if level.via else 0
    return level.energy_fj_per_bit + via


def step_energy(chip: ChipSpec, step: Step) -> int:
    """Femtojoules of dynamic energy all of a step's chunks spend: FLOPs, unpacking and bits moved."""
    moved = sum(b * BITS_PER_BYTE * bit_energy(chip, where) for where, b in step.total_loads + step.total_stores)
    return step.compute_fj + step.unpack_fj + moved


def chunk_pace(chip: ChipSpec, step: Step) -> int:
    """Picoseconds one chunk takes at full clocks: its compute, or its busiest level or link."""
    busy: dict[Ref, int] = {}
    for where, b in step.loads + step.stores:
        busy[where] = busy.get(where, 0) + transfer_ps(b, max(1, int(bandwidth_of(chip, where) * step.share)))
    memory = max(busy.values(), default=0) + step.unpack_ps  # unpacking is serial with the load stream
    return max(step.compute_ps, memory)


def budget_mw(chip: ChipSpec, share: float = 1.0) -> int:
    """Milliwatts of dynamic power a chip (or a region, its ``share`` of it) may draw; 0: no cap."""
    cap = chip.power_cap_mw
    if not cap:
        return 0
    return max(1, int((cap - chip.power.static_mw) * share))


def throttle(chip: ChipSpec, step: Step, budget: int, extra_fj: int = 0) -> Step:
    """``step`` with its compute slowed so that a chunk draws at most ``budget`` milliwatts, counting
    ``extra_fj`` spent beside it (the copy engine fetching its weights) as its own."""
    if not budget or not step.compute_ps:
        return step
    need = -(-(step_energy(chip, step) + extra_fj) // (step.count * budget))  # fJ / mW = ps
    if need <= chunk_pace(chip, step):
        return step
    extra = need - step.compute_ps
    return dataclasses.replace(step, compute_ps=need, throttle_ps=extra)


def limit(chip: ChipSpec, steps: tuple[Step, ...], share: float = 1.0, beside: tuple[Step, ...] = ()) -> tuple[Step, ...]:
    """An operator's steps under the chip's power cap (a region's ``share`` of it). ``beside`` are
    the steps of the copy that prefetched its weights: that energy is spent while the operators
    before it compute, and is charged to this one, so that over the run the chip's average power
    stays under the cap (each joule is charged to one operator's compute time)."""
    budget = budget_mw(chip, share)
    if not budget:
        return steps
    extra = sum(step_energy(chip, s) for s in beside)
    weights = [s.compute_ps * s.count for s in steps]
    total = sum(weights)
    return tuple(throttle(chip, s, budget, extra * w // total if total else 0) for s, w in zip(steps, weights))

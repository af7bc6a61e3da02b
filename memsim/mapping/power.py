"""A chip at a lower clock: what dynamic voltage and frequency scaling (DVFS) does to its figures.

A chip's power limiter keeps it under its cap by lowering the core clock, and the core voltage
with it. The core clock domain holds the compute units and the on-chip memories and fabric, so
the chip at clock fraction f (``at_clock``) has:

- its compute peaks, matrix and vector, x f;
- its on-chip levels' (SRAM, L2, L3) and on-chip fabric's (``execution.fabric``) bandwidth x f
  and latency / f: they move a fixed number of bytes a cycle;
- its dynamic energy per FLOP and per on-chip bit x (V(f) / V(1))^2: a transition charges a
  switched capacitance to the supply voltage, C V^2 whatever the clock;
- off-chip memory (HBM, DDR, GDDR, LPDDR, external) and chip links as they are: they run on
  clocks and voltages of their own. A DRAM level's energy per bit keeps the ~2 pJ/bit of its
  path across the die (configs/energy.md, rule M), an upper bound on that part;
- static power as it is: the presets' static figures are idle powers, drawn at the floor
  voltage, and the leakage above them at a higher voltage is inside the dynamic energies
  (configs/energy.md, rule C), which scale with V^2 (leakage power falls faster than V: its
  current falls with V through drain-induced barrier lowering).

The voltage (``voltage``) stays at its floor up to a ridge clock and rises linearly in the clock
above it, the shape GPU V/f curves have (Schoonhoven et al., "Going green", PMBS 2022, fit it
to measured GPU power against clock; TechPowerUp's tables of GeForce cards give the numbers,
configs/energy.md, rule D); the preset's ``power`` section gives the clocks and the floor.
``clocks`` is the grid the limiter sets the clock on, and ``throttled`` marks, in a plan made
for the chip at a lower clock, the compute time the lower clock added (``Step.throttle_ps``, stall cause ``power``).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from memsim.hardware.kinds import CORE
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec, PowerSpec
from memsim.mapping.plan import Plan, Step

GRID_STEPS = 64  # clock steps of a chip that gives no clock step of its own


def bit_energy(chip: ChipSpec, where: Ref) -> int:
    """Femtojoules per bit moved at a level (and over the link it is reached over) or a link."""
    if where.is_link:
        return chip.link(where.name).energy_fj_per_bit
    level = chip.level(where.name)
    via = chip.link(level.via).energy_fj_per_bit if level.via else 0
    return level.energy_fj_per_bit + via


def clocks(spec: PowerSpec) -> tuple[Fraction, ...]:
    """The clocks the limiter may set, as fractions of ``max_clock``, ascending; the last is 1."""
    top = spec.max_clock_hz or GRID_STEPS
    step = Fraction(spec.clock_step_hz) if spec.clock_step_hz else Fraction(top, GRID_STEPS)
    low = Fraction(spec.min_clock_hz) if spec.min_clock_hz else step
    grid = []
    while low < top:
        grid.append(low / top)
        low += step
    return (*grid, Fraction(1))


def voltage(spec: PowerSpec, f: Fraction) -> float:
    """The core voltage at clock fraction ``f``, as a fraction of the voltage at the maximum clock."""
    if spec.floor_voltage >= 1:
        return 1.0
    ridge = Fraction(spec.ridge_clock_hz, spec.max_clock_hz) if spec.ridge_clock_hz else clocks(spec)[0]
    if ridge >= 1:
        return 1.0
    if f <= ridge:
        return spec.floor_voltage
    return spec.floor_voltage + (1 - spec.floor_voltage) * float((f - ridge) / (1 - ridge))


def at_clock(chip: ChipSpec, f: Fraction) -> ChipSpec:
    """``chip`` with its core clock at fraction ``f`` of the maximum (see the module's docstring)."""
    if f == 1:
        return chip
    squared = voltage(chip.power, f) ** 2

    def rate(value: int) -> int:
        return max(1, math.floor(value * f))

    def energy(fj: int) -> int:
        return round(fj * squared)

    def slower(latency_ps: int) -> int:
        return math.ceil(latency_ps / f)

    c = chip.compute
    compute = dataclasses.replace(
        c, peak_flops_per_s=tuple((d, rate(p)) for d, p in c.peak_flops_per_s), vector_flops_per_s=rate(c.vector_flops_per_s),
        special_flops_per_s=rate(c.special_flops_per_s) if c.special_flops_per_s else 0,
        energy_fj_per_flop=tuple((d, energy(e)) for d, e in c.energy_fj_per_flop),
        vector_energy_fj_per_flop=energy(c.vector_energy_fj_per_flop))
    levels = tuple(dataclasses.replace(lvl, bandwidth_bytes_per_s=rate(lvl.bandwidth_bytes_per_s),
                                       latency_ps=slower(lvl.latency_ps), energy_fj_per_bit=energy(lvl.energy_fj_per_bit))
                   if lvl.kind_of.clock == CORE else lvl for lvl in chip.levels)
    links = tuple(dataclasses.replace(lk, bandwidth_bytes_per_s=rate(lk.bandwidth_bytes_per_s),
                                      latency_ps=slower(lk.latency_ps), energy_fj_per_bit=energy(lk.energy_fj_per_bit))
                  if lk.name == chip.execution.fabric else lk for lk in chip.links)
    return dataclasses.replace(chip, compute=compute, levels=levels, links=links)


def throttled(plan: Plan, f: Fraction) -> Plan:
    """``plan``, made for its chip at clock ``f``, with the compute time the lower clock added to each
    step marked as the power cap's (``Step.throttle_ps``): its compute at full clock takes ``f`` of it."""
    if f == 1:
        return plan
    slowed: dict[Step, Step] = {}

    def slow(step: Step) -> Step:
        if step not in slowed:
            full = math.ceil(step.compute_ps * f)
            # The SRAM feeds the units at the clock too (``at_clock``): the feed's wait at full clock stays its own.
            slowed[step] = dataclasses.replace(step, throttle_ps=step.compute_ps - full,
                                               feed_ps=min(full, math.ceil(step.feed_ps * f))) if step.compute_ps else step
        return slowed[step]

    tasks = tuple(dataclasses.replace(t, steps=tuple(slow(s) for s in t.steps)) for t in plan.tasks)
    return dataclasses.replace(plan, tasks=tasks, clock=float(f))

"""The power section of a chip: its power limit and static power, the window its power limiter
averages over, and the clocks and voltages it may lower the chip to (DVFS). What a lower clock
does to the chip's figures is ``memsim.mapping.power``; how the cap picks the clock is
``memsim.run.powercap``.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.hardware.checks import check_fields, fail
from memsim.hardware.fields import spec_field


@dataclass(frozen=True, slots=True)
class PowerSpec:
    tdp_mw: int = spec_field("tdp", "power", "thermal design power (the board's power limit) of one chip (0: unknown, "
                             "no cap unless `execution.power_cap` sets one)", 0)
    static_mw: int = spec_field(
        "static", "power", "power one chip draws whenever it is on with a model loaded, whatever it does: leakage, "
        "clocks, idle memory and the board", 0
    )
    window_ps: int = spec_field(
        "window", "time", "the time the power limiter averages over: the cap holds for the chip's mean power over "
        "any window this long (a step shorter than it: its mean; 0: the whole step)", 0
    )
    # DVFS: under a cap the limiter lowers the core clock, and the voltage with it.
    max_clock_hz: int = spec_field(
        "max_clock", "frequency", "the core clock the peaks, on-chip bandwidths and energies are given at (0: not "
        "given; clocks are then fractions of it, in steps of 1/64)", 0
    )
    min_clock_hz: int = spec_field("min_clock", "frequency", "the lowest clock the power limiter sets (0: one "
                                   "clock step)", 0)
    clock_step_hz: int = spec_field("clock_step", "frequency", "the steps the clock moves in (0: 1/64 of "
                                    "max_clock)", 0)
    ridge_clock_hz: int = spec_field(
        "ridge_clock", "frequency", "the clock up to which the core voltage stays at `floor_voltage`; above it the "
        "voltage rises linearly to its value at `max_clock` (0: min_clock)", 0
    )
    floor_voltage: float = spec_field(
        "floor_voltage", "ratio", "the core voltage at and below `ridge_clock`, as a fraction of the voltage at "
        "`max_clock` (1: the voltage never falls, only the clock)", 1.0
    )

    def __post_init__(self) -> None:
        check_fields(self, "power")
        if not self.max_clock_hz:
            for name in ("min_clock", "clock_step", "ridge_clock"):
                if getattr(self, f"{name}_hz"):
                    fail("needs power.max_clock", f"power.{name}")
            return
        if self.min_clock_hz > self.max_clock_hz:
            fail("must not exceed power.max_clock", "power.min_clock")
        if self.clock_step_hz > self.max_clock_hz:
            fail("must not exceed power.max_clock", "power.clock_step")
        if not self.min_clock_hz <= self.ridge_clock_hz <= self.max_clock_hz and self.ridge_clock_hz:
            fail("must lie from power.min_clock to power.max_clock", "power.ridge_clock")

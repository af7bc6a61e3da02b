"""The power cap as a clock: a step runs at the highest clock at which its chips fit under their cap.

A chip's power limiter holds its mean power over a sliding window (``power.window``) under the
cap (``execution.power_cap``, else ``power.tdp``) by lowering the core clock and voltage
(``memsim.mapping.power``). ``run`` simulates a step at full clock; if a chip's highest windowed
power (``report.energy.chip_power``: its regions together, static included) exceeds the cap, it
finds, by bisection over the chip's clock grid (``mapping.power.clocks``), the highest clock
whose simulated run fits, and returns that run. A run within its cap costs one simulation; one
over it about log2(grid) more. All the chips of a run share one clock, the one the hottest chip
fits at: under tensor and pipeline parallelism they run in lockstep, and the others would wait.

A higher cap never chooses a lower clock, whatever the power does between clocks: the bisection
probes a fixed sequence of clocks that depends on the cap only through "does this clock fit",
and where the answers for two caps first differ, the higher cap's clock fits and every clock it
goes on to choose lies at or above that probe, while the lower cap's lie below it. A run is then
never slower under a higher cap as long as a step is never slower at a higher clock, which the
tests check. If no clock fits (what memory and links draw alone exceeds the cap), the step runs
at the lowest clock and its ``chip_power_w`` exceeds ``power_cap_w``: never in silence, the
summary says by how much (``power_cap_unmet_w``) and the run warns (``unmet``).
"""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from memsim.engine import EngineResult
from memsim.hardware.spec import ChipSpec
from memsim.mapping import Plan, power
from memsim.report.energy import chip_power
from memsim.report.summary_fields import Summary
from memsim.report.summary_records import ABSENT


def unmet(summary: Summary) -> str | None:
    """One line where no clock held the run's power cap, else None."""
    if summary.power_cap_unmet_w is ABSENT:
        return None
    return (f"the power cap of {summary.power_cap_w:g} W a chip is not held: at the lowest clock the limiter sets "
            f"({summary.clock:.3g} of max) the chip still draws {summary.chip_power_w:.1f} W over "
            f"{summary.power_window_s * 1e3:.3g} ms, {summary.power_cap_unmet_w:.1f} W above it (memory, links and "
            "static power alone exceed it)")


def fits(plan: Plan, result: EngineResult) -> bool:
    """Whether every chip of the run draws at most its cap over every window (no cap: always)."""
    cap = plan.chip.power_cap_mw
    return not cap or chip_power(plan, result) <= cap / 1000


def run(chip: ChipSpec, plan_at: Callable[[ChipSpec], Plan],
        execute: Callable[[Plan], EngineResult]) -> tuple[Plan, EngineResult]:
    """The plan and result of a step at the highest clock whose run fits the cap; ``plan_at``
    maps the step for a chip, ``execute`` simulates a plan."""
    plan = plan_at(chip)
    result = execute(plan)
    if fits(plan, result):
        return plan, result
    grid = power.clocks(chip.power)
    runs: dict[int, tuple[Plan, EngineResult]] = {len(grid) - 1: (plan, result)}

    def attempt(i: int) -> tuple[Plan, EngineResult]:
        f: Fraction = grid[i]
        at = power.throttled(plan_at(power.at_clock(chip, f)), f)
        runs[i] = (at, execute(at))
        return runs[i]

    lo, hi = -1, len(grid) - 1  # grid[hi] does not fit; grid[lo] does (-1: none known to)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(*attempt(mid)):
            lo = mid
        else:
            hi = mid
    return runs[max(lo, 0)]

"""How far a run's result moves across the ranges of the estimated preset values it rests on.

A preset value nobody publishes is an estimate with a range (``memsim.hardware.estimates``).
After a run, this module says which estimates the result depends on and, for the ones that
can change the step time, reruns the step with each at the low and the high end of its range
(one at a time, everything else as it was): the estimates the result is most sensitive to are
named with the step time and energy at both ends. Orchestration only: every rerun goes through
the ordinary pipeline.

An estimate can only matter if the run uses what it describes. Before anything is rerun, the
run's summary and the levels and links it moved bytes through (``memsim.run.api.Result.moved``, the
engine's typed accounts) rule out the others, exactly:
- a memory level's or a link's figures, when the run moved no byte there (a level's capacity
  is always kept: it decides where tensors live);
- the system's figures, on one chip;
- an energy per FLOP or per bit, or the static power, when the run stays under its power cap
  even with that value at the high end of its range (the peak power can rise at most by that
  factor, or by that many watts): then the step time does not depend on it, and the energy at
  the ends follows without a rerun, energy being linear in those figures;
- the power cap (the TDP) when even its low end is above the run's peak power;
- the figures of the clock grid and of the voltage curve (``power.min_clock``, ``clock_step``,
  ``ridge_clock``, ``floor_voltage``, ``max_clock``) when the run was not power-limited: they
  only shape a lowered clock, and a run at its full clock fits its cap whatever they are;
- the limiter's window, in a run at full clock, when at either end of its range the chip could
  not exceed its cap even if all the step's dynamic energy fell within one window; or, for one
  step whose records are at hand (``Known``), when at both ends each chip's highest mean power over
  a window that long, read off the run's own power profile, is within the cap: the limiter would
  keep the full clock, so the rerun would be the run itself;
- for one step, the capacity of a level the run moved no byte through that comes after every level
  holding one of its tensors (``Known``): placement fills levels fastest first and takes the first
  that fits, so it never reached that level, whatever its size.
An end of a range equal to the value is the run itself and is not rerun.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from memsim.core import progress
from memsim.engine import EngineResult
from memsim.hardware.estimates import Estimate
from memsim.hardware.resource import Ref
from memsim.mapping import Plan
from memsim.report.energy import chip_power
from memsim.report.summary_fields import Summary
from memsim.report.summary_records import ABSENT, Estimates, Sensitive

Moved = frozenset[Ref] | None  # the levels and links a run moved bytes through (None: not known)

ENERGY_UNITS = ("bit_energy", "flop_energy")
# What shapes the clock a capped run is lowered to (``memsim.mapping.power``): nothing at full clock.
CLOCK_SHAPE = ("power.min_clock", "power.clock_step", "power.ridge_clock", "power.floor_voltage", "power.max_clock")


@dataclass(frozen=True)
class Known:
    """What the run of one step knows beyond its summary: the levels placement never reached (after
    every level holding a tensor, and moved no byte) and each chip's highest mean power over a
    window of a given length in ps, static included (what its limiter checks)."""

    unreached: frozenset[Ref] = frozenset()
    window_power_w: Callable[[int], float] | None = None


def known_of(plan: Plan, result: EngineResult, moved: frozenset[Ref]) -> Known:
    """``Known`` of one step's plan and records (``moved``: the levels and links it moved bytes through)."""
    held = {name for _, name in plan.homes}
    last = max((i for i, lvl in enumerate(plan.chip.levels) if lvl.name in held), default=len(plan.chip.levels))
    unreached = frozenset(Ref.level(lvl.name) for lvl in plan.chip.levels[last + 1:]) - moved
    return Known(unreached=unreached, window_power_w=lambda window: chip_power(plan, result, window=window))


def _peak_per_chip(summary: Summary) -> float:
    return summary.peak_power_w / max(1, summary.chips)


def _capped(summary: Summary) -> float | None:
    """The cap per chip in watts, or None when there is none."""
    return summary.power_cap_w or None


def _unused_level_or_link(e: Estimate, moved: Moved) -> bool:
    """A figure other than the capacity of a level or link the run moved no byte through
    (``moved``: the levels and links it did, None where that is not known)."""
    return e.owner is not None and e.key != "capacity" and moved is not None and e.owner not in moved


def _window_cannot_bind(e: Estimate, summary: Summary, cap: float) -> bool:
    """No window in ``e``'s range can hold a chip's mean power above ``cap``: the highest mean over
    a window is at most the static power plus the step's dynamic energy (all chips') over it."""
    seconds, chips = summary.step_time_s, summary.chips
    if not seconds:
        return True
    joules = summary.energy_j
    static_w = joules.static / seconds / max(1, chips)
    dynamic = joules.total - joules.static
    return all(static_w + dynamic / (min(end / 10**12, seconds) if end else seconds) <= cap for end in (e.low, e.high))


def _unused_by_stack(e: Estimate, summary: Summary) -> bool:
    """A stack's value the run cannot depend on: its serving policies (a serving run's, not a step's),
    its step work on a graph that is no model's step, its collectives on one chip, its eager launches'
    costs on a step it launched as a graph."""
    if not e.path.startswith("stack."):
        return False
    path = e.path.removeprefix("stack.")
    launch, phase, chips = summary.stack.launch, summary.workload.phase, summary.chips
    return (path.startswith("serving.")
            or (path.startswith("step.") and phase not in ("decode", "prefill", "generate"))
            or (path.startswith("collectives") and chips <= 1)
            or (path in ("dispatch.launch", "dispatch.op") and launch == "graph" and chips <= 1)
            or (path in ("dispatch.graph", "dispatch.node") and launch == "eager"))


def affects_time(e: Estimate, summary: Summary, moved: Moved = None, known: Known = Known()) -> bool:
    """Whether the step time can depend on ``e``: False only where it provably cannot."""
    if _unused_level_or_link(e, moved) or _unused_by_stack(e, summary) or \
            (e.key == "capacity" and e.owner in known.unreached):
        return False
    if e.section == "system" and summary.chips <= 1:
        return False
    cap, peak = _capped(summary), _peak_per_chip(summary)
    if e.unit in ENERGY_UNITS:
        return cap is not None and e.value > 0 and peak * e.high / e.value > cap
    if e.path == "power.static":
        return cap is not None and peak + (e.high - e.value) / 1000 > cap
    if e.path in ("power.tdp", "execution.power_cap"):
        return peak > e.low / 1000
    if e.path in CLOCK_SHAPE:
        return summary.clock < 1
    if e.path == "power.window":
        if cap is None or summary.clock < 1:
            return cap is not None
        if known.window_power_w is not None:  # the limiter's check at each end, on the run's own profile
            return any(known.window_power_w(int(end)) > cap for end in (e.low, e.high))
        return not _window_cannot_bind(e, summary, cap)
    return True


def energy_at(e: Estimate, summary: Summary, moved: Moved = None) -> tuple[float, float] | None:
    """The run's energy with ``e`` at its low and high ends, when the step time does not depend on
    it (energy is linear in energies per FLOP and per bit and in static power); None otherwise."""
    joules = summary.energy_j
    total = joules.total
    if e.path == "power.static":
        seconds, chips = summary.step_time_s, summary.chips
        return tuple(total + (end - e.value) / 1000 * chips * seconds for end in (e.low, e.high))
    if e.unit not in ENERGY_UNITS or not e.value or _unused_level_or_link(e, moved):
        return None
    if e.owner is not None:  # energy_j keys levels and links by the names the chip gives them
        part = (joules.links if e.owner.is_link else joules.levels).get(e.owner.name, 0.0)
    else:  # compute: matrix or vector energy per FLOP, both in the compute share
        part = joules.compute
    return tuple(total + part * (end / e.value - 1) for end in (e.low, e.high))




AUTO_TOP = 3  # estimates the console names by default
# Engine events, timeline records and collective transfers of a run beyond which the console
# does not rerun it by default: each of a dozen reruns costs about what the run did (wse-3's
# BERT-base prefill of 32 tokens, 45,000 of them, takes 5 s a run here, a minute with its
# reruns; a 256-rank all-reduce's one-shot rounds are 65,280 transfers each).
AUTO_WORK = 20_000


def work(summary: Summary) -> int:
    """What a run cost the mapping and the engine: its events, timeline records and the distinct
    transfers of its collectives."""
    counts = summary.engine
    return counts.events + counts.records + counts.transfers


def auto(summary: Summary) -> int:
    """The estimates the console reruns by default: ``AUTO_TOP`` where the run is small enough
    that its reruns take seconds, else none (``--sensitivity N`` asks for them whatever the size)."""
    return AUTO_TOP if work(summary) <= AUTO_WORK else 0


def report(summary: Summary, found: tuple[Estimate, ...], moved: Moved, top: int = 0,
           rerun: Callable[[str, str], tuple[float, float]] | None = None, known: Known = Known()) -> Estimates:
    """The ``estimates`` key of a run's summary: every estimate the result rests on and, with
    ``top`` > 0, the ``top`` it is most sensitive to with the step time and energy at both ends
    of their ranges. ``rerun(path, value)`` gives the step time (s) and energy (J) of the same run
    with one more ``--set`` (two reruns for each estimate that can change the step time). ``known``: what the run of
    one step knows beyond its summary (``known_of``)."""
    used = [e for e in found if affects_time(e, summary, moved, known) or energy_at(e, summary, moved) is not None]
    out = Estimates(count=len(found), used=tuple(e.path for e in used))
    if top <= 0 or not used or rerun is None:
        return out
    base_s, base_j = summary.step_time_s, summary.energy_j.total
    rows = []
    with progress.bar(len(used), "estimate", "estimates' ranges") as shown:
        for e in used:
            rows.append(_row(e, summary, moved, rerun, base_s, base_j, known))
            shown.update()
    rows.sort(key=lambda r: r[0], reverse=True)
    every = [base_s, *(t for _, row in rows for t in row.step_time_s)]
    # the band: over every estimate used, each alone at the ends of its range
    return dataclasses.replace(out, sensitive=tuple(row for _, row in rows[:top]), band_s=(min(every), max(every)))


def _row(e: Estimate, summary: Summary, moved: Moved, rerun: Callable[[str, str], tuple[float, float]], base_s: float,
         base_j: float, known: Known) -> tuple[tuple[float, float], Sensitive]:
    """One estimate's row: the step time and energy at both ends of its range (reruns where the time
    can change), and how far each swings, its sort key first."""
    energy = energy_at(e, summary, moved)
    if energy is not None and not affects_time(e, summary, moved, known):
        times = (base_s, base_s)
    else:
        low, high = [(base_s, base_j) if end == e.value else rerun(e.set_path, text)
                     for end, text in ((e.low, e.written[1]), (e.high, e.written[2]))]
        times, energy = (low[0], high[0]), (low[1], high[1])
    swing_s = max(abs(t - base_s) for t in times) / base_s if base_s else 0.0
    swing_j = max(abs(j - base_j) for j in energy) / base_j if base_j else 0.0
    return (swing_s, swing_j), Sensitive(field=e.path, value=e.written[0], range=e.written[1:], step_time_s=times,
                                         energy_j=energy, step_swing=swing_s, energy_swing=swing_j)


BAND_SHOWN = 0.1  # the console names the band of the estimates when it is wider than this share of the step


def lines(estimates: Estimates, step_s: float = 0.0) -> list[str]:
    """The console lines for a summary's ``estimates`` (``step_s``: the run's step time)."""
    if estimates is ABSENT or not estimates.used:
        return []
    out = [f"  estimates        the result rests on {len(estimates.used)} estimated preset values "
           f"(of {estimates.count}){'; most sensitive:' if estimates.sensitive else ''}"]
    for row in estimates.sensitive:
        lo, hi = row.step_time_s
        span = f"{lo * 1e3:.4g} to {hi * 1e3:.4g} ms" if row.step_swing else "step time unchanged"
        out.append(f"    {row.field:<28} {row.value} [{row.range[0]} .. {row.range[1]}]: {span}, "
                   f"energy {row.energy_j[0]:.4g} to {row.energy_j[1]:.4g} J")
    if estimates.defaults is not ABSENT:
        out.append(f"    left out of the chip's file, its family's: {', '.join(estimates.defaults)} (estimates, "
                   "never the ideal 1.0; set them or start from a preset with base:)")
    low, high = (0.0, 0.0) if estimates.band_s is ABSENT else estimates.band_s
    if step_s > 0 and high - low > BAND_SHOWN * step_s:
        out.append(f"    the step time lies between {low * 1e3:.4g} and {high * 1e3:.4g} ms across these ranges (each "
                   f"estimate alone): {(high - low) / step_s:.0%} of the step rests on estimates")
    if estimates.not_rerun is not ABSENT:
        out.append(f"    (not rerun by default: the run took {estimates.not_rerun:,} engine events, records and "
                   f"transfers, over {AUTO_WORK:,}; --sensitivity N reruns it at the ends of their ranges)")
    elif not estimates.sensitive:
        out.append("    (--sensitivity N reruns the step at the ends of their ranges)")
    return out


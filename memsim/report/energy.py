"""Energy and power of a run: pure functions of the plan and the engine's records.

Every compute, dequant and transfer record carries the dynamic energy of its work (its FLOPs
at the chip's energy per FLOP, its bits at the level's or link's energy per bit). The static
power of every chip is drawn for the whole step. A run's energy is their sum; each operator
gets its records' dynamic energy and a share of the static energy in proportion to the time it
holds a compute stream (computing or stalled), so the operators' energies add up to the total.
Only the first tensor-parallel rank of a stage is simulated (its ranks run identical shards), so
a record of its compute, its levels or its own links stands for ``tp`` chips' work, and counts
``tp`` times in the run's energy, the operators' and the power of all chips; a transfer on a
link between chips is one of its own (every link is simulated). A timeline row's energy is its
own resource's. Power over time spreads each record's energy evenly over its interval (a transfer's over its
own, so a copy engine's prefetch is power drawn while it runs). The power cap limits each chip's
mean power over the sliding window its limiter averages over (``power.window``), its regions
together: ``chip_power`` is what ``memsim.run.powercap`` holds under the cap.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from memsim.core.errors import ConfigError
from memsim.core.units import PS_PER_S
from memsim.engine import EngineResult
from memsim.hardware.resource import COMPUTE, DEQUANT, LEVEL, LINK, SYSTEM
from memsim.mapping import Plan
from memsim.report.summary_records import Energy

FJ_PER_J = 10**15


def static_w(plan: Plan) -> float:
    """The static power of all the run's chips, in watts."""
    return plan.chip.power.static_mw * plan.chips / 1000


def static_j(plan: Plan, result: EngineResult) -> float:
    """The static energy of all the run's chips over the step, in joules."""
    return static_w(plan) * result.end_ps / PS_PER_S


def ranks(plan: Plan, record) -> int:
    """The chips a record's work stands for: ``tp`` for a rank's compute, levels and own links,
    one for a transfer on a link between chips."""
    return 1 if record.resource.chip == SYSTEM else plan.tp


def breakdown(plan: Plan, result: EngineResult) -> Energy:
    """``energy_j`` of all the run's chips: the total, dynamic and static parts, and the dynamic
    energy of compute, each level and each link (links between chips under their link's name)."""
    compute = 0
    levels = {lvl.name: 0 for lvl in plan.chip.levels}
    links = {lk.name: 0 for lk in plan.chip.links}
    for r in result.records:
        if not r.energy_fj:
            continue
        kind, fj = r.resource.kind, r.energy_fj * ranks(plan, r)
        if kind in (COMPUTE, DEQUANT):
            compute += fj
        elif kind is LEVEL:
            levels[r.resource.name] = levels.get(r.resource.name, 0) + fj
        elif kind is LINK:
            links[r.resource.name] = links.get(r.resource.name, 0) + fj  # its directions between chips too
    dynamic = compute + sum(levels.values()) + sum(links.values())
    static = static_j(plan, result)
    return Energy(total=dynamic / FJ_PER_J + static, dynamic=dynamic / FJ_PER_J, static=static,
                  compute=compute / FJ_PER_J, levels={k: v / FJ_PER_J for k, v in levels.items()},
                  links={k: v / FJ_PER_J for k, v in links.items()})


def per_op(plan: Plan, result: EngineResult) -> dict[str, tuple[float, float]]:
    """Operator -> (dynamic, static) joules of all its ranks; over all operators they add up to the
    run's total."""
    dynamic: dict[str, int] = {}
    held: dict[str, int] = {}
    for r in result.records:
        dynamic[r.op] = dynamic.get(r.op, 0) + r.energy_fj * ranks(plan, r)
        if r.resource.kind is COMPUTE:
            held[r.op] = held.get(r.op, 0) + r.end_ps - r.start_ps
    static = static_j(plan, result)
    total_held = sum(held.values())
    ops = [t.op for t in plan.tasks]
    out = {}
    for op in ops:
        share = held.get(op, 0) / total_held if total_held else 1 / len(ops)
        out[op] = (dynamic.get(op, 0) / FJ_PER_J, static * share)
    return out


class Spans(NamedTuple):
    """The records that spent energy, as arrays: each one's interval (ps), femtojoules and unit."""

    start: np.ndarray
    end: np.ndarray
    fj: np.ndarray
    unit: np.ndarray
    between: np.ndarray  # 1 for a transfer on a link between chips, else 0 (a rank's own resource)


HORIZON = ("the step runs past memsim's horizon: time and energy are exact up to 2^63 ps (107 days) a step and "
           "2^63 fJ (9.2 kJ) an operator; a rate, latency or size is off by orders of magnitude")


def spans(records) -> Spans:
    """The records that spent energy. A step's compute row is laid out before its stall rows (its
    chunks' busy time, then their stalls), so its energy is spread over the step's whole compute
    timeline, those stalls included (under a power cap, the time its lowered clock added); a
    transfer in no time is spread over 1 ps. The last records' spans are kept: the power cap's
    check and the summary both ask for a run's."""
    last = _LAST[0]
    if last is not None and last[0] is records:
        return last[1]
    made = _spans(records)
    _LAST[0] = (records, made)  # one store: a thread reading it sees a pair that belongs together
    return made


_LAST: list[tuple[object, Spans] | None] = [None]


def _spans(records) -> Spans:
    extent: dict[tuple, list[int]] = {}
    for r in records:
        if r.resource.kind is COMPUTE:
            e = extent.setdefault((r.chip, r.op, r.stream), [r.start_ps, r.end_ps])
            e[0], e[1] = min(e[0], r.start_ps), max(e[1], r.end_ps)
    rows = [(*extent[(r.chip, r.op, r.stream)], r.energy_fj, r.chip, 0) if r.resource.kind is COMPUTE else
            (r.start_ps, r.end_ps, r.energy_fj, r.chip, int(r.resource.chip == SYSTEM)) for r in records if r.energy_fj]
    try:
        start, end, fj, unit, between = (np.array(col, dtype=np.int64) for col in zip(*rows)) if rows else \
            (np.zeros(0, dtype=np.int64) for _ in range(5))
    except OverflowError:  # past 2**63 ps (107 days) or 2**63 fJ (9.2 kJ) in one record
        raise ConfigError(HORIZON, field="step") from None
    return Spans(start, np.maximum(end, start + 1), fj, unit, between)


def profile(records, end_ps: int, of: Spans | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic power as a step function: times (ps) and the watts drawn from each until the
    next (``of``: the records' spans, when already made)."""
    starts, ends, energy, _, _ = of if of is not None else spans(records)
    if not len(starts):
        return np.array([0, max(end_ps, 1)]), np.zeros(2)
    rate = energy / (ends - starts) / 1000  # fJ/ps = mW; in W
    times = np.concatenate([starts, ends, [0, max(end_ps, int(ends.max()))]])
    deltas = np.concatenate([rate, -rate, [0.0, 0.0]])
    order = np.lexsort((deltas, times))  # a canonical order: the same records in any order sum alike
    times, deltas = times[order], deltas[order]
    keep = np.append(times[1:] != times[:-1], True)
    summed = np.add.reduceat(deltas, np.flatnonzero(np.concatenate([[True], times[1:] != times[:-1]])))
    return times[keep], np.maximum(np.cumsum(summed), 0.0)


def window_ps(plan: Plan, result: EngineResult, window: int | None = None) -> int:
    """The window power is averaged over: the chip's limiter's (or ``window`` ps), or the whole step
    when shorter (or when the window is 0)."""
    window = plan.chip.power.window_ps if window is None else window
    return min(window, result.end_ps) if window else result.end_ps


def _highest_mean(of: Spans, end: int, window: int) -> float:
    """The highest mean dynamic power (W) of ``of`` over any ``window`` of [0, end]."""
    times, watts = profile((), end, of)
    # Energy drawn from the start up to each breakpoint (joules); linear in between.
    cumulative = np.concatenate([[0.0], np.cumsum(watts[:-1] * np.diff(times) / PS_PER_S)])
    # The window's energy is piecewise linear in its start: its maxima lie where an edge meets a breakpoint.
    starts = np.clip(np.concatenate([times, times - window]), 0, end - window)
    inside = np.interp(starts + window, times, cumulative) - np.interp(starts, times, cumulative)
    return float(inside.max() * PS_PER_S / window)


def peak_power(plan: Plan, result: EngineResult, of: Spans | None = None) -> float:
    """The highest mean power over any window of the step (all chips, static included)."""
    if result.end_ps <= 0:
        return static_w(plan)
    of = of if of is not None else spans(result.records)
    # A rank's records stand for every rank of its stage (``ranks``); links between chips (unit SYSTEM) for one.
    every = of._replace(fj=np.where(of.between == 1, 1, plan.tp) * of.fj)
    # Rounded to a microwatt: records cut differently (fast-forward on or off) sum in another order.
    return round(_highest_mean(every, result.end_ps, window_ps(plan, result)) + static_w(plan), 6)


def chip_power(plan: Plan, result: EngineResult, of: Spans | None = None, window: int | None = None) -> float:
    """The highest mean power any one chip (its regions together) draws over any window of the
    step, static included: what its power cap limits. Each record counts for the chip whose unit
    issued it (a link between chips: the sender's, whose ``energy`` includes both ends). ``window``:
    its length in ps (default: the chip's limiter's; the whole step where that is shorter)."""
    static = plan.chip.power.static_mw / 1000
    if result.end_ps <= 0:
        return static
    of = of if of is not None else spans(result.records)
    unit = np.maximum(of.unit, 0)  # links between chips (SYSTEM): their sender's
    chips = (unit // plan.tp // plan.regions) * plan.tp + unit % plan.tp  # Plan.chip_of, on arrays
    window = window_ps(plan, result, window)
    highest = max((_highest_mean(Spans(*(col[chips == c] for col in of)), result.end_ps, window)
                   for c in np.unique(chips)), default=0.0)
    return round(highest + static, 6)


def power_keys(plan: Plan, result: EngineResult, energy: Energy, tokens: int) -> dict[str, Any]:
    """The summary's power keys, from ``energy`` (``breakdown``) and the tokens the step produced."""
    step_s = result.end_ps / PS_PER_S
    cap = plan.chip.power_cap_mw
    top = plan.chip.power.max_clock_hz
    of = spans(result.records)
    chip_w = chip_power(plan, result, of)
    unmet = {"power_cap_unmet_w": chip_w - cap / 1000} if cap and chip_w > cap / 1000 else {}
    return {
        "avg_power_w": energy.total / step_s if step_s else 0.0,
        "peak_power_w": peak_power(plan, result, of),
        "chip_power_w": chip_w,
        "power_window_s": window_ps(plan, result) / PS_PER_S,
        "power_cap_w": cap / 1000 if cap else None,
        "clock": plan.clock,
        "clock_mhz": round(plan.clock * top / 10**6, 3) if top else None,
        "power_limited": plan.clock < 1,
        "energy_per_token_j": energy.total / tokens if tokens else None,
        **unmet,
    }

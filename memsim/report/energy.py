"""Energy and power of a run: pure functions of the plan and the engine's records.

Every compute, dequant and transfer record carries the dynamic energy of its work (its FLOPs
at the chip's energy per FLOP, its bits at the level's or link's energy per bit). The static
power of every chip is drawn for the whole step. A run's energy is their sum; each operator
gets its records' dynamic energy and a share of the static energy in proportion to the time it
holds a compute stream (computing or stalled), so the operators' energies add up to the total.
Power over time spreads each record's energy evenly over its interval.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from memsim.engine import EngineResult
from memsim.engine.records import COMPUTE, DEQUANT, LEVEL, LINK
from memsim.mapping import Plan
from memsim.units import PS_PER_S

FJ_PER_J = 10**15
PEAK_WINDOW_PS = 10**9  # peak power is the highest mean over any 1 ms (the whole step when shorter)


def static_w(plan: Plan) -> float:
    """The static power of all the run's chips, in watts."""
    return plan.chip.power.static_mw * plan.chips / 1000


def static_j(plan: Plan, result: EngineResult) -> float:
    """The static energy of all the run's chips over the step, in joules."""
    return static_w(plan) * result.end_ps / PS_PER_S


def breakdown(plan: Plan, result: EngineResult) -> dict[str, Any]:
    """``energy_j``: the total, dynamic and static parts, and the dynamic energy of compute, each
    level and each link (links between chips under their link's name)."""
    compute = 0
    levels = {lvl.name: 0 for lvl in plan.chip.levels}
    links = {lk.name: 0 for lk in plan.chip.links}
    for r in result.records:
        if not r.energy_fj:
            continue
        kind = r.resource.kind
        if kind in (COMPUTE, DEQUANT):
            compute += r.energy_fj
        elif kind == LEVEL:
            levels[r.resource.name] = levels.get(r.resource.name, 0) + r.energy_fj
        elif kind == LINK:
            name = r.resource.name.split("[")[0]  # a link between chips is named link[src>dst]
            links[name] = links.get(name, 0) + r.energy_fj
    dynamic = compute + sum(levels.values()) + sum(links.values())
    static = static_j(plan, result)
    return {"total": dynamic / FJ_PER_J + static, "dynamic": dynamic / FJ_PER_J, "static": static,
            "compute": compute / FJ_PER_J, "levels": {k: v / FJ_PER_J for k, v in levels.items()},
            "links": {k: v / FJ_PER_J for k, v in links.items()}}


def per_op(plan: Plan, result: EngineResult) -> dict[str, tuple[float, float]]:
    """Operator -> (dynamic, static) joules; over all operators they add up to the run's total."""
    dynamic: dict[str, int] = {}
    held: dict[str, int] = {}
    for r in result.records:
        dynamic[r.op] = dynamic.get(r.op, 0) + r.energy_fj
        if r.resource.kind == COMPUTE:
            held[r.op] = held.get(r.op, 0) + r.end_ps - r.start_ps
    static = static_j(plan, result)
    total_held = sum(held.values())
    ops = [t.op for t in plan.tasks]
    out = {}
    for op in ops:
        share = held.get(op, 0) / total_held if total_held else 1 / len(ops)
        out[op] = (dynamic.get(op, 0) / FJ_PER_J, static * share)
    return out


def _spans(records) -> list[tuple[int, int, int]]:
    """(start, end, femtojoules) of the records that spent energy. A step's compute row is laid out
    before its stall rows (its chunks' busy time, then their stalls), so its energy is spread over
    the step's whole compute timeline, those stalls included (under a power cap, its throttling);
    a transfer in no time is spread over 1 ps."""
    extent: dict[tuple, list[int]] = {}
    for r in records:
        if r.resource.kind == COMPUTE:
            e = extent.setdefault((r.chip, r.op, r.stream), [r.start_ps, r.end_ps])
            e[0], e[1] = min(e[0], r.start_ps), max(e[1], r.end_ps)
    out = []
    for r in records:
        if r.energy_fj:
            start, end = extent[(r.chip, r.op, r.stream)] if r.resource.kind == COMPUTE else (r.start_ps, r.end_ps)
            out.append((start, max(end, start + 1), r.energy_fj))
    return out


def profile(records, end_ps: int) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic power as a step function: times (ps) and the watts drawn from each until the next."""
    spans = _spans(records)
    if not spans:
        return np.array([0, max(end_ps, 1)]), np.zeros(2)
    starts, ends, energy = (np.array(col, dtype=np.int64) for col in zip(*spans))
    rate = energy / (ends - starts) / 1000  # fJ/ps = mW; in W
    times = np.concatenate([starts, ends, [0, max(end_ps, int(ends.max()))]])
    deltas = np.concatenate([rate, -rate, [0.0, 0.0]])
    order = np.lexsort((deltas, times))  # a canonical order: the same records in any order sum alike
    times, deltas = times[order], deltas[order]
    keep = np.append(times[1:] != times[:-1], True)
    summed = np.add.reduceat(deltas, np.flatnonzero(np.concatenate([[True], times[1:] != times[:-1]])))
    return times[keep], np.maximum(np.cumsum(summed), 0.0)


def peak_power(plan: Plan, result: EngineResult, window_ps: int = PEAK_WINDOW_PS) -> float:
    """The highest mean power over any ``window_ps`` of the step (all chips, static included)."""
    end = result.end_ps
    if end <= 0:
        return static_w(plan)
    times, watts = profile(result.records, end)
    # Energy drawn from the start up to each breakpoint (joules); linear in between.
    cumulative = np.concatenate([[0.0], np.cumsum(watts[:-1] * np.diff(times) / PS_PER_S)])
    window = min(window_ps, end)
    # The window's energy is piecewise linear in its start: its maxima lie where an edge meets a breakpoint.
    starts = np.clip(np.concatenate([times, times - window]), 0, end - window)
    inside = np.interp(starts + window, times, cumulative) - np.interp(starts, times, cumulative)
    # Rounded to a microwatt: records cut differently (fast-forward on or off) sum in another order.
    return round(float(inside.max() * PS_PER_S / window) + static_w(plan), 6)


def power_keys(plan: Plan, result: EngineResult, energy: dict[str, Any], tokens: int) -> dict[str, Any]:
    """The summary's power keys, from ``energy`` (``breakdown``) and the tokens the step produced."""
    step_s = result.end_ps / PS_PER_S
    cap = plan.chip.power_cap_mw
    return {
        "avg_power_w": energy["total"] / step_s if step_s else 0.0,
        "peak_power_w": peak_power(plan, result),
        "power_window_s": min(PEAK_WINDOW_PS, result.end_ps) / PS_PER_S,
        "power_cap_w": cap / 1000 if cap else None,
        "energy_per_token_j": energy["total"] / tokens if tokens else None,
    }

"""The grid of a system of N chips: the fastest tensor x pipeline split that fits.

``--chips N`` without ``--tp`` and ``--pp`` asks for it. The candidates are the grids
``tp x pp = N`` whose ``tp`` divides N (heads that ``tp`` does not divide are padded, as
``workload.builder.shard`` says) and whose ``pp`` stages the model has blocks for. A run is never faster than its roofline, so
the candidates are simulated in the order of their plans' rooflines, and the search stops once
the next roofline is no less than the fastest time simulated so far: no grid after it can be
faster. A candidate that does not fit its chips is skipped; if none fits, that is one error.
Orchestration only: every candidate is an ordinary run.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from memsim.core.errors import CapacityError, ConfigError, run_field
from memsim.report.summary_records import GridTried
from memsim.run.runspec import RunSpec

GRID_FIELDS = (run_field("tp"), run_field("pp"))  # the errors that rule a candidate out rather than the run


def candidates(chips: int) -> list[tuple[int, int]]:
    """Every (tp, pp) with tp x pp = ``chips``."""
    return [(tp, chips // tp) for tp in range(1, chips + 1) if chips % tp == 0]


def fastest(spec: RunSpec, bound: Callable[[RunSpec], float], simulate: Callable[[RunSpec], Any]):
    """The result of the fastest grid of ``spec.chips`` that fits, its summary with the grids
    considered (``grid_search``). ``bound(spec)`` is a run's least time (its roofline: it raises
    as the run would when the grid does not fit), ``simulate(spec)`` the run."""
    if spec.chips is None:
        raise ConfigError("must be given to search for a grid", field=run_field("chips"))
    tried: list[GridTried] = []
    full: list[GridTried] = []  # the grids that overflow their chips
    ranked: list[tuple[float, RunSpec]] = []
    for tp, pp in candidates(spec.chips):
        try:  # a grid past a limit (memsim.core.limits) is ruled out like one the model cannot split
            grid = dataclasses.replace(spec, tp=tp, pp=pp)
            ranked.append((bound(grid), grid))
        except (CapacityError, ConfigError) as exc:
            if isinstance(exc, ConfigError) and exc.raw_field not in GRID_FIELDS:
                raise
            tried.append(GridTried(tp=tp, pp=pp, skipped=exc.message))
            if isinstance(exc, CapacityError):
                full.append(tried[-1])
    if not ranked:
        grids = ", ".join(f"{t.tp}x{t.pp}" for t in full)
        reason = (f"{grids} (tp x pp) overflow their chips; with the most ranks, {full[-1].skipped}" if full
                  else "the model rules out every split")
        raise CapacityError(f"no grid of {spec.chips} chips fits: {reason}", field=run_field("chips"))
    ranked.sort(key=lambda item: (item[0], item[1].pp))
    best, best_s = None, float("inf")
    for roofline_s, grid in ranked:
        if roofline_s >= best_s:  # no faster than the fastest so far, nor any grid after it
            tried.append(GridTried(tp=grid.tp, pp=grid.pp, roofline_s=roofline_s,
                                   skipped="its roofline is no less than the fastest time simulated"))
            continue
        try:
            result = simulate(grid)
        except CapacityError as exc:  # placement fitted the plan; a later step of a generation may not
            tried.append(GridTried(tp=grid.tp, pp=grid.pp, roofline_s=roofline_s, skipped=exc.message))
            continue
        simulated_s = result.summary.metric_s  # a generation's total, else the step's
        tried.append(GridTried(tp=grid.tp, pp=grid.pp, roofline_s=roofline_s, simulated_s=simulated_s))
        if simulated_s < best_s:
            best, best_s = result, simulated_s
    if best is None:
        raise CapacityError(f"no grid of {spec.chips} chips fits", field=run_field("chips"))
    return dataclasses.replace(best, summary=dataclasses.replace(
        best.summary, grid_search=sorted(tried, key=lambda t: (t.tp, t.pp))))

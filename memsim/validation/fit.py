"""Fitting the calibrated parameters, and accuracy measured out of sample.

The calibrated parameters are few and named (``PARAMS``): each is a hardware field that
stands for a mechanism the microbenchmarks cannot pin down. Every case is simulated once on
a small grid of their values; a fit then minimises the mean squared relative error over
that table, interpolated multilinearly (step time is close to linear in a per-kernel gap and
in the reciprocal of a compute efficiency), plus a faint pull towards each parameter's
prior, so that a parameter the fitted rows say nothing about keeps its prior.

Out of sample means leave one source out: refit without a source's rows, then simulate
them with the parameters that fit the other sources.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from memsim.validation.calibration import Case, simulate_ms

PRIOR_WEIGHT = 1e-4  # against a mean squared relative error of ~1e-3: breaks ties, moves no fit


@dataclass(frozen=True)
class Param:
    path: str  # hardware field, as for --set
    unit: str  # appended to the value when it is set ("us" or "")
    grid: tuple[float, ...]  # values every case is simulated at
    prior: float  # the value without calibration data
    reciprocal: bool = False  # interpolate in 1/value (a rate)

    def text(self, value: float) -> str:
        return f"{value:g} {self.unit}".strip()

    def coord(self, value):
        return 1.0 / np.asarray(value, float) if self.reciprocal else np.asarray(value, float)


# The GPU family's calibrated parameters. Their priors: the microbenchmark rate itself
# (kernel_efficiency 1) and a CUDA-graph node's replay cost (microbench.csv row 75, 0.58 us).
PARAMS = (
    Param("compute.kernel_efficiency", "", (0.55, 0.7, 0.85, 1.0), 1.0, reciprocal=True),
    Param("execution.op_overhead", "us", (0.0, 3.0, 6.0), 0.58),
)
FINE = 91  # points per parameter in the fit's search


@dataclass(frozen=True)
class Table:
    """Step times (ms) of every case at every grid point of ``params``."""

    params: tuple[Param, ...]
    cases: tuple[Case, ...]
    ms: np.ndarray  # shape (cases, *grid sizes)

    def predict(self, theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Interpolated step times of ``rows`` (indices into cases) at each parameter vector in ``theta``
        (shape (points, params)): shape (points, rows)."""
        out = self.ms[rows]
        out = np.moveaxis(out, 0, -1)  # (*grid, rows)
        weights = []
        for i, p in enumerate(self.params):
            g = p.coord(p.grid)
            q = p.coord(theta[:, i])
            order = np.argsort(g)
            g = g[order]
            j = np.clip(np.searchsorted(g, q) - 1, 0, len(g) - 2)
            t = (q - g[j]) / (g[j + 1] - g[j])  # extrapolates linearly past the grid's ends
            weights.append((order[j], order[j + 1], t))
        result = np.zeros((len(theta), len(rows)))
        for corner in itertools.product((0, 1), repeat=len(self.params)):
            w = np.ones(len(theta))
            index = []
            for (lo, hi, t), c in zip(weights, corner):
                w = w * (t if c else 1 - t)
                index.append(hi if c else lo)
            result += w[:, None] * out[tuple(index)]
        return result


def table(cases: list[Case], params: tuple[Param, ...] = PARAMS,
          simulate: Callable[[Case, dict], float] = simulate_ms, workers: int | None = None) -> Table:
    """Every live case simulated at every grid point; memsim's own simulation runs on a pool of
    ``workers`` processes (default: a core each), a given ``simulate`` here. The cells are independent
    runs, so the table is the same either way."""
    live = tuple(c for c in cases if c.kwargs is not None)
    shape = tuple(len(p.grid) for p in params)
    cells = [(i, *index) for i in range(len(live)) for index in itertools.product(*(range(n) for n in shape))]
    jobs = [(live[cell[0]], overrides(params, [p.grid[k] for p, k in zip(params, cell[1:])])) for cell in cells]
    count = min(workers or os.cpu_count() or 1, len(jobs))
    if simulate is simulate_ms and count > 1:
        with ProcessPoolExecutor(count) as pool:
            values = list(pool.map(_simulate_ms, jobs))
    else:
        values = [simulate(c, o) for c, o in jobs]
    ms = np.empty((len(live), *shape))
    for cell, value in zip(cells, values):
        ms[cell] = value
    return Table(params, live, ms)


def _simulate_ms(job: tuple[Case, dict]) -> float:
    return simulate_ms(*job)


def overrides(params: tuple[Param, ...], values) -> dict[str, str]:
    return {p.path: p.text(v) for p, v in zip(params, values)}


def fit(t: Table, rows: np.ndarray) -> np.ndarray:
    """The parameter vector that minimises the mean squared relative error over ``rows``."""
    axes = [np.linspace(min(p.grid), max(p.grid), FINE) for p in t.params]
    theta = np.array(list(itertools.product(*axes)))
    measured = np.array([t.cases[r].measured_ms for r in rows])
    err = t.predict(theta, rows) / measured - 1
    spans = np.array([max(p.grid) - min(p.grid) for p in t.params])
    prior = np.array([p.prior for p in t.params])
    loss = (err ** 2).mean(axis=1) + PRIOR_WEIGHT * (((theta - prior) / spans) ** 2).sum(axis=1)
    return theta[int(np.argmin(loss))]


@dataclass(frozen=True)
class Outcome:
    case: Case
    in_sample_ms: float  # simulated with the parameters fitted on every row
    out_of_sample_ms: float  # simulated with the parameters fitted without the row's source
    held_out_fit: tuple[float, ...]

    def error(self, which: str) -> float:
        value = self.in_sample_ms if which == "in" else self.out_of_sample_ms
        return value / self.case.measured_ms - 1


def validate(t: Table, simulate: Callable[[Case, dict], float] = simulate_ms) -> tuple[tuple[float, ...], list[Outcome]]:
    """The all-rows fit, and every case predicted in sample and leaving its source out."""
    everything = np.arange(len(t.cases))
    full = fit(t, everything)
    folds = {}
    for source in dict.fromkeys(c.source for c in t.cases):
        train = np.array([i for i, c in enumerate(t.cases) if c.source != source], dtype=int)
        folds[source] = fit(t, train) if len(train) else np.array([p.prior for p in t.params])
    outcomes = []
    for c in t.cases:
        held = folds[c.source]
        outcomes.append(Outcome(c, simulate(c, overrides(t.params, full)), simulate(c, overrides(t.params, held)),
                                tuple(float(v) for v in held)))
    return tuple(float(v) for v in full), outcomes

"""Thinning a series for a figure, so memory and time follow the figure, not the table.

``m4`` keeps, in each of ``bins`` equal slices of the x range, the first, last, lowest and highest
point (the M4 aggregation of Jugel et al., "M4: A Visualization-Oriented Time Series Data
Aggregation", VLDB 2014): a line drawn through them covers the same pixels as the whole series at
a figure's width of ``bins`` pixels or fewer. ``binned_mean`` gives, on shared slices, a series'
mean weighted by how long each value held, for stacked areas that must share their x. ``coverage``
gives the time each slice holds of a set of intervals, each split exactly across the slices it
spans, so a figure drawn from it gives each interval the area its time gives it, however short.
"""
from __future__ import annotations

import numpy as np

BINS = 2000  # slices of a figure's x range: more than a saved figure's pixels across


def m4(x: np.ndarray, y: np.ndarray, bins: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (non-decreasing) and ``y`` thinned to at most 4 points a slice (unchanged when short)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) <= 4 * bins or x[-1] <= x[0]:
        return x, y
    slot = np.minimum(((x - x[0]) / (x[-1] - x[0]) * bins).astype(np.int64), bins - 1)
    starts = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1]])
    ends = np.r_[starts[1:], len(x)] - 1
    lows = starts + np.array([np.argmin(y[a:b + 1]) for a, b in zip(starts, ends)], dtype=np.int64)
    highs = starts + np.array([np.argmax(y[a:b + 1]) for a, b in zip(starts, ends)], dtype=np.int64)
    keep = np.unique(np.concatenate([starts, ends, lows, highs]))
    return x[keep], y[keep]


def binned_mean(start: np.ndarray, end: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Each slice's mean of ``values``, each held from its ``start`` to its ``end`` (0 where none is),
    weighted by how long it held; a value's time counts in the slice it starts in (thinning is for
    series of many more values than slices, each far shorter than a slice)."""
    start, end, values = (np.asarray(a, dtype=float) for a in (start, end, values))
    slot = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, len(edges) - 2)
    return np.bincount(slot, weights=values * (end - start), minlength=len(edges) - 1) / np.diff(edges)


def coverage(start: np.ndarray, end: np.ndarray, edges: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """The time each slice between ``edges`` holds of the intervals [``start``, ``end``] (each counted with its
    ``weight``, 1 by default: a share of the interval the resource was busy), split exactly where an interval
    spans slices. In O((intervals + slices) log intervals): the covered time up to ``t`` is the sum over
    intervals begun by ``t`` of ``t - start`` less the sum over those ended by ``t`` of ``t - end``."""
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    w = np.ones_like(start) if weight is None else np.asarray(weight, dtype=float)
    edges = np.asarray(edges, dtype=float)

    def since(times: np.ndarray) -> np.ndarray:  # sum of w * (edge - time) over the times at or before each edge
        order = np.argsort(times, kind="stable")
        t, ws = times[order], w[order]
        count = np.concatenate([[0.0], np.cumsum(ws)])
        moment = np.concatenate([[0.0], np.cumsum(ws * t)])
        k = np.searchsorted(t, edges, side="right")
        return count[k] * edges - moment[k]

    return np.diff(since(start) - since(end))


def held_slices(start: np.ndarray, values: np.ndarray, last_end: float,
                bins: int = BINS) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A state held from each ``start`` to the next (the last to ``last_end``), as ``bins`` slices: their
    centres, each slice's mean over time (``coverage``: exact however the steps fall), and the lowest and
    highest value any step starting in it took (a slice no step starts in holds the value before it)."""
    start, values = np.asarray(start, dtype=float), np.asarray(values, dtype=float)
    after = np.append(start[1:], max(last_end, start[-1]))
    edges = np.linspace(start[0], after[-1] if after[-1] > start[0] else start[0] + 1e-12, bins + 1)
    mean = coverage(start, after, edges, values) / np.diff(edges)
    slot = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
    low, high = np.full(bins, np.inf), np.full(bins, -np.inf)
    np.minimum.at(low, slot, values)
    np.maximum.at(high, slot, values)
    empty = ~np.isfinite(low)
    low[empty], high[empty] = mean[empty], mean[empty]
    return (edges[:-1] + edges[1:]) / 2, mean, np.minimum(low, mean), np.maximum(high, mean)

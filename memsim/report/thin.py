"""Thinning a series for a figure, so memory and time follow the figure, not the table.

``m4`` keeps, in each of ``bins`` equal slices of the x range, the first, last, lowest and highest
point (the M4 aggregation of Jugel et al., "M4: A Visualization-Oriented Time Series Data
Aggregation", VLDB 2014): a line drawn through them covers the same pixels as the whole series at
a figure's width of ``bins`` pixels or fewer. ``binned_mean`` gives, on shared slices, a series'
mean weighted by how long each value held, for stacked areas that must share their x.
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

"""Thinning a series for a figure (memsim.report.thin): the M4 points cover every slice's extremes."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim.report.thin import binned_mean, m4


@given(st.integers(0, 5000), st.integers(1, 50), st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_m4_keeps_each_slices_first_last_lowest_and_highest_point(n, bins, seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    y = rng.normal(size=n)
    tx, ty = m4(x, y, bins)
    assert len(tx) <= max(n, 0) and (len(tx) == n or len(tx) <= 4 * bins)
    assert np.all(np.diff(tx) >= 0) and set(zip(tx, ty)) <= set(zip(x, y))
    if n:
        assert ty.max() == y.max() and ty.min() == y.min() and tx[0] == x[0] and tx[-1] == x[-1]
    if n > 4 * bins and x[-1] > x[0]:  # every slice keeps its extremes
        slot = np.minimum(((x - x[0]) / (x[-1] - x[0]) * bins).astype(int), bins - 1)
        tslot = np.minimum(((tx - x[0]) / (x[-1] - x[0]) * bins).astype(int), bins - 1)
        for k in np.unique(slot):
            assert ty[tslot == k].max() == y[slot == k].max() and ty[tslot == k].min() == y[slot == k].min()


def test_binned_mean_is_the_time_weighted_mean_of_each_slice():
    start, end = np.array([0.0, 1.0, 2.5]), np.array([1.0, 2.0, 3.0])
    values = np.array([4.0, 2.0, 6.0])
    got = binned_mean(start, end, values, np.array([0.0, 2.0, 4.0]))
    assert got.tolist() == [(4 * 1 + 2 * 1) / 2, 6 * 0.5 / 2]

"""The explain tornado: the ranked changes by factor, the estimates apart, each labelled with its ends."""
from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from memsim.report.plots import tornado


def table() -> pd.DataFrame:
    rows = [{"rank": 1, "quantity": "levels[hbm].bandwidth", "kind": "bandwidth", "factor": f, "new_value": v,
             "step_time_s": t, "speedup": 4.0 / t} for f, v, t in ((0.5, "1675 GB/s", 7.0), (2.0, "6700 GB/s", 2.5))]
    rows += [{"rank": 2, "quantity": "compute.peak.bf16", "kind": "peak", "factor": f, "new_value": "x",
              "step_time_s": t, "speedup": 4.0 / t} for f, t in ((0.5, 4.2), (2.0, 3.9))]
    rows += [{"rank": pd.NA, "quantity": "levels[hbm].latency", "kind": "estimate", "factor": f, "new_value": v,
              "step_time_s": t, "speedup": 4.0 / t} for f, v, t in ((0.666667, "400 ns", 3.9), (1.5, "900 ns", 4.1))]
    return pd.DataFrame(rows)


def test_estimates_are_drawn_apart_and_labelled_with_their_ends_not_as_factors():
    fig = tornado(table())
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["x0.5", "x2", "an estimate, its range's ends"]  # no x1.5 or x0.666667 among the factors
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == ["levels[hbm].latency (estimate)", "", "compute.peak.bf16", "levels[hbm].bandwidth"]
    assert "400 ns to 900 ns" in [t.get_text() for t in ax.texts]
    bars = {(round(p.get_y() + p.get_height() / 2), round(p.get_x(), 6), round(p.get_width(), 6)) for p in ax.patches}
    assert (0, 3900.0, 200.0) in bars  # the estimate spans its ends step times, 3.9 to 4.1 s, on the bottom row

"""The Gantt chart draws each cause with the area its time gives it: many short stalls do not paint
over one long one, memory rows show their utilisation, and the share bar gives each cause's share."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from matplotlib.patches import StepPatch

from memsim.report.run_plots import gantt_figure
from memsim.report.thin import coverage


def row(start, end, kind, cause="", resource="compute", busy=0.0):
    return {"start_s": start, "end_s": end, "chip": "chip0", "resource": resource, "kind": kind, "op": "op",
            "cause": cause, "layer": 0, "busy_s": busy}


def timeline() -> pd.DataFrame:
    """A 10 ms step: 400 tile_buffer stalls of 5 ns each (2 us, 0.02%), each between computes, then one hbm
    stall of 5.1 ms (51%); the HBM row busy half of the time its one transfer spans."""
    rows, t = [], 0.0
    for _ in range(400):
        rows += [row(t, t + 5e-9, "stall", "tile_buffer"), row(t + 5e-9, t + 1e-5, "compute")]
        t += 1e-5
    rows += [row(t, t + 5.1e-3, "stall", "hbm"), row(t + 5.1e-3, 1e-2, "compute")]
    rows.append(row(0.0, 1e-2, "transfer", resource="hbm", busy=5e-3))
    return pd.DataFrame(rows)


def drawn(fig) -> dict[tuple[int, str], float]:
    """Each label's area on each row of the chart (row index, label), in ms x row height."""
    ax = fig.axes[0]
    out: dict[tuple[int, str], float] = {}
    for patch in ax.patches:
        if isinstance(patch, StepPatch):
            values, edges, baseline = patch.get_data()
            area = float(((values - baseline) * np.diff(edges)).sum())
            y = int(np.floor(float(np.min(baseline)) + 0.4 + 1e-9))  # a label's floor in its row: the row
            out[(y, patch.get_label())] = out.get((y, patch.get_label()), 0.0) + area
    return out


def test_each_cause_takes_the_area_its_time_gives_it():
    tl = timeline()
    fig = gantt_figure(tl)
    areas = drawn(fig)
    compute_row = {label: a for (y, label), a in areas.items() if y == 0}  # rows in order of first appearance
    height = 0.8
    spent = (tl.end_s - tl.start_s)[tl.resource == "compute"].groupby(tl.cause.where(tl.kind == "stall",
                                                                                       "compute")).sum() * 1e3
    assert compute_row["hbm"] / height == pytest.approx(spent["hbm"], rel=1e-6)
    assert compute_row["tile_buffer"] / height == pytest.approx(spent["tile_buffer"], rel=1e-6)
    assert compute_row["tile_buffer"] < 1e-3 * compute_row["hbm"]  # 2 us against 5.1 ms, as drawn
    memory = {label: a for (y, label), a in areas.items() if y == 1}
    assert sum(memory.values()) / height == pytest.approx(5.0, rel=1e-6)  # busy 5 ms of the 10: half its row's area
    bar = fig.axes[1]
    widths = sorted((p.get_width() for p in bar.patches), reverse=True)
    assert widths[0] == pytest.approx(51.0, abs=0.01)  # the share bar: hbm 51% of the compute row


def test_coverage_splits_an_interval_exactly_across_slices():
    edges = np.linspace(0.0, 10.0, 11)
    held = coverage([0.5, 2.2, 9.9], [1.5, 4.7, 10.0], edges)
    assert held == pytest.approx([0.5, 0.5, 0.8, 1.0, 0.7, 0, 0, 0, 0, 0.1], abs=1e-12)
    assert coverage([0.5], [0.5 + 1e-9], edges, weight=[0.5]).sum() == pytest.approx(0.5e-9, rel=1e-6)


def test_the_reports_timeline_draws_each_interval_as_long_as_it_lasted():
    go = pytest.importorskip("plotly.graph_objects")
    from memsim.report.html import _timeline_figure
    from memsim.report.run_plots import colours, timeline_labels

    tl = timeline()
    fig = _timeline_figure(go, tl, "chip0", colours(timeline_labels(tl)))
    widths = {trace.name: float(np.sum(trace.x)) for trace in fig.data}
    assert widths["tile_buffer"] == pytest.approx(400 * 5e-6, rel=1e-9)  # ms: 2 us in all, not widened
    assert widths["hbm"] == pytest.approx(5.1, rel=1e-9)

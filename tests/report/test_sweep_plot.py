"""The sweep plot says what was swept on what, and series that coincide stay visible."""
from __future__ import annotations

import pytest

from memsim.report import plots

RESULTS = """\
sram.capacity,sram.capacity_bytes,hbm.latency,hbm.latency_s,error,hardware,workload.model,workload.phase,\
workload.batch,workload.context,step_time_s,bytes_per_level.hbm.total
1 MiB,1048576,500 ns,5e-07,,h100-sxm,gpt2,decode,1,64,0.001,1000
4 MiB,4194304,500 ns,5e-07,,h100-sxm,gpt2,decode,1,64,0.001,1000
1 MiB,1048576,900 ns,9e-07,,h100-sxm,gpt2,decode,1,64,0.001,1000
4 MiB,4194304,900 ns,9e-07,,h100-sxm,gpt2,decode,1,64,0.001,1000
"""


def test_coinciding_series_are_drawn_apart_under_a_title_naming_what_ran(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    path = tmp_path / "results.csv"
    path.write_text(RESULTS)
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, out: drawn.append(fig) or out)
    plots.plot_sweep(path)
    fig = drawn[0]
    assert fig._suptitle.get_text() == "h100-sxm  gpt2  decode  batch=1 context=64"
    for ax in fig.axes:  # the latency changes nothing: its two series lie on each other
        styles = [(line.get_marker(), line.get_linestyle()) for line in ax.get_lines()]
        assert len(styles) == 2 and len(set(styles)) == 2, styles

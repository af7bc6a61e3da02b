"""The roofline shows the run's own ridge and one label per distinct ceiling (an fp8 ridge on a bf16
run, 'int8 1979' printed over 'fp8 1979', were what it showed before)."""
from __future__ import annotations

import pytest

from memsim import hardware, simulate
from memsim.report import run_plots
from memsim.report.ceilings import ceilings, run_dtype


def test_the_run_dtype_is_what_its_gemms_compute_in():
    h100 = hardware.load("h100-sxm")
    assert run_dtype(h100, "bf16") == "bf16" and run_dtype(h100, "fp8") == "fp8"  # fp8 is native there
    assert run_dtype(h100, "int8") == "bf16"  # unpacked into the activations' bf16
    assert run_dtype(hardware.load("groq-lpu"), "bf16") == "fp16"  # its fallback: it gives no bf16 peak


def test_equal_ceilings_are_one_label():
    c = ceilings(hardware.load("h100-sxm"))
    labels = dict((flops, label) for label, flops in c.distinct())
    assert len(labels) == len({f for _, f in c.compute})  # one a rate
    assert labels[dict(c.compute)["fp8"]] in ("fp8, int8", "int8, fp8")


@pytest.mark.parametrize("weight_dtype, ridge_of", [("bf16", "bf16"), ("fp8", "fp8")])
def test_the_png_marks_the_ridge_of_the_runs_dtype(weight_dtype, ridge_of, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    r = simulate("h100-sxm", "gpt2", context=64, weight_dtype=weight_dtype, sensitivity=0)
    r.write(tmp_path / "run")
    drawn = []
    monkeypatch.setattr(run_plots, "save_figure", lambda fig, path: drawn.append(fig) or path)
    run_plots.plot_run(tmp_path / "run")
    texts = [t.get_text() for t in drawn[1].axes[0].texts]  # the roofline, second figure
    c = ceilings(r.chip)
    ridge = [t for t in texts if t.startswith("ridge ")]
    assert ridge == [f"ridge {c.ridge(ridge_of):.3g} FLOP/B ({ridge_of})"]
    ceiling_labels = [t for t in texts if not t.startswith("ridge ")]
    assert len(ceiling_labels) == len(c.distinct()) == len(set(ceiling_labels))


def test_the_report_marks_the_same_ridge(tmp_path):
    pytest.importorskip("plotly")
    import plotly.graph_objects as go

    from memsim.report.html import _roofline_figure

    r = simulate("h100-sxm", "gpt2", context=64, sensitivity=0)
    fig = _roofline_figure(go, r.ops, r.chip, run_dtype(r.chip, "bf16"))
    ridge = next(t for t in fig.data if t.name == "ridge point")
    assert ridge.x[0] == pytest.approx(ceilings(r.chip).ridge("bf16"))
    lines = [t.name for t in fig.data if t.mode == "lines"]
    assert len(lines) == len(set(lines)) == len(ceilings(r.chip).distinct())

"""`memsim plot serve`: the latency CDFs, KV-cache occupancy and batch figures of a serving run's folder,
the data they draw, and one-line errors for folders that are not what `memsim serve --out` writes."""
from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

import memsim
from memsim.cli import main as cli
from memsim.core.errors import ConfigError
from memsim.report import serve_plots
from memsim.report.serve_plots import FIGURES, cdf, occupancy, plot_serve, read_serve, step_series

BLOCKS = 200
SUMMARY = {"kv": {"blocks": BLOCKS, "block_tokens": 16}, "slo": {"ttft_s": 0.2, "tpot_s": 0.05},
           "scheduler": "prefill_first"}


def _requests(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "arrival_s": np.linspace(0, 2, n), "prompt_tokens": 64, "output_tokens": 8,
                         "queue_s": 0.0, "ttft_s": np.geomspace(0.005, 0.5, n)[::-1],  # spans two decades
                         "tpot_s": np.linspace(0.01, 0.06, n), "e2e_s": np.linspace(1.0, 1.3, n), "preemptions": 0})


def _steps() -> pd.DataFrame:
    # the engine idles between 0.3 and 0.5 s
    return pd.DataFrame({"start_s": [0.0, 0.1, 0.2, 0.5], "end_s": [0.1, 0.2, 0.3, 0.6],
                         "shape": ["prefill", "decode", "decode", "prefill"], "prefills": [2, 0, 0, 1],
                         "decodes": [0, 2, 2, 0], "tokens": [128, 2, 2, 64], "kv_blocks_used": [10, 12, 50, 150],
                         "running": [2, 2, 1, 1], "waiting": [3, 1, 0, 4], "energy_j": 1.0})


@pytest.fixture()
def serve_dir(tmp_path):
    folder = tmp_path / "serve"
    folder.mkdir()
    _requests().to_csv(folder / "requests.csv", index=False)
    _steps().to_csv(folder / "steps.csv", index=False)
    (folder / "serve.json").write_text(json.dumps(SUMMARY))
    return folder


@pytest.fixture()
def figures(monkeypatch):
    """The figures the drawing functions would save, kept open to read back what they plot."""
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    import matplotlib.pyplot as plt

    kept: list = []
    monkeypatch.setattr(serve_plots, "save_figure", lambda fig, path: kept.append(fig) or path)
    yield kept
    for fig in kept:
        plt.close(fig)


def test_cdf_sorts_drops_missing_values_and_rises_to_one():
    values = [3.0, 1.0, float("nan"), 2.0, 2.0]
    x, y = cdf(values)
    assert x.tolist() == [1.0, 2.0, 2.0, 3.0] and y.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0)
    for value, share in zip(x[[0, 2, 3]], y[[0, 2, 3]]):  # at the last of equal values: the share at or below it
        assert share == np.mean(np.array([3.0, 1.0, 2.0, 2.0]) <= value)
    assert [len(a) for a in cdf([])] == [0, 0]


def test_step_series_holds_a_state_through_idle_time_and_drops_work_to_idle():
    start, end, values = [0.0, 1.0, 3.0], [1.0, 2.0, 4.0], [5.0, 6.0, 7.0]
    x, held = step_series(start, end, values)
    assert x.tolist() == [0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    assert held.tolist() == [5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7]
    assert step_series(start, end, values, idle=0.0)[1].tolist() == [5, 5, 5, 5, 6, 6, 0, 0, 7, 7, 7, 7]


def test_occupancy_is_blocks_used_over_the_cache():
    assert occupancy(_steps(), BLOCKS).tolist() == [0.05, 0.06, 0.25, 0.75]


def test_the_latency_figure_draws_each_cdf_its_slo_and_percentiles(figures, tmp_path):
    requests = _requests()
    serve_plots.latency_cdfs(requests, SUMMARY, tmp_path / "l.png")
    ttft, tpot, e2e = figures[0].axes
    x, y = cdf(requests.ttft_s)
    curve = ttft.lines[0]
    assert np.allclose(curve.get_xdata()[1:], x * 1e3) and np.allclose(curve.get_ydata()[1:], y)  # in ms
    assert curve.get_ydata()[0] == 0.0 and curve.get_ydata()[-1] == 1.0
    assert np.allclose(curve.get_xdata()[1:], np.sort(curve.get_xdata()[1:]))
    marks = ttft.lines[1]
    assert np.allclose(marks.get_xdata(), np.percentile(requests.ttft_s, [50, 90, 99]) * 1e3)
    slo = [line for line in ttft.lines if line.get_linestyle() == "--"]
    assert len(slo) == 1 and slo[0].get_xdata()[0] == pytest.approx(200)  # 0.2 s in ms
    # 32 of the 40 TTFTs (5 ms to 500 ms, evenly in log) are at most 200 ms
    assert "SLO 200 ms: 80.0% meet it" in [t.get_text() for t in ttft.texts], [t.get_text() for t in ttft.texts]
    assert [line.get_xdata()[0] for line in tpot.lines if line.get_linestyle() == "--"] == [pytest.approx(50)]
    assert not [line for line in e2e.lines if line.get_linestyle() == "--"]  # no SLO on the end-to-end latency
    assert (ttft.get_xscale(), tpot.get_xscale(), e2e.get_xscale()) == ("log", "linear", "linear")
    assert e2e.get_xlabel() == "E2E (s)" and "p99 1.3 s" in [t.get_text() for t in e2e.texts]


def test_the_kv_figure_draws_the_occupancy_and_the_queue(figures, tmp_path):
    steps = _steps()
    serve_plots.kv_occupancy(steps, SUMMARY, tmp_path / "k.png")
    kv, queue = figures[0].axes
    used = kv.lines[0]
    assert np.allclose(used.get_ydata(), step_series(steps.start_s, steps.end_s, occupancy(steps, BLOCKS) * 100)[1])
    assert max(used.get_ydata()) == pytest.approx(75.0)
    assert queue.lines[0].get_ydata().tolist() == [3, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 4, 4, 4, 4]
    assert "200 blocks of 16 tokens" in kv.get_title() and "peak 75.0%" in kv.get_title()


def test_instances_are_drawn_apart_since_their_steps_overlap(figures, tmp_path):
    one, two = _steps().assign(instance=0), _steps().assign(instance=1, kv_blocks_used=[20, 20, 20, 20])
    steps = pd.concat([one, two]).sort_values("start_s", kind="stable")
    assert [label for label, _ in serve_plots.instances(steps)] == ["instance 0", "instance 1"]
    assert [label for label, _ in serve_plots.instances(one)] == [""]  # one instance: no label
    serve_plots.kv_occupancy(steps, SUMMARY, tmp_path / "k.png")
    kv = figures[0].axes[0]
    drawn = {line.get_label(): np.asarray(line.get_ydata()).tolist() for line in kv.lines}
    assert drawn["KV blocks in use instance 1"] == [10.0] * 16
    assert drawn["KV blocks in use instance 0"] == step_series(one.start_s, one.end_s, occupancy(one, BLOCKS) * 100)[1].tolist()


def test_the_batch_figure_splits_prefills_and_decodes_where_both_columns_exist(figures, tmp_path):
    serve_plots.batch_sizes(_steps(), tmp_path / "b.png")
    serve_plots.batch_sizes(_steps().drop(columns=["prefills"]), tmp_path / "c.png")
    split, plain = figures[0].axes[0], figures[1].axes[0]
    assert split.get_legend_handles_labels()[1] == ["prefills in the step", "decodes in the step", "admitted"]
    assert plain.get_legend_handles_labels()[1] == ["admitted"]
    assert split.lines[0].get_ydata().tolist() == [2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    assert "max 2 sequences per step" in split.get_title()


def test_plot_serve_writes_its_figures_into_the_folder_or_elsewhere(serve_dir, tmp_path):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    paths = plot_serve(serve_dir)
    assert paths == [serve_dir / name for name in FIGURES]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    elsewhere = plot_serve(serve_dir, tmp_path / "figs")
    assert [p.parent for p in elsewhere] == [tmp_path / "figs"] * 3 and all(p.is_file() for p in elsewhere)
    assert not list(serve_dir.glob(".*"))  # no temporary file left


def test_a_real_serving_run_draws(tmp_path):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    result = memsim.serve("h100-sxm", "llama-3.1-8b", rate=5, count=20)
    result.write(tmp_path / "run")
    requests, steps, summary = read_serve(tmp_path / "run")
    assert len(requests) == 20 and summary["kv"]["blocks"] == result.summary.kv.blocks
    peak = occupancy(steps, summary["kv"]["blocks"]).max()
    assert peak == pytest.approx(result.summary.kv.peak_blocks / result.summary.kv.blocks)
    assert [p.name for p in plot_serve(tmp_path / "run")] == list(FIGURES)


@pytest.mark.parametrize(("name", "column"), [("requests.csv", "ttft_s"), ("requests.csv", "e2e_s"),
                                              ("steps.csv", "kv_blocks_used"), ("steps.csv", "end_s")])
def test_a_missing_column_names_the_file_and_the_column(serve_dir, name, column):
    table = pd.read_csv(serve_dir / name)
    table.drop(columns=[column]).to_csv(serve_dir / name, index=False)
    with pytest.raises(ConfigError) as info:
        plot_serve(serve_dir)
    assert info.value.file == str(serve_dir / name) and f"no column {column!r}" in info.value.message
    assert not (serve_dir / FIGURES[0]).exists()


@pytest.mark.parametrize(("summary", "field", "expect"), [
    ({"kv": {"block_tokens": 16}}, "kv.blocks", "missing"),
    ({"kv": {"blocks": 0}}, "kv.blocks", "not a whole number above 0"),
    ({"kv": {"blocks": 2.5}}, "kv.blocks", "not a whole number above 0"),
    ({"kv": {"blocks": 100}, "slo": {"ttft_s": "fast"}}, "slo.ttft_s", "not a number above 0"),
    ([1, 2], None, "not a JSON object"),
])
def test_a_bad_summary_names_the_field(serve_dir, summary, field, expect):
    (serve_dir / "serve.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError) as info:
        read_serve(serve_dir)
    assert info.value.file == str(serve_dir / "serve.json") and info.value.field == field and expect in info.value.message


def test_text_in_a_drawn_column_names_it(serve_dir):
    steps = _steps().astype({"prefills": object})
    steps.loc[1, "prefills"] = "two"
    steps.to_csv(serve_dir / "steps.csv", index=False)
    with pytest.raises(ConfigError) as info:
        read_serve(serve_dir)
    assert info.value.field == "prefills" and "row 3: 'two'" in info.value.message


def test_plot_serve_on_the_command_line(serve_dir, tmp_path):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    from click.testing import CliRunner

    result = CliRunner().invoke(cli.main, ["plot", "serve", str(serve_dir), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"wrote {tmp_path / 'out' / name}" for name in FIGURES]
    assert all((tmp_path / "out" / name).stat().st_size > 0 for name in FIGURES)


def test_a_folder_without_serve_json_is_one_line_and_exit_2(monkeypatch, capsys, serve_dir):
    (serve_dir / "serve.json").unlink()
    monkeypatch.setattr(sys, "argv", ["memsim", "plot", "serve", str(serve_dir)])
    with pytest.raises(SystemExit) as info:
        cli.entry()  # the console script: what turns the error into one line and exit code 2
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{serve_dir / 'serve.json'}: file not found" in err
    assert not (serve_dir / FIGURES[0]).exists()


def test_a_long_run_is_drawn_thinned_so_the_figure_not_the_table_sets_its_size(figures, tmp_path):
    """Issue 42: a steps.csv of a million rows took 3 GB to draw. Every line is now at most four
    points a slice of the time axis, the stacked areas one a slice, the CDFs 4 x BINS points, and
    each keeps the extremes a reader looks for."""
    from memsim.report.thin import BINS

    n = 200_000
    start = np.arange(n) * 1e-3
    rng = np.random.default_rng(1)
    steps = pd.DataFrame({"start_s": start, "end_s": start + 9e-4, "prefills": rng.integers(0, 2, n),
                          "decodes": rng.integers(0, 64, n), "kv_blocks_used": rng.integers(0, 200, n),
                          "running": rng.integers(1, 65, n), "waiting": rng.integers(0, 30, n)})
    steps.loc[n // 2, "kv_blocks_used"] = 200  # one full step: its peak must survive thinning
    serve_plots.kv_occupancy(steps, SUMMARY, tmp_path / "k.png")
    serve_plots.batch_sizes(steps, tmp_path / "b.png")
    requests = pd.DataFrame({col: rng.lognormal(-3, 1, n) for col in ("ttft_s", "tpot_s", "e2e_s")})
    serve_plots.latency_cdfs(requests, SUMMARY, tmp_path / "l.png")
    kv, queue = figures[0].axes
    lines = [line for fig in figures for ax in fig.axes for line in ax.lines]
    assert max(len(line.get_xdata()) for line in lines) <= 4 * BINS + 1
    band = {c.get_label(): c for ax in (kv, queue) for c in ax.collections}
    top = lambda label: max(v[1] for p in band[label].get_paths() for v in p.vertices)
    assert top("KV blocks in use: range within a slice") == pytest.approx(100.0)  # the peak survives, as a range
    assert top("waiting: range within a slice") == steps.waiting.max()
    assert max(kv.lines[0].get_ydata()) < 100.0  # the line is each slice's mean, not its extremes
    fills = [c for c in figures[1].axes[0].collections]
    assert fills and all(len(c.get_paths()[0].vertices) <= 2 * BINS + 10 for c in fills)


def test_a_rerun_into_a_folder_leaves_no_stale_figure(tmp_path):
    """Figures drawn from an earlier run's tables are gone once a new run writes its tables there; a
    run without energy leaves no energy figure of an earlier run beside its own."""
    from memsim import serve, simulate

    out = tmp_path / "s"
    serve("h100-sxm", "gpt2", count=3).write(out)
    (out / FIGURES[0]).write_bytes(b"\x89PNG old")
    serve("h100-sxm", "gpt2", count=4).write(out)
    assert sorted(p.name for p in out.iterdir()) == ["requests.csv", "serve.json", "steps.csv"]
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    from memsim.report.run_plots import plot_run

    run = tmp_path / "r"
    simulate("h100-sxm", "gpt2", context=16).write(run)
    (run / "energy.png").write_bytes(b"\x89PNG old")
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("energy_j", None)
    (run / "summary.json").write_text(json.dumps(summary))
    drawn = plot_run(run)
    assert "energy.png" not in {p.name for p in drawn} and not (run / "energy.png").exists()


def test_a_state_that_flickers_is_drawn_as_its_mean_not_a_solid_band(figures, tmp_path):
    """Issue 44: 13,000 steps whose queue flickers between 0 and 2 looked saturated at 0-2; each slice now
    draws the queue's mean over time."""
    from memsim.report.thin import BINS

    n = 10 * BINS
    start = np.arange(n) * 1e-3
    steps = pd.DataFrame({"start_s": start, "end_s": start + 1e-3, "prefills": 0, "decodes": 4,
                          "kv_blocks_used": 100, "running": 4, "waiting": np.tile([0, 2], n // 2)})
    serve_plots.kv_occupancy(steps, SUMMARY, tmp_path / "k.png")
    _, queue = figures[0].axes
    mean = queue.lines[0].get_ydata()
    assert np.allclose(mean, 1.0)  # a queue of 0 half the time and 2 the other half

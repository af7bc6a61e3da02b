"""Perfetto JSON that Perfetto and chrome://tracing open, and the figures of a run."""
from __future__ import annotations

import importlib.util
import json
from collections import defaultdict

import pytest

from memsim import report, simulate
from tests.conftest import warned


@pytest.fixture()
def run(tiny_chip_path, tiny_model_path):
    return simulate(str(tiny_chip_path), str(tiny_model_path), context=64, batch=2)


def _check_trace(trace: dict) -> None:
    events = trace["traceEvents"]
    phases = {e["ph"] for e in events}
    assert {"X", "C", "M"} <= phases
    last: dict[tuple, float] = defaultdict(lambda: -1.0)
    for e in events:
        assert isinstance(e["pid"], int) and e["name"]
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["tid"], int)
            key = (e["pid"], e["tid"])
        elif e["ph"] == "C":
            key = (e["pid"], "C", e["name"])
        else:
            continue
        assert e["ts"] >= last[key], e  # never backwards within a track
        last[key] = e["ts"]


def test_perfetto_has_a_track_per_resource_and_counters(run, tmp_path):
    files = run.write(tmp_path / "out", perfetto=True)
    assert tmp_path / "out" / "trace.perfetto.json" in files
    trace = json.loads((tmp_path / "out" / "trace.perfetto.json").read_text())
    _check_trace(trace)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"compute", "hbm"} <= names
    counters = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"}
    assert {"hbm bandwidth", "sram occupancy"} <= counters
    busy = sum(e["dur"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in ("compute", "stall")
               and e["tid"] == 0)
    assert busy == pytest.approx(run.summary.step_time_s * 1e6)
    assert trace["metadata"]["aggregated"] is False


def test_long_traces_are_aggregated_and_say_so(run):
    trace = report.perfetto(run.plan, run.engine, {}, limit=10)
    _check_trace(trace)
    assert trace["metadata"]["aggregated"] is True and "aggregated" in trace["metadata"]["note"]
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) < len(run.engine.records)


def test_plot_run_draws_three_figures(run, tmp_path):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    from memsim.report.run_plots import plot_run

    run.write(tmp_path / "out")
    paths = plot_run(tmp_path / "out")
    assert [p.name for p in paths] == ["gantt.png", "roofline.png", "stalls.png"]
    for p in paths:
        assert p.read_bytes()[:4] == b"\x89PNG" and p.stat().st_size > 5000


def test_merged_dequant_and_link_rows_reach_the_trace_and_the_figures(tiny_model_path, tmp_path):
    """An int4 model offloaded to host memory: its rows stand for whole steps, it has
    ``dequant`` intervals, and rows on the PCIe link its host memory is reached over."""
    with warned():
        run = simulate("a100-80gb-sxm", str(tiny_model_path), context=32, weight_dtype="int4",
                       set={"hbm.capacity": "64 KiB"})
    run.write(tmp_path / "out", perfetto=True)
    trace = json.loads((tmp_path / "out" / "trace.perfetto.json").read_text())
    _check_trace(trace)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"compute", "dequant", "ddr", "link:pcie"} <= names
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in xs} == {"compute", "dequant", "stall", "transfer"}
    assert all(e["args"].get("count", 1) > 1 for e in xs if e["cat"] == "compute")
    moved = sum(e["args"]["bytes"] for e in xs if e["cat"] == "transfer" and e["tid"] == _tid(trace, "link:pcie"))
    assert moved == run.summary.bytes_per_link["pcie"].total > 0
    if importlib.util.find_spec("matplotlib") is not None:
        from memsim.report.run_plots import plot_run

        assert len(plot_run(tmp_path / "out")) == 4


def _tid(trace: dict, name: str) -> int:
    return next(e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name" and e["args"]["name"] == name)


def test_figures_go_where_asked_and_a_rerun_redraws_them_instead_of_deleting_them(monkeypatch, capsys, tmp_path,
                                                                                   tiny_chip_path, tiny_model_path):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    from memsim.cli import main as cli

    def memsim(*args):
        monkeypatch.setattr("sys.argv", ["memsim", *args])
        try:
            cli.entry()
        except SystemExit as exc:
            assert exc.code == 0, capsys.readouterr().err
        return capsys.readouterr()

    out, figs = tmp_path / "out", tmp_path / "figs"
    run = ("run", "--hw", str(tiny_chip_path), "--model", str(tiny_model_path), "--out", str(out), "--sensitivity", "0")
    memsim(*run, "--context", "16")
    memsim("plot", "run", str(out), "-o", str(figs))
    assert {p.name for p in figs.iterdir()} >= {"gantt.png", "roofline.png", "stalls.png"}
    assert not (out / "gantt.png").exists()  # -o: nothing drawn beside the run
    memsim("plot", "run", str(out))
    before = (out / "gantt.png").read_bytes()
    printed = memsim(*run, "--context", "64").out  # a re-run of the folder draws its figures again
    assert f"wrote {out / 'gantt.png'}" in printed and (out / "gantt.png").read_bytes() != before

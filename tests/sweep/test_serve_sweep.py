"""memsim sweep --serve: serving runs over swept keywords and hardware fields, and capacity at an SLO."""
from __future__ import annotations

import pandas as pd
import pytest

from memsim.cli import main as cli
from memsim.core.errors import ConfigError
from memsim.sweep import runner as sweeping
from memsim.sweep import serve as serve_sweep
from tests.cli.test_cli import run_cli


def test_a_point_splits_into_typed_serving_keywords_and_hardware_overrides():
    options, sets = serve_sweep.split({"rate": "4", "count": "20", "prefix_caching": "true", "hbm.capacity": "40GB"})
    assert options == {"rate": 4.0, "count": 20, "prefix_caching": True}
    assert sets == [("hbm.capacity", "40GB")]
    with pytest.raises(ConfigError, match="neither a serving keyword"):
        serve_sweep.split({"batch": "8"})
    with pytest.raises(ConfigError, match="count: expected an integer, got 'many'"):
        serve_sweep.split({"count": "many"})


def test_capacity_is_the_highest_rate_meeting_both_slos_and_says_when_it_is_censored():
    results = pd.DataFrame({"rate": [1, 2, 4] * 3, "hbm.capacity": ["40GB"] * 3 + ["80GB"] * 3 + ["20GB"] * 3,
                            "hbm.capacity_bytes": [40e9] * 3 + [80e9] * 3 + [20e9] * 3, "error": [""] * 9,
                            "ttft_s_p90": [0.1, 0.2, 0.6, 0.1, 0.2, 0.45, 0.9, 0.9, 0.9], "slo.ttft_s": [0.5] * 9,
                            "tpot_s_p90": [0.05, 0.2, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05], "slo.tpot_s": [0.1] * 9,
                            "output_tokens_per_s": [10, 20, 30, 10, 20, 40, 1, 2, 3]})
    table = serve_sweep.capacity(results)
    assert table.to_dict("records")[:2] == [
        # 2 req/s misses the TPOT SLO though its TTFT is within
        {"hbm.capacity": "40GB", "rate_at_slo": 1.0, "bound": "found", "output_tokens_per_s": 10.0},
        # the highest rate swept met both: a lower bound, not the capacity
        {"hbm.capacity": "80GB", "rate_at_slo": 4.0, "bound": "at least", "output_tokens_per_s": 40.0}]
    last = table.to_dict("records")[2]
    assert last["bound"] == "below" and last["rate_at_slo"] != last["rate_at_slo"]  # NaN: none met them
    falls_behind = results.assign(offered_requests_per_s=results.rate, served_requests_per_s=results.rate * 0.5)
    assert set(serve_sweep.capacity(falls_behind).bound) == {"below"}


def test_the_command_sweeps_serving_runs_and_refuses_a_step_option(monkeypatch, capsys, tmp_path):
    def memsim_cli(*args):
        monkeypatch.setattr("sys.argv", ["memsim", "sweep", "--serve", *args])
        try:
            cli.entry()
        except SystemExit as exc:
            return exc.code, capsys.readouterr()
        return 0, capsys.readouterr()

    code, io = memsim_cli("--set", "rate=2,200", "--set", "count=12", "--set", "output_tokens=8", "--set", "slo_ttft=0.05",
                          "--workers", "1", "--out", str(tmp_path / "s"))
    assert code == 0, io.err
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert list(results.rate) == [2, 200] and (results.requests == 12).all()
    assert results.ttft_s_p90[1] > results.ttft_s_p90[0]  # a queue at the higher rate
    assert "requests a second within the p90 TTFT and TPOT SLOs" in io.out
    code, io = memsim_cli("--batch", "8", "--set", "rate=1,2", "--out", str(tmp_path / "t"))
    assert code == 2 and "--batch" in io.err and len(io.err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


def test_a_serving_sweep_resumes_keeps_its_points_and_is_one_experiment(monkeypatch, capsys, tmp_path, tiny_model_path):
    """One runner for both sweeps (issue 42, deliverable 5): a serving sweep run again does only the
    points it has not done, --keep writes each point's serving files, and the folder records one
    experiment."""
    out = tmp_path / "o"
    args = ("--model", str(tiny_model_path), "--set", "rate=5,10", "--set", "count=3", "--out", str(out), "--keep",
            "--no-progress", "--workers", "1")
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--serve", *args)
    assert code == 0, err
    first = pd.read_csv(out / "results.csv")
    kept = sorted((out / "points").iterdir())
    assert len(first) == 2 and len(kept) == 2 and all((k / "serve.json").is_file() for k in kept)
    ran = []
    real = sweeping.run_point
    monkeypatch.setattr(sweeping, "run_point", lambda *a, **k: ran.append(a) or real(*a, **k))
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--serve", *args[:3], "rate=5,10,20", *args[4:])
    assert code == 0, err
    again = pd.read_csv(out / "results.csv")
    assert len(ran) == 1 and list(again.rate) == [5, 10, 20]  # the two done points were not run again
    assert again.iloc[:2].drop(columns="outputs", errors="ignore").equals(first.drop(columns="outputs", errors="ignore"))


def test_a_serving_sweep_reads_its_fixed_and_swept_fields_from_a_sweep_file(monkeypatch, capsys, tmp_path,
                                                                          tiny_model_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("count: 3\noutput_tokens: 4\nset:\n  rate: [5, 10]\n")
    out = tmp_path / "o"
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--serve", "--model", str(tiny_model_path), "--sweep",
                           str(plan), "--out", str(out), "--workers", "1", "--no-progress")
    assert code == 0, err
    df = pd.read_csv(out / "results.csv")
    assert list(df.rate) == [5, 10] and set(df.requests) == {3}
    plan.write_text("output: 4\nset:\n  rate: [5]\n")  # a run's old keyword, or any unknown one: one line
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--serve", "--sweep", str(plan), "--out", str(tmp_path / "p"))
    assert code == 2 and "plan.yaml: output: unknown field" in err, err

"""memsim explain (issue 22, Deliver 1): every hardware quantity a run depends on, scaled down and
up, ranked by what it gains; each row a plain run with that one change."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import memsim
from memsim.run import explain as whatif
from tests.cli.test_cli import run_cli


@pytest.fixture(scope="module")
def decode() -> pd.DataFrame:
    return memsim.explain("h100-sxm", "llama-2-7b", context=2048, workers=1)


def rows(frame: pd.DataFrame, quantity: str) -> pd.DataFrame:
    return frame[frame["quantity"] == quantity].set_index("factor")


def test_a_batch_1_decode_is_fixed_by_hbm_bandwidth_and_not_by_sram(decode):
    """Llama-2-7B decode at batch 1 on h100-sxm: HBM bandwidth ranks first, x2 gives a speed-up
    between 1.5 and 2 (the weight stream is most of the step, not all of it); SRAM capacity
    changes nothing, and the console says the step is bound by the weight stream."""
    hbm = rows(decode, "levels[hbm].bandwidth")
    assert set(hbm["rank"]) == {1}
    assert 1.5 <= hbm.loc[2.0, "speedup"] <= 2 and hbm.loc[0.5, "speedup"] < 1
    assert -1 < hbm.loc[2.0, "elasticity"] < -0.5
    assert hbm.loc[2.0, "relieves"].startswith("hbm -") and hbm.loc[2.0, "relieves"].endswith(" ms")
    sram = rows(decode, "levels[sram].capacity")
    assert list(sram["speedup"]) == [1.0, 1.0]
    text = whatif.table(decode)
    assert "bound by the weight stream from hbm" in text
    assert "levels[sram].capacity" in text and "x2: no change" in text.split("levels[sram].capacity")[1].splitlines()[0]


def test_only_what_can_matter_is_tried(decode):
    """Host DDR and PCIe hold nothing in this run, so they are not tried; the scratchpad's capacity
    is (its tiles fill it), and its bandwidth (the matrix units read their operands from it), but
    not its latency (no load waits on it); one chip has no grid and no system latency to change."""
    tried = set(decode.loc[decode["kind"] != "estimate", "quantity"])
    assert not {q for q in tried if "ddr" in q or "pcie" in q or "nvlink" in q}
    assert {"levels[sram].capacity", "levels[sram].bandwidth"} <= tried and "levels[sram].latency" not in tried
    assert {"tp", "system.step_latency"}.isdisjoint(tried)
    assert {"compute.peak.bf16", "execution.op_overhead", "execution.power_cap"} <= tried
    assert list(decode.columns) == list(whatif.COLUMNS)


def test_each_row_is_a_plain_run_with_that_one_change(decode):
    """explain.csv's step time for a change equals `memsim run` with that change alone."""
    for _, row in decode[decode["quantity"].isin(["levels[hbm].bandwidth", "execution.op_overhead"])].iterrows():
        path, value = row["set"].removeprefix("--set ").split("=", 1)
        plain = memsim.simulate("h100-sxm", "llama-2-7b", context=2048, sensitivity=0, set={path: value})
        assert plain.summary.step_time_s == row["step_time_s"]
        assert plain.summary.energy_j.total == row["energy_j"]
    base = memsim.simulate("h100-sxm", "llama-2-7b", context=2048, sensitivity=0).summary.step_time_s
    assert decode.attrs["step_time_s"] == base
    assert (decode.step_time_s * decode["speedup"]).map(lambda t: math.isclose(t, base)).all()


def test_a_long_prefill_is_fixed_by_the_matrix_peak_and_a_smaller_l2_spills_activations():
    """Llama-2-7B prefill of 4096 tokens: the bf16 peak ranks first; half the L2 moves activations
    that lived there to HBM, and the row says so."""
    frame = memsim.explain("h100-sxm", "llama-2-7b", phase="prefill", prompt=4096, workers=1)
    assert set(rows(frame, "compute.peak.bf16")["rank"]) == {1}
    assert "compute bound" in whatif.table(frame)
    l2 = rows(frame, "levels[l2].capacity")
    assert l2.loc[0.5, "moves"].endswith("activation l2>hbm") and l2.loc[0.5, "speedup"] < 1
    assert (frame.loc[frame["kind"] != "capacity", "moves"] == "").all()
    # its attention's exponentials run on the special-function units: faster ones help, slower ones hurt
    special = rows(frame, "compute.special_peak")
    assert special.loc[2.0, "speedup"] > 1 > special.loc[0.5, "speedup"]


def test_the_command_prints_the_ranking_writes_the_csv_and_plots_it(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                                     tiny_model_path):
    out = tmp_path / "explain.csv"
    code, stdout, err = run_cli(monkeypatch, capsys, "explain", "--hw", str(tiny_chip_path), "--model",
                                str(tiny_model_path), "--context", "64", "--workers", "1", "-o", str(out))
    assert code == 0, err
    assert "rank  quantity" in stdout and f"wrote {out}" in stdout
    frame = pd.read_csv(out)
    assert list(frame.columns) == list(whatif.COLUMNS) and len(frame) >= 2
    pytest.importorskip("matplotlib")
    code, stdout, err = run_cli(monkeypatch, capsys, "plot", "explain", str(out))
    assert code == 0, err
    assert (tmp_path / "explain.png").stat().st_size > 0


def test_a_factor_of_one_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    out = tmp_path / "explain.csv"
    code, _, err = run_cli(monkeypatch, capsys, "explain", "--hw", str(tiny_chip_path), "--model",
                           str(tiny_model_path), "--factor", "1", "-o", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--factor" in err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.long
def test_sn40l_at_tp_16_is_fixed_by_hbm_bandwidth():
    frame = memsim.explain("sn40l", "llama-3.1-70b", context=2048, tp=16)
    assert set(rows(frame, "levels[hbm].bandwidth")["rank"]) == {1}
    assert "tp" in set(frame["quantity"])


@pytest.mark.slow
def test_a_prefill_on_a_small_sram_is_fixed_by_the_sram():
    """Llama-2-7B prefill of 2048 tokens on h100-sxm with 256 KiB of SRAM: each SM's tile shrinks
    to 15 x 15, the tensor cores wait for shared memory, and the SRAM's capacity is among the two
    changes that gain most (its bandwidth the other); the matrix peak gains next to nothing."""
    frame = memsim.explain("h100-sxm", "llama-2-7b", phase="prefill", prompt=2048, set={"sram.capacity": "256KiB"})
    assert set(rows(frame, "levels[sram].capacity")["rank"]) <= {1, 2}
    assert rows(frame, "levels[sram].capacity").loc[2.0, "speedup"] > 1.3
    assert rows(frame, "compute.peak.bf16").loc[2.0, "speedup"] < 1.05


@pytest.mark.slow
@pytest.mark.long
def test_groq_on_576_chips_is_fixed_by_the_chip_to_chip_latency():
    """A batch-1 decode moves kilobytes per hop and per all-reduce: rounds of link latency, not bytes."""
    frame = memsim.explain("groq-lpu", "llama-2-70b", weight_dtype="int8", context=2048, tp=16, pp=36)
    changes = frame[frame["kind"] != "estimate"]  # the latency is an estimate: its range's rows are unranked
    assert set(rows(changes, "links[c2c].latency")["rank"]) == {1}
    assert set(rows(changes, "links[c2c].bandwidth")["rank"]) == {2}


def test_the_estimates_band_is_every_estimate_at_both_ends(decode):
    """explain's estimate rows: each estimate the step time can depend on, alone at each end of its
    range; the band spans them and the run; an estimate is not ranked among the changes."""
    est = decode[decode["kind"] == "estimate"]
    assert len(est) >= 2 and est["rank"].isna().all()
    assert "levels[hbm].latency" in set(est["quantity"])  # an estimate: 600 ns [400 ns .. 900 ns]
    low, high = decode.attrs["band_s"]
    assert low == min([*est["step_time_s"], decode.attrs["step_time_s"]])
    assert high == max([*est["step_time_s"], decode.attrs["step_time_s"]])
    assert decode.index[decode["kind"] == "estimate"].min() > decode.index[decode["kind"] != "estimate"].max()
    hbm = est[est["quantity"] == "levels[hbm].latency"].set_index("new_value")
    plain = memsim.simulate("h100-sxm", "llama-2-7b", context=2048, sensitivity=0,
                            set={"levels.hbm.latency": "900 ns"}).summary.step_time_s
    assert hbm.loc["900 ns", "step_time_s"] == plain


def test_the_explain_page_is_current():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    from memsim.sweep import explain_serve

    page = whatif.reference() + explain_serve.reference()  # and memsim explain --serve's section
    assert (root / "docs" / "explain.md").read_text() == page, "python scripts/reference.py --write"


@pytest.mark.slow
@pytest.mark.long
def test_the_worked_examples_are_current():
    """docs/explain-examples.md: each family's worked example, from a run of this commit."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "explain_examples.py"
    spec = importlib.util.spec_from_file_location("explain_examples", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == 0, "python scripts/explain_examples.py --write"


@pytest.mark.parametrize("factors", [(), (float("nan"),), (float("inf"),), (0.0,), (-2.0,), (1,), (True,),
                                     tuple(range(2, 12))])
def test_factors_explain_cannot_scale_by_are_refused_before_any_run(factors):
    with pytest.raises(memsim.MemsimError) as caught:
        memsim.explain("no-such-chip", "gpt2", factors=factors)  # refused before the chip is read
    assert caught.value.field == "factors"


@pytest.mark.slow
def test_explain_runs_on_a_dask_cluster_as_the_sweeps_do_and_gives_the_same_table(decode):
    """explain's reruns go through the experiments' one runner (``pools.run_each``): on a Dask cluster
    the table is the local one's, row for row."""
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = memsim.explain("h100-sxm", "llama-2-7b", context=2048, scheduler=client)
    pd.testing.assert_frame_equal(on_dask, decode)


def test_explain_refuses_a_malformed_scheduler_in_one_line_before_it_runs(monkeypatch, capsys, tmp_path):
    out = tmp_path / "explain.csv"
    code, stdout, stderr = run_cli(monkeypatch, capsys, "explain", "--model", "gpt2", "--scheduler", "no such host",
                                   "-o", str(out))
    assert code == 2 and "--scheduler" in stderr and len(stderr.strip().splitlines()) == 1
    assert "Traceback" not in stderr and not stdout and not out.exists()


def test_a_quantity_the_run_sets_is_set_anew_not_given_twice():
    from memsim.run.quantities import Quantity, changed
    from memsim.run.runspec import RunSpec

    spec = RunSpec.make({"model": "llama-3.2-1b", "set": ["levels.hbm.bandwidth=3000GB/s", "compute.peak.bf16=500T"]})
    q = Quantity(name="levels[hbm].bandwidth", kind="bandwidth", unit="bandwidth", value=3_000_000_000_000)
    assert changed(spec, q, 6_000_000_000_000).set == (("compute.peak.bf16", "500T"), ("levels.hbm.bandwidth", "6 TB/s"))

"""Energy adds up: per operator, per level and link, per record; and it never undercuts what
the compulsory bytes and the FLOPs cost at the preset's figures."""
from __future__ import annotations

import numpy as np
import pytest

from memsim import hardware, simulate
from memsim.hardware.resource import Ref
from memsim.mapping.power import bit_energy
from memsim.report.energy import profile, static_w
from memsim.report.perfetto import perfetto
from tests.conftest import warned

GPUS = [p for p in hardware.presets() if hardware.load(p).family == "gpu"]


def _dynamic_levels(s: dict) -> float:
    return sum(s.energy_j.levels.values()) + sum(s.energy_j.links.values())


@pytest.mark.parametrize("preset", hardware.presets())
def test_energy_adds_up_on_every_preset(preset):
    r = simulate(preset, "gpt2", phase="decode", batch=2, context=64, tp=2 if preset == "groq-lpu" else 1)
    s, chip = r.summary, r.chip
    e = s.energy_j
    assert e.total > 0 and e.static > 0 and e.compute > 0
    assert e.total == pytest.approx(e.dynamic + e.static, rel=1e-12)
    assert e.dynamic == pytest.approx(e.compute + _dynamic_levels(s), rel=1e-12)
    # every operator's energy, and every record's, add up to the total and to the dynamic part
    assert r.ops["energy_j"].sum() == pytest.approx(e.total, rel=1e-9)
    assert r.ops["dynamic_energy_j"].sum() == pytest.approx(e.dynamic, rel=1e-9)
    # a timeline row of a rank's own resource stands for every rank of its stage (one rank is
    # simulated); a transfer on a link between chips is one of its own
    tp = r.plan.tp
    between = r.timeline["resource"].str.match(r"link:.*\[")
    assert (r.timeline.energy_j * between.map({True: 1, False: tp})).sum() == pytest.approx(e.dynamic, rel=1e-9)
    # each level's dynamic energy is its bytes (one rank's) times its energy per bit, for every rank
    for lvl in chip.levels:
        moved = s.bytes_per_level[lvl.name].total
        assert e.levels[lvl.name] == pytest.approx(tp * moved * 8 * lvl.energy_fj_per_bit / 1e15, rel=1e-12)
    assert e.static == pytest.approx(chip.power.static_mw / 1000 * s.chips * s.step_time_s, rel=1e-12)
    assert s.avg_power_w == pytest.approx(e.total / s.step_time_s)
    assert s.energy_per_token_j == pytest.approx(e.total / 2)
    assert s.power_cap_w == chip.power.tdp_mw / 1000


@pytest.mark.parametrize("preset, model, phase, tp", [
    ("a100-80gb-sxm", "llama-3.2-1b", "decode", 1), ("h100-sxm", "llama-3.2-1b", "prefill", 2),
    ("sn40l", "llama-3.2-1b", "decode", 1), pytest.param("wse-3", "llama-3.2-1b", "prefill", 1, marks=pytest.mark.slow),
    ("groq-lpu", "gpt2", "decode", 2)])
def test_no_run_costs_less_than_its_compulsory_bytes_and_flops(preset, model, phase, tp):
    r = simulate(preset, model, phase=phase, batch=1, context=512, prompt=256, tp=tp)
    s, chip = r.summary, r.chip
    dtype = s.workload.weight_dtype
    least_flop = min(chip.compute.flop_energy(dtype), chip.compute.vector_energy_fj_per_flop)
    floor = sum(b * 8 * bit_energy(chip, Ref.level(lvl)) for lvl, b in s.compulsory_bytes.items()) / 1e15
    floor += s.flops_total * least_flop / 1e15 + static_w(r.plan) * s.step_time_s
    assert s.energy_j.total >= floor * (1 - 1e-12)


@pytest.mark.parametrize("preset", GPUS)
def test_data_movement_dominates_decode_and_compute_dominates_prefill(preset):
    small = preset.startswith("wormhole")  # 13.5 GB of bf16 weights spill past a Wormhole's 12 GB
    with warned(when=small):
        decode = simulate(preset, "llama-2-7b", phase="decode", batch=1, context=2048).summary.energy_j
    moving = decode.dynamic - decode.compute
    assert moving > decode.compute, decode
    with warned(when=small):
        prefill = simulate(preset, "llama-2-7b", phase="prefill", batch=1, prompt=4096).summary.energy_j
    assert prefill.compute > prefill.dynamic - prefill.compute, prefill


def test_the_power_counter_integrates_to_the_energy_and_peaks_where_the_summary_says():
    r = simulate("a100-80gb-sxm", "gpt2", phase="prefill", batch=1, prompt=64)
    trace = perfetto(r.plan, r.engine, {})
    points = [(e["ts"], e["args"]["W"]) for e in trace["traceEvents"] if e.get("name") == "power"]
    ts = np.array([p[0] for p in points]) / 1e6
    watts = np.array([p[1] for p in points])
    end = r.summary.step_time_s
    joules = float(np.sum(watts[:-1] * np.diff(ts)) + watts[-1] * (end - ts[-1]))
    assert joules == pytest.approx(r.summary.energy_j.total, rel=1e-3)
    # the step is shorter than the window: its peak is its mean
    assert r.summary.power_window_s == pytest.approx(end)
    assert r.summary.peak_power_w == pytest.approx(r.summary.avg_power_w, rel=1e-6)


def test_peak_power_over_a_window_is_at_least_the_mean_and_at_most_the_highest_instant():
    r = simulate("h100-sxm", "llama-2-7b", phase="prefill", batch=1, prompt=1024, set={"power.window": "1 ms"})
    s = r.summary
    _times, watts = profile(r.engine.records, r.engine.end_ps)
    assert s.power_window_s == pytest.approx(1e-3)
    assert s.avg_power_w <= s.peak_power_w * (1 + 1e-9)
    assert s.peak_power_w <= watts.max() + static_w(r.plan) + 1e-6
    assert s.chip_power_w == s.peak_power_w  # one chip


def test_a_chip_s_power_is_its_own_and_a_wafer_s_regions_share_one_budget():
    tp = simulate("h100-sxm", "llama-3.2-1b", phase="prefill", batch=1, prompt=512, tp=2)
    static = tp.chip.power.static_mw / 1000
    # the ranks of a stage are simulated once: each chip draws its rank's records' power and its static
    # power, all chips together every rank's (a collective's transfers count for the chip that runs it)
    s = tp.summary
    assert static < s.chip_power_w < s.peak_power_w <= 2 * s.chip_power_w * (1 + 1e-9)
    alone = simulate("h100-sxm", "llama-3.2-1b", phase="prefill", batch=1, prompt=512, tp=2,
                     set={"nvlink.energy": "0 pJ/bit"}).summary
    # the summary rounds watts to the microwatt, so twice a rounded value may be 1 uW off
    assert alone.peak_power_w == pytest.approx(2 * alone.chip_power_w, abs=2e-6)
    wafer = simulate("wse-3", "llama-3.2-1b", phase="prefill", batch=1, prompt=64).summary
    assert wafer.chips == 1 and wafer.chip_power_w == wafer.peak_power_w


def test_generation_energy_is_its_steps_energy_and_per_generated_token():
    g = simulate("a100-80gb-sxm", "gpt2", phase="generate", batch=2, prompt=16, generate=8, samples=100)
    s = g.summary
    assert s.energy_per_token_j == pytest.approx(s.energy_j.total / (2 * 9))
    assert s.avg_power_w == pytest.approx(s.energy_j.total / s.total_s)
    prefill = simulate("a100-80gb-sxm", "gpt2", phase="prefill", batch=2, prompt=16).summary
    steps = [simulate("a100-80gb-sxm", "gpt2", phase="decode", batch=2, context=c).summary for c in range(16, 24)]
    total = prefill.energy_j.total + sum(d.energy_j.total for d in steps)
    assert s.energy_j.total == pytest.approx(total, rel=1e-9)
    assert s.peak_power_w == pytest.approx(max(d.peak_power_w for d in [prefill, *steps]))


def test_the_docs_power_cap_table_is_what_memsim_computes():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "energy.md").read_text()
    for cap, label in (("400W", "400 W (TDP)"), ("250W", "250 W"), ("150W", "150 W")):
        with warned("power cap of 150 W a chip is not held", when=cap == "150W"):  # the table says so too
            runs = [simulate("a100-80gb-sxm", "llama-2-7b", phase=phase, batch=1, set={"execution.power_cap": cap},
                             stack="ideal", **kw)
                    .summary for phase, kw in (("decode", {"context": 2048}), ("prefill", {"prompt": 4096}))]
        d, p = runs
        row = (f"| {label} | {d.step_time_s * 1e3:.2f} ms | {d.avg_power_w:.0f} W | {p.step_time_s * 1e3:.1f} ms "
               f"| {p.avg_power_w:.0f} W |")
        assert row in readme, row


def test_a_step_past_the_horizon_is_one_line_not_an_overflow(monkeypatch, capsys):
    """Issue 20: a step past 2^63 ps overflowed np.int64 in the energy profile."""
    from tests.cli.test_cli import run_cli

    code, _, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--context", "16", "--set",
                           "hbm.latency=1e15s")
    assert code == 2 and "horizon" in err and len(err.strip().splitlines()) == 1, err
    # within it, a week-long step is simulated
    with warned():
        long = simulate("h100-sxm", "llama-2-7b", context=16, sensitivity=0, set={"pcie.bandwidth": "1MB/s",
                                                                                   "hbm.capacity": "1GB"})
    assert long.summary.step_time_s > 3600 and long.summary.energy_j.total > 0

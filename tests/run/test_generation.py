"""Generation: prefill then N decode steps, with sampled steps interpolated."""
from __future__ import annotations

import pytest

from memsim import ConfigError, simulate
from memsim.report.summary_fields import COMBINE, ONCE, RECOMPUTED, SUMMED
from memsim.report.summary_records import DecodeSample, present
from memsim.run.generation import combine, sample_contexts


def test_sample_contexts_cover_the_range():
    assert sample_contexts(100, 5, 8) == [100, 101, 102, 103, 104]
    picks = sample_contexts(128, 2048, 8)
    assert picks[0] == 128 and picks[-1] == 128 + 2047 and len(picks) == 8


@pytest.mark.slow
@pytest.mark.parametrize("model, prompt, steps", [("gpt2", 128, 128)])
def test_sampled_generation_matches_every_step_within_1_percent(model, prompt, steps):
    sampled = simulate("h100-sxm", model, phase="generate", prompt=prompt, generate=steps).summary
    full = simulate("h100-sxm", model, phase="generate", prompt=prompt, generate=steps, samples=steps).summary
    assert len(full.decode_samples) == steps and len(sampled.decode_samples) == 8
    for key in ("ttft_s", "tpot_s", "total_s", "tokens_per_s"):
        assert getattr(sampled, key) == pytest.approx(getattr(full, key), rel=0.01), key
    assert sampled.ttft_s == full.ttft_s
    hbm = lambda s: s.bytes_per_level["hbm"].total
    assert hbm(sampled) == pytest.approx(hbm(full), rel=0.01)


def test_generation_totals_are_consistent(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=40,
                 batch=2).summary
    prefill = simulate(str(tiny_chip_path), str(tiny_model_path), phase="prefill", prompt=16, batch=2).summary
    first = simulate(str(tiny_chip_path), str(tiny_model_path), phase="decode", context=16, batch=2).summary
    assert s.ttft_s == prefill.step_time_s
    # Not a restatement of the summary's formula: every decode step simulated on its own, and added.
    every = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=40,
                     batch=2, samples=40).summary
    steps = [simulate(str(tiny_chip_path), str(tiny_model_path), phase="decode", context=c,
                      batch=2).summary.step_time_s for c in range(16, 56)]
    assert every.total_s == pytest.approx(prefill.step_time_s + sum(steps), rel=1e-9)
    assert every.tpot_s == pytest.approx(sum(steps) / 40, rel=1e-9)
    assert s.total_s == pytest.approx(every.total_s, rel=0.01)  # sampled: within 1%
    assert s.step_time_s == pytest.approx(s.total_s)
    assert s.tokens_per_s == pytest.approx(2 * 41 / s.total_s)  # the prefill's first token included
    assert s.decode_samples[0] == DecodeSample(context=16, step_time_s=first.step_time_s)
    # The KV cache grows, so later steps are no faster than the first.
    times = [d.step_time_s for d in s.decode_samples]
    assert times == sorted(times)
    assert s.compute_busy_s + s.stall_total_s == pytest.approx(s.total_s)


def test_generate_needs_a_model_and_tokens(tiny_chip_path, tiny_model_path):
    with pytest.raises(ConfigError):
        simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=0)


def test_every_summary_key_declares_how_it_combines_over_a_generation(tiny_chip_path, tiny_model_path):
    step = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    gen = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=3).summary
    assert set(present(step)) | set(present(gen)) <= set(COMBINE)
    # a speculative run's own key (tests/run/test_speculative.py), --chips N's (tests/run/test_grid.py), a
    # cap no clock holds (tests/run/test_powercap.py) and a chip file's base (tests/hardware/test_base.py)
    assert set(present(gen)) == set(COMBINE) - {"speculative", "grid_search", "power_cap_unmet_w", "derived_from"}
    assert set(COMBINE.values()) == {SUMMED, ONCE, RECOMPUTED}
    again = combine(step, {16: step}, 16, 1)  # a prefill and one decode step, combined from the declarations
    assert again.step_time_s == pytest.approx(2 * step.step_time_s) and again.ttft_s == step.step_time_s
    assert again.energy_j.total == pytest.approx(2 * step.energy_j.total) and again.hardware == step.hardware


def test_a_generation_takes_once_what_every_step_shares(tiny_chip_path, tiny_model_path):
    chip, model = str(tiny_chip_path), str(tiny_model_path)
    s = simulate(chip, model, phase="generate", prompt=16, generate=20, batch=2, samples=4).summary
    prefill = simulate(chip, model, phase="prefill", prompt=16, batch=2).summary
    for key in ("chips", "ops", "weight_bytes_stored", "hardware", "family"):
        assert getattr(s, key) == getattr(prefill, key), key
    assert s.chips == 1
    # Summed: the weights are read by every step, the prefill's plus 20 decode steps'.
    assert s.weight_bytes > 20 * prefill.weight_bytes
    decode = simulate(chip, model, context=16, batch=2).summary
    # The engine's statistics are those of the steps simulated: the prefill and 4 sampled decode steps.
    assert s.engine.simulated_ops + s.engine.replayed_ops == prefill.ops + 4 * decode.ops
    assert s.step_over_roofline == pytest.approx(s.total_s / s.roofline_s)
    assert s.tokens_per_s == pytest.approx(2 * 21 / s.total_s)
    assert s.workload.phase == "generate" and s.workload.generate == 20


def test_a_generation_on_several_chips_counts_them_once(tiny_model_path):
    s = simulate("h100-sxm", str(tiny_model_path), phase="generate", prompt=16, generate=4, tp=2, pp=2).summary
    assert s.chips == 4


def test_decode_samples_that_touch_different_levels_are_summed_level_by_level(tiny_chip_path, tiny_model_path):
    """A later decode step may spill its KV cache to a level an earlier one never touched (Llama-3.1-8B,
    batch 32, 16,384 tokens generated on h100-sxm reaches host DDR): each sample's missing levels and
    stalls count as 0 there, whichever sample comes first (it failed with ``KeyError: 'ddr'``)."""
    import dataclasses

    import numpy as np

    from memsim.report.summary_records import Traffic
    from memsim.run.generation import interpolated_sums

    def moved(read: int) -> Traffic:
        return Traffic(read=read, written=0, total=read, compulsory=read, capacity=0, busy_s=read / 10)

    step = simulate(str(tiny_chip_path), str(tiny_model_path), context=16, sensitivity=0).summary
    early = dataclasses.replace(step, step_time_s=1.0, stall_s={"hbm": 1.0}, bytes_per_level={"hbm": moved(10)})
    late = dataclasses.replace(step, step_time_s=3.0, stall_s={"hbm": 1.0, "link:pcie": 2.0},
                               bytes_per_level={"hbm": moved(10), "ddr": moved(30)})
    sums = interpolated_sums({0: early, 2: late}, np.arange(3, dtype=float))
    assert sums["step_time_s"] == pytest.approx(1.0 + 2.0 + 3.0)
    assert sums["stall_s"] == pytest.approx({"hbm": 3.0, "link:pcie": 0.0 + 1.0 + 2.0})
    assert sums["bytes_per_level"] == {"ddr": moved(0 + 15 + 30), "hbm": moved(30)}
    assert "ttft_s" not in sums and "hardware" not in sums  # only the SUMMED fields


def test_a_generations_utilization_is_its_resources_summed_busy_time_over_its_time(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=8, sensitivity=0).summary
    hbm, share = s.per_chip["chip0"]["hbm"], s.utilization["chip0"]["hbm"]
    assert 0 < share <= 1 and share == pytest.approx(hbm.busy_s / s.total_s)
    assert hbm.read == s.bytes_per_level["hbm"].read

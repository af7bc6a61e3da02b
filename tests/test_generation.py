"""Generation: prefill then N decode steps, with sampled steps interpolated."""
from __future__ import annotations

import pytest

from memsim import ConfigError, simulate
from memsim.generation import sample_contexts


def test_sample_contexts_cover_the_range():
    assert sample_contexts(100, 5, 8) == [100, 101, 102, 103, 104]
    picks = sample_contexts(128, 2048, 8)
    assert picks[0] == 128 and picks[-1] == 128 + 2047 and len(picks) == 8


@pytest.mark.parametrize("model, prompt, steps", [("gpt2", 128, 128)])
def test_sampled_generation_matches_every_step_within_1_percent(model, prompt, steps):
    sampled = simulate("h100-sxm", model, phase="generate", prompt=prompt, generate=steps).summary
    full = simulate("h100-sxm", model, phase="generate", prompt=prompt, generate=steps, samples=steps).summary
    assert len(full["decode_samples"]) == steps and len(sampled["decode_samples"]) == 8
    for key in ("ttft_s", "tpot_s", "total_s", "tokens_per_s"):
        assert sampled[key] == pytest.approx(full[key], rel=0.01), key
    assert sampled["ttft_s"] == full["ttft_s"]
    hbm = lambda s: s["bytes_per_level"]["hbm"]["total"]  # noqa: E731
    assert hbm(sampled) == pytest.approx(hbm(full), rel=0.01)


def test_generation_totals_are_consistent(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=40,
                 batch=2).summary
    prefill = simulate(str(tiny_chip_path), str(tiny_model_path), phase="prefill", prompt=16, batch=2).summary
    first = simulate(str(tiny_chip_path), str(tiny_model_path), phase="decode", context=16, batch=2).summary
    assert s["ttft_s"] == prefill["step_time_s"]
    assert s["total_s"] == pytest.approx(s["ttft_s"] + 40 * s["tpot_s"])
    assert s["step_time_s"] == pytest.approx(s["total_s"])
    assert s["tokens_per_s"] == pytest.approx(2 * 40 / s["total_s"])
    assert s["decode_samples"][0] == {"context": 16, "step_time_s": first["step_time_s"]}
    # The KV cache grows, so later steps are no faster than the first.
    times = [d["step_time_s"] for d in s["decode_samples"]]
    assert times == sorted(times)
    assert s["compute_busy_s"] + s["stall_total_s"] == pytest.approx(s["total_s"])


def test_generate_needs_a_model_and_tokens(tiny_chip_path, tiny_model_path):
    with pytest.raises(ConfigError):
        simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=0)

"""The spine's acceptance checks on shipped presets and models (small enough to run in CI)."""
from __future__ import annotations

import itertools

import pytest

from memsim import simulate

SRAM_SIZES = ["256KiB", "512KiB", "1MiB", "2MiB", "4MiB", "8MiB", "16MiB", "32MiB", "64MiB"]


def test_llama2_7b_decode_on_h100_sits_just_above_the_roofline():
    s = simulate("h100-sxm", "llama-2-7b", phase="decode", batch=1, context=2048).summary
    assert s.roofline_bound == "hbm"
    assert s.roofline_s <= s.step_time_s <= 1.6 * s.roofline_s
    hbm = s.bytes_per_level["hbm"].read
    assert hbm >= s.weight_bytes + s.kv_cache_bytes
    # every weight matrix is streamed; only embedding rows are gathered
    assert s.weight_bytes > 0.98 * s.weight_bytes_stored
    assert s.kv_cache_bytes == 32 * 2 * 2048 * 4096 * 2


def test_llama2_7b_prefill_sram_sweep_cuts_traffic_and_never_slows():
    runs = [simulate("h100-sxm", "llama-2-7b", phase="prefill", prompt=4096, set={"sram.capacity": size}).summary
            for size in SRAM_SIZES]
    hbm = [r.bytes_per_level["hbm"].total for r in runs]
    times = [r.step_time_s for r in runs]
    assert all(a > b for a, b in itertools.pairwise(hbm)), hbm
    assert all(a >= b for a, b in itertools.pairwise(times)), times
    assert times[0] > 1.15 * times[-1]  # small SRAM makes prefill memory-bound (1.18x with calibrated compute)


@pytest.mark.parametrize("hw", ["h100-sxm", "a100-80gb-sxm"])
def test_quantised_weights_move_fewer_bytes_and_run_faster(hw):
    base = simulate(hw, "llama-3.1-8b", context=1024).summary
    int4 = simulate(hw, "llama-3.1-8b", context=1024, weight_dtype="int4").summary
    assert int4.bytes_per_level["hbm"].read < 0.4 * base.bytes_per_level["hbm"].read
    assert int4.step_time_s < base.step_time_s


def test_quantised_decode_speedup_follows_the_bytes_moved():
    runs = {d: simulate("a100-80gb-sxm", "llama-2-7b", context=2048, weight_dtype=d, group_size=32).summary
            for d in ("bf16", "int8", "int4")}
    hbm = {d: r.bytes_per_level["hbm"].read for d, r in runs.items()}
    t = {d: r.step_time_s for d, r in runs.items()}
    assert t["bf16"] > t["int8"] > t["int4"]
    for d in ("int8", "int4"):
        byte_ratio, speedup = hbm["bf16"] / hbm[d], t["bf16"] / t[d]
        # Unpacking costs some of the gain but never all of it, and never adds any.
        assert 0.5 * byte_ratio < speedup < byte_ratio

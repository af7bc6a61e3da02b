"""Attention's work items: the fill and drain of each item's loop over its keys."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import hardware
from memsim.mapping.lower import Context
from memsim.mapping.workitems import KV_SPLIT_MIN, attention_share, filled
from memsim.run import api
from memsim.validation.microbench import attention_graph
from memsim.workload.graph import OpGraph


def test_attention_share_counts_items_and_splits():
    chip = hardware.load("h100-sxm", [("execution.kv_split", "1")])
    cx = Context(chip, OpGraph(), {}, grid=True)
    assert attention_share(cx, 33, 10**6) == pytest.approx(33 / 132)
    assert attention_share(cx, 132, 10) == 1.0
    auto = Context(hardware.load("h100-sxm"), OpGraph(), {}, grid=True)
    assert attention_share(auto, 8, 100 * KV_SPLIT_MIN) == 1.0  # 17 splits of 8 items fill 132 units
    assert attention_share(auto, 8, 2 * KV_SPLIT_MIN) == pytest.approx(16 / 132)  # only two splits fit
    assert attention_share(auto, 8, 3 * KV_SPLIT_MIN - 1) < attention_share(auto, 8, 3 * KV_SPLIT_MIN)
    # a split count limited by the keys grows with them, so one more key never speeds attention up
    shares = [attention_share(auto, 8, kv) for kv in range(64, 400)]
    assert all(kv / a <= (kv + 1) / b for kv, a, b in zip(range(64, 400), shares, shares[1:]))
    wafer = Context(hardware.load("wse-3"), OpGraph(), {})
    assert attention_share(wafer, 1, 1) == 1.0


def test_no_fill_leaves_the_time_alone():
    assert filled(1000, 0, 64) == 1000


def test_a_fill_of_one_loop_doubles_it():
    assert filled(1000, 256, 256) == 2000


@given(st.integers(1, 10**9), st.integers(0, 1024), st.integers(1, 1 << 16), st.integers(1, 1 << 16))
def test_more_keys_never_take_less_time_and_never_run_slower_per_key(per_key, fill, keys, more):
    # busy grows with the keys; the fill is fixed per item, so the rate per key only rises
    short, long = filled(per_key * keys, fill, keys), filled(per_key * (keys + more), fill, keys + more)
    assert long >= short
    assert long / (keys + more) <= short / keys + 1


def _rate(seq: int, fill: str) -> float:
    g = attention_graph(16384 // seq, 16, seq, 128, "bf16", causal=False)
    r = api.simulate_graph("h100-sxm", g, set={"execution.attention_fill": fill}, stack="ideal")
    return g.total_flops() / r.summary.step_time_s


def test_attention_rate_rises_with_sequence_length_on_a_gpu():
    # FlashAttention-3 on H100 (microbench.csv rows 77-82): 430 TFLOP/s at 512 keys, 621 at 16k
    short, long = _rate(512, "256"), _rate(16384, "256")
    assert 0.6 < short / long < 0.75
    # without a fill the rate is all but flat in the sequence length
    assert _rate(512, "0") / _rate(16384, "0") > 0.9

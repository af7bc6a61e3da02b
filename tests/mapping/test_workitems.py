"""Attention's work items: the fill and drain of each item's loop over its keys."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsim import api
from memsim.mapping.workitems import filled
from memsim.validation.microbench import attention_graph


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
    r = api.simulate_graph("h100-sxm", g, set={"execution.attention_fill": fill, "execution.launch": "graph"})
    return g.total_flops() / r.summary["step_time_s"]


def test_attention_rate_rises_with_sequence_length_on_a_gpu():
    # FlashAttention-3 on H100 (microbench.csv rows 77-82): 430 TFLOP/s at 512 keys, 621 at 16k
    short, long = _rate(512, "256"), _rate(16384, "256")
    assert 0.6 < short / long < 0.75
    # without a fill the rate is all but flat in the sequence length
    assert _rate(512, "0") / _rate(16384, "0") > 0.9

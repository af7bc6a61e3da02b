"""Heads that do not divide the tensor-parallel ranks: shared out as tt-metal does, padded, each
rank's share rounded up, so the step is the busiest rank's."""
from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from memsim import simulate
from memsim.workload import model_config
from memsim.workload.builder import shard


@given(kv_heads=st.integers(1, 16), group=st.integers(1, 8), tp=st.integers(2, 64))
def test_a_ranks_share_covers_every_head_and_reads_its_kv_heads(kv_heads, group, tp):
    model = dataclasses.replace(model_config("llama-3.2-1b"), heads=kv_heads * group, kv_heads=kv_heads)
    rank = shard(model, tp)
    assert rank.heads == -(-model.heads // tp)  # the busiest rank's, rounded up
    assert rank.heads * tp >= model.heads and (rank.heads - 1) * tp < model.heads
    assert 1 <= rank.kv_heads <= max(1, -(-model.kv_heads // tp)) if model.kv_heads > tp else rank.kv_heads == 1
    assert rank.kv_heads * group >= rank.heads  # the KV heads its query heads read
    if model.heads % tp == 0 and (model.kv_heads % tp == 0 or model.kv_heads <= tp):  # an even split, as before
        assert rank.heads == model.heads // tp and rank.kv_heads == max(1, model.kv_heads // tp)


def test_a_model_whose_heads_do_not_divide_the_ranks_runs_as_its_busiest_rank():
    """Llama-3.2-3B's 24 heads over 16 chips: two heads on the busiest rank, as over 12 chips, so
    its attention is as much work as there (refused before: 24 heads do not split over 16)."""
    run = {tp: simulate("h100-sxm", "llama-3.2-3b", phase="decode", context=512, tp=tp, sensitivity=0)
           for tp in (12, 16)}
    assert dict(run[16].graph.ops["L0.attn"].dims)["heads"] == dict(run[12].graph.ops["L0.attn"].dims)["heads"] == 2
    assert run[16].graph.ops["L0.attn"].flops == run[12].graph.ops["L0.attn"].flops > 0
    assert run[16].summary.step_time_s > 0

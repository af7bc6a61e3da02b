"""A mixed step (a chunked-prefill scheduler's): decodes at their contexts beside prefill chunks."""
from __future__ import annotations

import pytest

from memsim.core.errors import ConfigError
from memsim.workload import build_step, model_config
from memsim.workload.builder import StepSpec

CFG = model_config("llama-3.1-8b")


def totals(g):
    return g.total_flops(), g.bytes_of("kv"), g.bytes_of("weight"), len(g.ops)


def test_one_segment_is_the_plain_step():
    decode = build_step(CFG, StepSpec.make("decode", batch=16, context=900))
    prefill = build_step(CFG, StepSpec.make("prefill", batch=1, prompt=300))
    assert totals(build_step(CFG, StepSpec.mixed(((16, 1, 900),)))) == totals(decode)
    assert totals(build_step(CFG, StepSpec.mixed(((1, 300, 0),)))) == totals(prefill)


def test_each_segment_attends_at_its_own_context_and_the_gemms_run_on_all_rows():
    g = build_step(CFG, StepSpec.mixed(((4, 1, 1000), (1, 200, 600))))
    attn = [op for op in g.ops.values() if op.kind == "attention" and op.layer == 0]
    assert [(op.dim("batch"), op.dim("q_len"), op.dim("kv_len")) for op in attn] == [(4, 1, 1001), (1, 200, 800)]
    qkv = g.ops["L0.qkv"]
    assert qkv.dim("m") == 4 + 200
    per_token = CFG.kv_heads * CFG.head_dim * 2 * 2  # K and V, bf16, one layer
    cache = sum(g.tensors[r.tensor].bytes for op in attn for r in op.inputs if g.tensors[r.tensor].klass == "kv")
    assert cache == per_token * (4 * 1000 + 600)  # every sequence's own cached tokens
    # the queries are split between the segments, not read twice
    assert sum(r.bytes for op in attn for r in op.inputs if r.tensor == "L0.q_rot") == pytest.approx(
        g.tensors["L0.q_rot"].bytes, abs=2)
    assert g.ops["lm_head"].dim("m") == 5  # each sequence's last position


def test_a_mixed_step_refuses_an_empty_segment():
    with pytest.raises(ConfigError, match="at least 1 sequence"):
        StepSpec.mixed(((0, 1, 10),))
    with pytest.raises(ConfigError):
        StepSpec.mixed(())

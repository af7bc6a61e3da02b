"""The vocabulary-parallel embedding: each tensor-parallel rank holds vocab/tp rows of the
table, looks up every token and the partial outputs are summed by an all-reduce."""
from __future__ import annotations

import pytest

from memsim import simulate
from memsim.workload import StepSpec, build_step, model_config
from memsim.workload.dtypes import nbytes


def decode(model: str, tp: int = 1, batch: int = 1, context: int = 16, **kw):
    return build_step(model_config(model), StepSpec.make("decode", batch=batch, context=context, tp=tp, **kw))


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt2-medium", "llama-3.2-1b"])
def test_each_rank_stores_an_eighth_of_the_table(model):
    m = model_config(model)
    one, eight = decode(model), decode(model, tp=8)
    table = eight.tensors["embed.weight"]
    assert table.shape == (-(-m.vocab // 8), m.hidden)
    assert table.bytes == nbytes(table.shape[0] * m.hidden, "bf16")
    assert table.bytes * 8 == pytest.approx(one.tensors["embed.weight"].bytes, abs=8 * m.hidden * 2)


def test_the_gather_reads_its_share_of_the_rows_and_is_all_reduced():
    m = model_config("llama-3.1-8b")
    g = decode("llama-3.1-8b", tp=8, batch=16)
    reads = {r.tensor: r.bytes for r in g.ops["embed"].inputs}
    rows_bytes = 16 * m.hidden * 2
    assert reads["embed.weight"] == rows_bytes // 8
    assert g.tensors["embed.partial"].shape == (16, m.hidden)  # every rank writes every row, masked
    order = [op.name for op in g.order()]
    assert order[:3] == ["embed", "embed.allreduce", "L0.attn_norm"]
    ar = g.ops["embed.allreduce"]
    assert ar.kind == "allreduce" and ar.dim("ranks") == 8 and ar.dim("bytes") == rows_bytes
    assert next(r.tensor for r in g.ops["L0.attn_norm"].inputs) == "embed.allreduce.out"


def test_learned_positions_stay_replicated_and_are_added_after_the_all_reduce():
    m = model_config("gpt2")
    g = decode("gpt2", tp=4, batch=2)
    assert g.tensors["embed.pos"].shape == (m.max_positions, m.hidden)
    pos = g.ops["embed.positions"]
    assert {r.tensor: r.bytes for r in pos.inputs} == {"embed.allreduce.out": 2 * m.hidden * 2,
                                                       "embed.pos": 2 * m.hidden * 2}
    assert pos.outputs == ("embed.out",)
    assert "embed.pos" not in {r.tensor for r in g.ops["embed"].inputs}


def test_tied_lm_head_reads_the_same_shard():
    g = decode("gpt2", tp=4)
    head = {r.tensor: r.bytes for r in g.ops["lm_head"].inputs}
    assert head["embed.weight"] == g.tensors["embed.weight"].bytes
    assert g.ops["lm_head"].dim("n") == g.tensors["embed.weight"].shape[0]


def test_weight_bytes_stored_per_rank_shrink_with_the_table():
    one = simulate("h100-sxm", "llama-3.1-8b", context=64).summary.weight_bytes_stored
    eight = simulate("h100-sxm", "llama-3.1-8b", context=64, tp=8).summary.weight_bytes_stored
    # Every weight but the 65 RMSNorm vectors (replicated) is split eight ways, the embedding too.
    norms = 65 * 4096 * 2
    assert eight == (one - norms) // 8 + norms


@pytest.mark.parametrize("model", ["gpt2", "bert-base", "llama-3.1-8b"])
def test_one_rank_gathers_every_table_in_one_op(model):
    """With one rank the embedding is as it always was (the golden runs pin the rest)."""
    m = model_config(model)
    phase = "prefill" if m.is_encoder else "decode"
    g = build_step(m, StepSpec.make(phase, batch=2, context=8, prompt=8))
    rows = 2 * (8 if m.is_encoder else 1)
    embed = g.ops["embed"]
    assert embed.outputs == ("embed.out",) and g.tensors["embed.weight"].shape == (m.vocab, m.hidden)
    tables = {"gpt2": 2, "bert": 3}.get(m.arch, 1)
    assert [r.bytes for r in embed.inputs[1:]] == [rows * m.hidden * 2] * tables
    assert not any(op.kind == "allreduce" for op in g) and "embed.positions" not in g.ops

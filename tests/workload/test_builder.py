"""The transformer DAG builder: weight and KV bytes, FLOP counts, graph shape, config errors."""
from __future__ import annotations

import dataclasses
import json
import warnings

import networkx as nx
import pytest

from memsim.core.errors import ConfigError, MemsimWarning
from memsim.workload import StepSpec, build_step, load_model, model_config
from memsim.workload.dtypes import nbytes

LLAMA2_7B_PARAMS = 6_738_415_616


def decode(model: str, batch: int = 1, context: int = 0, **kw):
    return build_step(model_config(model), StepSpec.make("decode", batch=batch, context=context, **kw))


def prefill(model: str, prompt: int, batch: int = 1, **kw):
    return build_step(model_config(model), StepSpec.make("prefill", batch=batch, prompt=prompt, **kw))


def weight_params(graph) -> int:
    return sum(_numel(t.shape) for t in graph.tensors.values() if t.klass == "weight")


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_model_configs_are_read():
    m = model_config("llama-3.1-8b")
    assert (m.arch, m.layers, m.hidden, m.heads, m.kv_heads, m.intermediate, m.vocab) == (
        "llama", 32, 4096, 32, 8, 14336, 128256)
    assert m.head_dim == 128 and not m.tie_embeddings and m.gated_mlp
    g = model_config("gpt2")  # GPT-2 style keys (n_embd, n_head, ...) and its defaults
    assert (g.arch, g.layers, g.hidden, g.heads, g.kv_heads, g.intermediate, g.max_positions) == (
        "gpt2", 12, 768, 12, 12, 3072, 1024)
    assert g.tie_embeddings and not g.gated_mlp
    assert model_config("bert-base").is_encoder


def test_llama2_7b_parameter_count():
    g = decode("llama-2-7b")
    assert weight_params(g) == LLAMA2_7B_PARAMS


@pytest.mark.parametrize(("dtype", "num", "den"), [("bf16", 2, 1), ("fp16", 2, 1), ("fp8", 1, 1), ("int8", 1, 1),
                                                   ("int4", 1, 2)])
def test_llama2_7b_weight_bytes_by_dtype(dtype, num, den):
    """--weight-dtype applies to projection weights (scales included); norms and the embedding stay bf16."""
    g = decode("llama-2-7b", weight_dtype=dtype)
    proj = [t for t in g.tensors.values() if t.klass == "weight" and len(t.shape) == 2 and t.name != "embed.weight"]
    rest = [t for t in g.tensors.values() if t.klass == "weight" and t not in proj]
    proj_params = sum(_numel(t.shape) for t in proj)
    assert proj_params + sum(_numel(t.shape) for t in rest) == LLAMA2_7B_PARAMS
    assert all(t.dtype == dtype for t in proj) and all(t.dtype == "bf16" for t in rest)
    scales = {"int8": 2 * sum(t.shape[1] for t in proj), "int4": 4 * proj_params // 128}.get(dtype, 0)
    assert sum(t.bytes for t in proj) == proj_params * num // den + scales
    assert sum(t.bytes for t in rest) == 2 * sum(_numel(t.shape) for t in rest)


def test_int4_group_size_sets_the_scale_bytes():
    g32 = decode("llama-2-7b", weight_dtype="int4", group_size=32).bytes_of("weight")
    g128 = decode("llama-2-7b", weight_dtype="int4").bytes_of("weight")
    proj_params = 6_738_415_616 - 2 * 32000 * 4096 - 4096 * 65  # minus embeddings, lm_head and norms
    assert g32 - g128 == pytest.approx(4 * (proj_params + 32000 * 4096) * (1 / 32 - 1 / 128), rel=1e-6)


def test_weight_bytes_do_not_depend_on_batch_or_context():
    assert decode("gpt2", batch=1, context=0).bytes_of("weight") == decode("gpt2", batch=8, context=500).bytes_of(
        "weight") == prefill("gpt2", prompt=100, batch=3).bytes_of("weight")


@pytest.mark.parametrize(("batch", "context"), [(1, 0), (1, 1), (2, 100), (4, 2048)])
def test_llama2_kv_bytes_for_decode(batch, context):
    m = model_config("llama-2-7b")
    g = decode("llama-2-7b", batch=batch, context=context)
    per_token = m.layers * 2 * m.kv_heads * m.head_dim * 2  # K and V, bf16
    assert g.bytes_of("kv") == per_token * batch * (context + 1)  # cache plus the appended token
    cache = [t for t in g.tensors.values() if t.name.endswith(("k_cache", "v_cache"))]
    assert sum(t.bytes for t in cache) == per_token * batch * context
    assert len(cache) == (2 * m.layers if context else 0)


def test_kv_dtype_scales_kv_bytes_only():
    bf16 = decode("llama-2-7b", batch=2, context=64)
    int8 = decode("llama-2-7b", batch=2, context=64, kv_dtype="int8")
    int4 = decode("llama-2-7b", batch=2, context=64, kv_dtype="int4")
    assert int8.bytes_of("kv") * 2 == bf16.bytes_of("kv") == int4.bytes_of("kv") * 4
    assert int8.bytes_of("weight") == bf16.bytes_of("weight")


def test_attention_reads_the_whole_cache():
    m = model_config("llama-2-7b")
    g = decode("llama-2-7b", batch=3, context=50)
    op = g.ops["L5.attn"]
    reads = {r.tensor: r.bytes for r in op.inputs}
    assert reads["L5.attn.k_cache"] == reads["L5.attn.v_cache"] == 3 * m.kv_heads * 50 * m.head_dim * 2
    assert set(op.outputs) == {"L5.attn.out", "L5.attn.k_new", "L5.attn.v_new"}
    assert g.tensors["L5.attn.k_new"].bytes == 3 * m.kv_heads * 1 * m.head_dim * 2


def test_llama31_grouped_query_attention_kv_is_a_quarter():
    m = model_config("llama-3.1-8b")
    assert m.kv_heads == 8 and m.heads == 32
    step = StepSpec.make("decode", batch=2, context=1000)
    gqa = build_step(m, step)
    mha = build_step(dataclasses.replace(m, kv_heads=m.heads), step)
    assert gqa.bytes_of("kv") * 4 == mha.bytes_of("kv")
    assert gqa.bytes_of("kv") == m.layers * 2 * 2 * 1001 * 8 * 128 * 2
    # The K and V projections shrink with the KV heads too.
    assert gqa.tensors["L0.qkv.weight"].shape == (4096, 4096 + 2 * 8 * 128)
    assert gqa.ops["L0.attn"].dim("kv_heads") == 8 and gqa.ops["L0.attn"].dim("heads") == 32


@pytest.mark.parametrize("graph_fn", [
    lambda: decode("llama-2-7b", batch=2, context=10),
    lambda: prefill("gpt2", prompt=33, batch=2),
    lambda: prefill("bert-base", prompt=16),
    lambda: decode("llama-3.1-8b", context=7),
])
def test_matmul_flops_are_2mnk_and_dims_match_tensors(graph_fn):
    g = graph_fn()
    matmuls = [op for op in g if op.kind == "matmul"]
    assert matmuls
    for op in matmuls:
        m, n, k = op.dim("m"), op.dim("n"), op.dim("k")
        assert op.flops == 2 * m * n * k, op.name
        x = g.tensors[op.inputs[0].tensor]
        assert x.shape == (m, k), op.name
        w = g.tensors[op.inputs[1].tensor]
        assert w.klass == "weight" and _numel(w.shape) == n * k, op.name
        assert sum(g.tensors[o].shape[-1] for o in op.outputs) == n, op.name
        assert all(g.tensors[o].shape[0] == m for o in op.outputs), op.name


def test_decode_flops_are_about_twice_the_parameters():
    g = decode("llama-2-7b", batch=1, context=128)
    ratio = g.total_flops() / (2 * LLAMA2_7B_PARAMS)
    assert 0.98 <= ratio <= 1.02, ratio


def test_decode_flops_scale_with_batch():
    one = decode("llama-2-7b", batch=1, context=128)
    four = decode("llama-2-7b", batch=4, context=128)
    mm = lambda g: sum(op.flops for op in g if op.kind == "matmul")
    assert mm(four) == 4 * mm(one)


@pytest.mark.parametrize("prompt", [1, 2, 64, 100])
def test_prefill_attention_flops_are_causal(prompt):
    m = model_config("gpt2")
    g = prefill("gpt2", prompt=prompt, batch=2)
    op = g.ops["L0.attn"]
    full = 4 * 2 * m.heads * prompt * prompt * m.head_dim
    causal_pairs = prompt * (prompt + 1) // 2
    assert op.flops == 4 * 2 * m.heads * causal_pairs * m.head_dim
    assert op.dim("causal") == 1 and op.dim("pairs") == causal_pairs
    if prompt >= 64:
        assert 0.5 <= op.flops / full <= 0.52


def test_decode_attention_covers_cache_and_new_token():
    m = model_config("gpt2")
    g = decode("gpt2", batch=3, context=40)
    op = g.ops["L0.attn"]
    assert op.dim("kv_len") == 41 and op.dim("q_len") == 1
    assert op.flops == 4 * 3 * m.heads * 41 * m.head_dim


def test_encoder_attention_is_not_causal():
    m = model_config("bert-base")
    g = prefill("bert-base", prompt=64)
    op = g.ops["L0.attn"]
    assert op.dim("causal") == 0
    assert op.flops == 4 * 1 * m.heads * 64 * 64 * m.head_dim
    assert g.bytes_of("kv") == 0  # an encoder keeps no cache
    assert "lm_head" not in g.ops


def test_gpt2_ties_embeddings_and_learns_positions():
    m = model_config("gpt2")
    g = decode("gpt2", batch=2, context=10)
    names = set(g.tensors)
    assert "lm_head.weight" not in names
    assert g.tensors["embed.pos"].shape == (m.max_positions, m.hidden)
    assert g.tensors["embed.pos"].klass == "weight"
    head = g.ops["lm_head"]
    assert [r.tensor for r in head.inputs][1] == "embed.weight"
    assert head.flops == 2 * 2 * m.vocab * m.hidden
    # The embedding gathers only the rows it needs from both tables.
    reads = {r.tensor: r.bytes for r in g.ops["embed"].inputs}
    assert reads["embed.weight"] == reads["embed.pos"] == 2 * m.hidden * 2
    # One vocab x hidden table, not two.
    untied = build_step(dataclasses.replace(m, tie_embeddings=False), StepSpec.make("decode", batch=2, context=10))
    assert untied.bytes_of("weight") - g.bytes_of("weight") == m.vocab * m.hidden * 2


def test_llama_has_no_learned_positions_and_untied_head():
    g = decode("llama-2-7b")
    assert "embed.pos" not in g.tensors
    assert g.tensors["lm_head.weight"].shape == (4096, 32000)
    assert "L0.rope" in g.ops and g.ops["L0.attn_norm"].kind == "norm"
    assert "L0.attn_norm.bias" not in g.tensors  # RMSNorm has no bias


def test_prefill_logits_only_for_the_last_position():
    m = model_config("gpt2")
    g = prefill("gpt2", prompt=50, batch=3)
    assert g.tensors["logits"].shape == (3, m.vocab)
    assert g.ops["lm_head"].dim("m") == 3
    assert g.ops["L0.qkv"].dim("m") == 150


def test_bert_decode_is_refused():
    with pytest.raises(ConfigError) as info:
        decode("bert-base", context=10)
    assert "encoder" in str(info.value)


def test_context_beyond_the_models_positions_runs_with_a_warning():
    with pytest.warns(MemsimWarning, match="1025 tokens exceed gpt2's 1024 positions"):
        decode("gpt2", context=1024)  # 1024 cached + 1 new > 1024 positions
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decode("gpt2", context=1023)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"phase": "train"}, "phase"),  # a Python caller is told the keyword; the command line, the flag
    ({"phase": "decode", "batch": 0}, "batch"),
    ({"phase": "decode", "context": -1}, "context"),
    ({"phase": "prefill", "prompt": 0}, "prompt"),
    ({"phase": "decode", "weight_dtype": "fp4"}, "weight_dtype"),
    ({"phase": "decode", "kv_dtype": "fp64"}, "kv_dtype"),
])
def test_bad_step_specs_are_refused(kwargs, field):
    with pytest.raises(ConfigError) as info:
        StepSpec.make(**kwargs)
    assert info.value.field == field


@pytest.mark.parametrize("graph_fn", [
    lambda: decode("gpt2", batch=2, context=10),
    lambda: prefill("gpt2", prompt=16),
    lambda: prefill("bert-base", prompt=16),
    lambda: decode("llama-3.1-8b", context=3),
])
def test_graph_is_a_dag_and_order_is_topological(graph_fn):
    g = graph_fn()
    g.validate()
    dag = g.graph()
    assert nx.is_directed_acyclic_graph(dag)
    order = g.order()
    assert sorted(op.name for op in order) == sorted(g.ops)
    position = {op.name: i for i, op in enumerate(order)}
    producers = g.producers()
    for op in order:
        for r in op.inputs:
            assert r.tensor in g.tensors
            if r.tensor in producers:
                assert position[producers[r.tensor]] < position[op.name], (op.name, r.tensor)
    for a, b in dag.edges:
        assert position[a] < position[b]
    # Every tensor is written by at most one op.
    outputs = [t for op in g for t in op.outputs]
    assert len(outputs) == len(set(outputs))


def test_graph_is_connected_from_embedding_to_logits():
    g = decode("gpt2", context=5)
    dag = g.graph()
    assert nx.has_path(dag, "embed", "lm_head")
    assert nx.has_path(dag, "L0.attn", "L11.mlp_add")
    assert g.order()[0].name == "embed" and g.order()[-1].name == "lm_head"


def test_layer_count_and_meta():
    g = decode("gpt2", batch=2, context=7)
    assert {op.layer for op in g} == set(range(-1, 12))
    assert g.meta.model == "gpt2" and g.meta.phase == "decode"
    assert g.meta.batch == 2 and g.meta.context == 7 and g.meta.tokens == 1


def test_tensor_bytes_match_shape_and_dtype():
    g = decode("llama-2-7b", context=3, weight_dtype="fp8", kv_dtype="fp8")
    for t in g.tensors.values():
        assert t.bytes == nbytes(_numel(t.shape), t.dtype), t.name


def _write_model(tmp_path, **fields):
    raw = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 1000}
    raw.update(fields)
    raw = {k: v for k, v in raw.items() if v is not ...}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(raw))
    return path


def test_tiny_model_json_loads(tmp_path):
    m = load_model(_write_model(tmp_path))
    assert (m.name, m.hidden, m.heads, m.kv_heads, m.layers, m.max_positions) == ("tiny", 256, 4, 4, 2, 2048)
    assert model_config(str(_write_model(tmp_path))) == m


@pytest.mark.parametrize(("fields", "field"), [
    ({"hidden_size": ...}, "hidden_size"),
    ({"num_attention_heads": 4.5}, "num_attention_heads"),
    ({"num_attention_heads": "4"}, "num_attention_heads"),
    ({"num_attention_heads": True}, "num_attention_heads"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"num_attention_heads": 3}, "num_attention_heads"),  # 256 not divisible by 3
    ({"num_key_value_heads": 3}, "num_key_value_heads"),  # 4 heads not divisible into 3 groups
    ({"num_hidden_layers": -2}, "num_hidden_layers"),
    ({"vocab_size": ...}, "vocab_size"),
    ({"model_type": "mamba"}, "model_type"),
])
def test_bad_model_json_names_file_and_field(tmp_path, fields, field):
    path = _write_model(tmp_path, **fields)
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert info.value.field == field
    assert info.value.file == str(path)
    assert str(path) in str(info.value) and field in str(info.value)


def test_invalid_json_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"model_type": "llama",')
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert str(path) in str(info.value)
    with pytest.raises(ConfigError):
        load_model(tmp_path / "absent.json")
    with pytest.raises(ConfigError):
        model_config("no-such-model")


def test_a_verify_step_is_k_plus_1_tokens_on_the_cache_with_logits_at_each(tiny_model_path):
    """Speculative decoding's verify step: K+1 = 5 tokens per sequence on a cache of 32: its
    attention reads the cache once and attends causally among the new tokens, it appends 5
    tokens of KV and computes logits at all 5 positions, not only the last."""
    m = load_model(tiny_model_path)
    one = build_step(m, StepSpec.make("decode", batch=2, context=32))
    five = build_step(m, StepSpec.make("decode", batch=2, context=32, tokens=5))
    hd, kvh = m.head_dim, m.kv_heads
    assert (five.meta.tokens, five.meta.context) == (5, 32)
    attn = five.ops["L0.attn"]
    assert (attn.dim("q_len"), attn.dim("kv_len"), attn.dim("pairs")) == (5, 37, 5 * 32 + 5 * 6 // 2)
    assert attn.flops == 4 * 2 * m.heads * (5 * 32 + 15) * hd
    assert five.tensors["L0.attn.k_cache"].bytes == one.tensors["L0.attn.k_cache"].bytes == nbytes(2 * kvh * 32 * hd,
                                                                                                       "bf16")
    assert five.tensors["L0.attn.k_new"].bytes == 5 * one.tensors["L0.attn.k_new"].bytes == nbytes(2 * kvh * 5 * hd,
                                                                                                       "bf16")
    kv_read = lambda g: sum(r.bytes for op in g for r in op.inputs if g.tensors[r.tensor].klass == "kv")
    assert kv_read(five) == kv_read(one)  # the cache is read once for the 5 tokens
    assert "take_last" not in five.ops and five.tensors["logits"].shape == (2 * 5, m.vocab)
    assert five.ops["lm_head"].dim("m") == 10
    # Every projection, the LM head included, does 5 rows' work; the weights are the same.
    matmul = lambda g: sum(op.flops for op in g if op.kind == "matmul")
    assert matmul(five) == 5 * matmul(one)
    assert five.bytes_of("weight") == one.bytes_of("weight")
    # A prefill of several tokens still takes logits at its last position only.
    assert "take_last" in build_step(m, StepSpec.make("prefill", batch=2, prompt=5)).ops
    with pytest.raises(ConfigError) as info:
        StepSpec.make("decode", context=32, tokens=0)
    assert info.value.field == "draft_k"

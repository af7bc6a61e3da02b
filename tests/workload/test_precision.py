"""Precision recipes (a weight format per tensor class) and block floating-point formats, their bytes exact."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import simulate
from memsim.core.errors import ConfigError
from memsim.workload import build_step, model_config
from memsim.workload.dtypes import recipe, weight_storage_bytes
from memsim.workload.step import StepSpec


@given(st.integers(1, 4096), st.integers(1, 4096))
def test_a_block_format_stores_its_bits_and_one_exponent_byte_a_block_of_sixteen(k, n):
    numel = k * n
    assert weight_storage_bytes((k, n), "bfp8", 128) == numel + -(-numel // 16)  # 8.5 bits a weight
    assert weight_storage_bytes((k, n), "bfp4", 128) == -(-numel // 2) + -(-numel // 16)  # 4.5 bits


def test_a_recipe_stores_each_class_of_weights_in_its_format():
    step = StepSpec.make("decode", context=64, precision="mlp=bfp4,attention=bfp8,lm_head=bf16")
    g = build_step(model_config("llama-3.2-1b"), step)
    assert g.tensors["L0.gate_up.weight"].dtype == "bfp4" and g.tensors["L0.down.weight"].dtype == "bfp4"
    assert g.tensors["L0.qkv.weight"].dtype == "bfp8" and g.tensors["L0.o_proj.weight"].dtype == "bfp8"
    plain = build_step(model_config("llama-3.2-1b"), StepSpec.make("decode", context=64))
    assert plain.tensors["L0.qkv.weight"].dtype == "bf16"
    shape = g.tensors["L0.gate_up.weight"].shape
    assert g.tensors["L0.gate_up.weight"].bytes == weight_storage_bytes(shape, "bfp4", 128)


def test_a_bad_recipe_is_one_line_naming_the_option():
    with pytest.raises(ValueError, match="attn=fp8"):
        recipe("attn=fp8")
    with pytest.raises(ValueError, match="twice"):
        recipe("mlp=int4,mlp=fp8")
    with pytest.raises(ConfigError) as info:
        simulate("h100-sxm", "gpt2", context=16, precision="mlp=int3")
    assert info.value.field == "precision"


def test_fewer_bytes_a_weight_never_make_a_memory_bound_decode_slower_on_a_chip_that_multiplies_them():
    """On a Wormhole, whose matrix engine takes bfloat8_b and bfloat4_b tiles directly."""
    times = [simulate("wormhole-n150", "llama-3.2-1b", context=512, sensitivity=0, precision=r).summary.step_time_s
             for r in ("mlp=bf16,attention=bf16", "mlp=bfp8,attention=bfp8", "mlp=bfp4,attention=bfp8")]
    assert times[0] > times[1] > times[2]

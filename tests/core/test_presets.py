"""Every shipped hardware preset runs a Llama-3.1-8B decode step, with its weights and KV cache
in the memory that should hold them, and never faster than its roofline."""
from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memsim import hardware, simulate
from memsim.core.errors import CapacityError, MemsimWarning
from tests.conftest import SPILL

# Options a chip needs for Llama-3.1-8B (16.1 GB of bf16 weights and KV cache at context 512).
# Every other preset holds it in bf16 on one chip.
OPTIONS: dict[str, dict[str, object]] = {
    # 12 GiB of GDDR6: int8 projections (8.6 GB with the bf16 embedding) fit, bf16 does not.
    "wormhole-n150": {"weight_dtype": "int8"},
    # The Galaxy's own chips: the same ASIC, its bf16 weights over its 32 chips (tt-metal's deployment).
    "wormhole-galaxy": {"tp": 32},
    # 230 MB of SRAM and no DRAM: int8 weights over 64 chips, 8 layers a stage, 1/16 of each on a
    # chip (109 MB) and, on the first stage, 1/16 of the embedding (66 MB). With stages cut by
    # bytes, 8 x 5 = 40 chips is the smallest grid that fits at context 512; 16 x 4 leaves room.
    "groq-lpu": {"weight_dtype": "int8", "tp": 16, "pp": 4},
}


def _home_level(chip: hardware.ChipSpec, homes: dict[str, str], classes: dict[str, str]) -> str:
    """The one level every weight and KV tensor lives in (the test fails if there are several)."""
    used = {homes[name] for name, klass in classes.items() if klass in ("weight", "kv")}
    assert len(used) == 1, used
    return used.pop()


@pytest.mark.parametrize("preset", hardware.presets())
def test_every_preset_runs_a_llama_3_1_8b_decode_step(preset):
    options = OPTIONS.get(preset, {})
    r = simulate(preset, "llama-3.1-8b", context=512, **options)
    s = r.summary
    assert s.step_time_s > 0
    assert s.step_over_roofline >= 1
    assert s.chips == int(options.get("tp", 1)) * int(options.get("pp", 1))
    assert s.clock == 1 and "power" not in s.stall_s  # a decode runs well under every chip's cap
    # Everything persistent sits in the first level that can hold weights; no level past it (host
    # DDR over PCIe, MemoryX, an RDU's staging DDR) moves a byte.
    chip = r.chip
    home = _home_level(chip, dict(r.plan.homes), {t.name: t.klass for t in r.graph.tensors.values()})
    names = [lvl.name for lvl in chip.levels]
    assert home == next(lvl.name for lvl in chip.levels if lvl.home_for("weight"))
    for later in names[names.index(home) + 1:]:
        assert s.bytes_per_level[later].total == 0, later


def test_groq_lpu_needs_many_chips_for_an_8b_model():
    """Stages cut by bytes: 8 x 5 LPUs hold int8 Llama-3.1-8B at context 512; on 8 x 4 the first
    stage needs 0.27 GB of 230 MB."""
    with pytest.raises(CapacityError) as info:
        simulate("groq-lpu", "llama-3.1-8b", context=512, weight_dtype="int8", tp=8, pp=4)
    assert "pipeline stage" in str(info.value)
    r = simulate("groq-lpu", "llama-3.1-8b", context=512, weight_dtype="int8", tp=8, pp=5)
    assert set(dict(r.plan.homes).values()) == {"sram"}


def test_groq_lpu_runs_llama_2_70b_on_576_chips():
    """Groq's reported deployment of a 70B model: 576 LPUs, each holding a slice of the layers.
    8-way tensor parallelism over 72 pipeline stages: cut by layer count, the first stage held 2
    layers and 1/8 of the bf16 embedding (280 MB of 230 MB); cut by bytes, the embedding and the
    LM head share stages with one layer each, and no stage holds more than 2 layers (216 MB)."""
    r = simulate("groq-lpu", "llama-2-70b", weight_dtype="int8", context=2048, tp=8, pp=72)
    s = r.summary
    assert s.chips == 576 and (s.grid.tp, s.grid.pp) == (8, 72)
    assert set(dict(r.plan.homes).values()) == {"sram"}
    assert s.step_time_s > 0 and s.step_over_roofline >= 1
    per_chip: dict[int, set[int]] = {}
    for task in r.plan.tasks:
        if task.layer >= 0:
            per_chip.setdefault(task.chip, set()).add(task.layer)
    assert sorted(per_chip) == [8 * stage for stage in range(72)]  # each stage's first rank
    assert {len(layers) for layers in per_chip.values()} == {1, 2}
    assert s.embedding_placement == {"embedding": "with layers", "lm_head": "with layers"}


# GPU-family presets without an L2-kind level or a host memory level, and why. Every other one
# has both: a level of kind `l2` (activations stay on chip between kernels) and host memory
# reached over a link (`via`), which a model that overflows device memory is offloaded to.
NO_L2 = {
    "gb10": "L2 size not collected (hardware.csv: 'not collected')",
    "m2-ultra": "the system-level cache size is not collected (hardware.csv: 'not collected')",
    "tpu-v4": "no hardware-managed cache: VMEM is a software-managed scratchpad (CMEM not verified)",
    "tpu-v5e": "no hardware-managed cache: VMEM is a software-managed scratchpad",
    "wormhole-n150": "no cache: each Tensix core's L1 SRAM is software-managed, DRAM is reached over the NoC",
    "wormhole-galaxy": "as wormhole-n150: the same ASIC",
}
UNIFIED_MEMORY = {  # the host's memory is the chip's main memory: there is no further level
    "gb10": "unified LPDDR5X shared with the Grace CPU (hardware.csv 'LPDDR5X unified')",
    "m2-ultra": "unified LPDDR5 shared with the CPU (hardware.csv 'LPDDR5 unified')",
}


@pytest.mark.parametrize("preset", [p for p in hardware.presets() if hardware.load(p).family == "gpu"])
def test_every_gpu_preset_has_an_l2_and_host_memory(preset):
    chip = hardware.load(preset)
    kinds = [lvl.kind for lvl in chip.levels]
    assert ("l2" in kinds) != (preset in NO_L2), preset
    host = [lvl for lvl in chip.levels if lvl.via and lvl.home_for("weight")]
    if preset in UNIFIED_MEMORY:
        assert not host and chip.levels[-1].kind == "lpddr"
    else:
        assert len(host) == 1 and host[0] is chip.levels[-1], preset
        assert chip.link(host[0].via) is not None


def _llama_2_7b_step_s(preset: str, **options) -> float:
    """Decode step time, or infinity where the model and KV cache fit in no memory level."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", MemsimWarning)
            s = simulate(preset, "llama-2-7b", phase="decode", **options).summary
    except CapacityError:
        return math.inf
    # a run says so exactly where it spills to host memory (a large batch's KV cache past HBM), and
    # where its context runs past the model's positions; of nothing else
    said = [str(w.message) for w in caught]
    spilled = "ddr" in s.bytes_per_level and s.bytes_per_level["ddr"].total > 0
    assert sum(line.startswith(SPILL) for line in said) == spilled, said
    assert all(line.startswith(SPILL) or "positions" in line for line in said), said
    return s.step_time_s


# Each generation has at least its predecessor's levels, bandwidths and compute, so on the same
# work it is never slower. Before every preset had its L2 and host memory, H200 was slower than
# H100 at tp 8 (activations went to HBM instead of L2) and failed where H100 offloaded to host DDR.
# Not its latencies: the B200's NVLink hop is read from runtime.csv row 424 (0.8 us against the
# H200's 0.5 us: the same NCCL 2.27.7 and script take 8 us more a small all-reduce on the B200), so
# across chips the B200 is compared at the H200's hop latency, the one thing it does not have more of.
H200_HOP = {"nvlink.latency": "0.5 us"}
@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(weight_dtype=st.sampled_from(["bf16", "fp8", "int8", "int4"]), batch=st.integers(1, 256),
       context=st.integers(128, 32768), tp=st.sampled_from([1, 2, 8]))
@example(weight_dtype="bf16", batch=1, context=128, tp=8)
@example(weight_dtype="fp8", batch=16, context=128, tp=8)
@example(weight_dtype="bf16", batch=64, context=8192, tp=1)  # offloads: beyond HBM on H100 and H200
@example(weight_dtype="bf16", batch=256, context=32768, tp=8)
def test_newer_nvidia_chips_are_never_slower_on_llama_2_7b_decode(weight_dtype, batch, context, tp):
    options = dict(weight_dtype=weight_dtype, batch=batch, context=context, tp=tp)
    h100, h200 = (_llama_2_7b_step_s(p, **options) for p in ("h100-sxm", "h200-sxm"))
    b200 = _llama_2_7b_step_s("b200", **options, set=H200_HOP)
    assert h200 <= h100 and b200 <= h200, (h100, h200, b200)
    if tp == 1:  # one chip crosses no NVLink hop: the B200 as it is
        assert _llama_2_7b_step_s("b200", **options) == b200

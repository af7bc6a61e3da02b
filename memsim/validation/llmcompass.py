"""LLMCompass's own validation case as a memsim run: one GPT-3 175B layer on four A100s.

LLMCompass (Zhang et al., ISCA 2024) validates its simulator on one GPT-3 175B decoder layer
at tensor parallelism 4 and batch 8, fp16: the prefill of 2048 tokens and a decode step at KV
3072, each of twelve operators timed alone in PyTorch on real A100s
(``data/llmcompass_gpt3_layer.csv``). memsim runs the same layer
(``configs/models/gpt-3-175b-layer.json``) on the ``ideal`` stack as that measurement ran it (``AS_MEASURED``): the
GEMMs at cuBLAS's own rate (``kernel_efficiency`` 1, as the microbenchmark rows run), the
attention as PyTorch's separate matmuls and softmax (``unfused``), the all-reduces as NCCL's
ring, and each timed call's host overhead added to its kernels (``HARNESS_S``). Each measured
operator is matched with memsim's
operators of that work (``OPERATORS``); the residual adds, which LLMCompass's layer leaves out,
are not counted. An operator's memsim time is its span on the first rank's chip.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsim.run import api

DATA = Path(__file__).resolve().parent / "data" / "llmcompass_gpt3_layer.csv"
HW, MODEL = "a100-80gb-sxm", "gpt-3-175b-layer"
RUN: dict[str, Any] = dict(batch=8, tp=4, weight_dtype="fp16", kv_dtype="fp16", stack="ideal")
PHASES: dict[str, dict[str, Any]] = {"prefill": dict(phase="prefill", prompt=2048),
                                     "decode": dict(phase="decode", context=2048 + 1024)}
AS_MEASURED = {"compute.kernel_efficiency": "1", "stack.kernels.attention": "unfused",
               "execution.op_overhead": "0 us", "system.collective": "ring"}
# The harness: each operator is timed alone, the host's clock read around the call and a
# torch.cuda.synchronize() (the median of its iterations). So each time carries, serial with the
# kernel, the host's dispatch, the kernel's launch and the synchronize's return: memsim runs the
# kernels without a launch cost (AS_MEASURED) and adds that overhead per call. LLMCompass measured
# it on the same A100s with the same harness around each kind of call on 1-element tensors (its
# ``gpu_kernel_launch_overhead()``), and adds it to its own simulated kernels:
# hardware_model/compute_module.py, overhead_dict["A100"], at the commit the data come from.
# LayerNorm and GeLU are torch.compile'd functions, whose framework overhead microbench.csv row 72
# measures at 44.3 us for an empty kernel (GB200, Inductor).
HARNESS_S = {"matmul": 21e-6, "softmax": 12e-6, "layernorm": 45e-6, "gelu": 45e-6}
# The call each measured operator makes (the all-reduces are not timed by this harness).
CALLS = {"Q_K_V": "matmul", "Q_mul_K": "matmul", "A_mul_V": "matmul", "Softmax": "softmax", "Wo_proj": "matmul",
         "W1_proj": "matmul", "W2_proj": "matmul", "LayerNorm_MHA": "layernorm", "LayerNorm_FFN": "layernorm",
         "GeLU": "gelu"}
# Measured operator -> memsim's operators of layer 0 (the attention's matmuls and softmax are one operator).
OPERATORS = {"Q_K_V": ("qkv",), "Q_mul_K+A_mul_V+Softmax": ("attn",), "Wo_proj": ("o_proj",), "W1_proj": ("fc",),
             "W2_proj": ("down",), "LayerNorm_MHA": ("attn_norm",), "LayerNorm_FFN": ("mlp_norm",), "GeLU": ("act",),
             "AllReduce_MHA": ("attn_allreduce",), "AllReduce_FFN": ("mlp_allreduce",)}
LLMCOMPASS_ERROR = {"prefill": -0.021, "decode": -0.124}  # its own, as issue 23 quotes its paper


@dataclass(frozen=True)
class Row:
    phase: str
    operator: str  # a measured operator, or several whose work memsim runs as one
    measured_s: float
    memsim_s: float

    @property
    def error(self) -> float:
        return self.memsim_s / self.measured_s - 1


def measured(path: Path = DATA) -> dict[tuple[str, str], float]:
    with path.open(newline="") as fh:
        return {(r["phase"], r["operator"]): float(r["seconds"]) for r in csv.DictReader(fh)}


def rows(path: Path = DATA) -> list[Row]:
    """Every measured operator (merged as ``OPERATORS`` merges them) beside memsim's time for it."""
    real = measured(path)
    out = []
    for phase, options in PHASES.items():
        timeline = api.simulate(HW, MODEL, **RUN, **options, set=AS_MEASURED).timeline
        mine = timeline[(timeline.chip == "chip0") & (timeline.layer == 0)]
        spans = mine.groupby("op").apply(lambda d: d.end_s.max() - d.start_s.min(), include_groups=False)
        for operator, ops in OPERATORS.items():
            names = operator.split("+")
            harness = sum(HARNESS_S[CALLS[name]] for name in names if name in CALLS)
            seconds = sum(real[(phase, name)] for name in names)
            out.append(Row(phase, operator, seconds, harness + float(sum(spans[f"L0.{op}"] for op in ops))))
    return out


def totals(r: list[Row]) -> dict[str, Row]:
    """Per phase, the layer: every operator's time summed, as LLMCompass sums them."""
    return {p: Row(p, "layer", sum(x.measured_s for x in r if x.phase == p), sum(x.memsim_s for x in r if x.phase == p))
            for p in PHASES}

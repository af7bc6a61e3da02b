"""How each family's real machines run: the execution values a chip leaves out.

A chip in YAML or in Python may leave these ``ExecutionSpec`` fields unset; ``ChipSpec`` fills
them in from its family's values here, over what every family shares (``BY_FAMILY``), so a chip
built in Python runs as the same chip loaded from YAML.
"""
from __future__ import annotations

from typing import Any

# What every family shares, and each family's own values over it.
BY_FAMILY: dict[str, Any] = {"streams": ("compute", "copy", "comm"), "weight_prefetch": 0, "pipeline": "none",
                             "pipeline_chunks": 1, "comm_overlap": 1, "collective_launch": "kernel"}
FAMILY_EXECUTION: dict[str, dict[str, Any]] = {
    # CUDA/HIP streams with copy engines and a collective stream; kernels see weights in HBM.
    # Serving stacks (vLLM, TensorRT-LLM) run a tensor-parallel all-reduce after its GEMM;
    # overlapping them (Megatron/TransformerEngine userbuffers, Flux, T3) is an opt-in.
    "gpu": {"streams": ["compute", "copy", "comm"], "weight_prefetch": 0, "pipeline": "none", "comm_overlap": 1,
            "collective_launch": "kernel"},
    # Framework CPU kernels: one op at a time, no separate copy or communication engine.
    "cpu": {"streams": ["compute"], "weight_prefetch": 0, "pipeline": "none", "comm_overlap": 1,
            "collective_launch": "kernel"},
    # Dataflow RDU / LPU: the next operators' weights stream in while the current ones compute,
    # and the compiler schedules a GEMM's output out over the chip network as it is produced.
    # No family runs a ``branch`` stream by default: frameworks issue a parallel block's attention
    # and MLP one after the other, and on one chip the two share its compute units and memory
    # (measured: GPT-J on sn40l and h100-sxm gains at most 5%, and a prefill can lose).
    # A collective is part of the fused kernel that computes its input: it pays no launch.
    "rdu": {"streams": ["compute", "copy", "comm"], "weight_prefetch": 2, "pipeline": "none", "comm_overlap": 4,
            "collective_launch": "fused"},
    # Wafer: layers are regions that run as a pipeline; a prefill flows through it in chunks.
    # Its parallelism is the pipeline of regions, not tensor-parallel collectives.
    "wafer": {"streams": ["compute", "copy", "comm"], "weight_prefetch": 2, "pipeline": "layers",
              "pipeline_chunks": 32, "comm_overlap": 1, "collective_launch": "fused"},
}


def family_values(family: object) -> dict[str, Any]:
    """The execution values of ``family`` (one not known: what every family shares), lists as tuples."""
    values = {**BY_FAMILY, **(FAMILY_EXECUTION.get(family, {}) if isinstance(family, str) else {})}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}

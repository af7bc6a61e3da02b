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


# A hardware file that leaves out an efficiency takes its family's value, written as an estimate with
# its range, never the ideal 1.0: the value the family's presets without a measured row of their own
# carry (docs/validation.md, Calibration). (value, low, high, source)
COMPUTE_EFFICIENCY: dict[str, tuple[float, float, float, str]] = {
    "gpu": (0.75, 0.6, 0.87, "mean of the NVIDIA GEMM rows 1-3, 7-9 of microbench.csv; range: their spread, lower "
                             "for a small part (as gb10)"),
    "rdu": (0.7, 0.5, 0.9, "as sn40l and groq-lpu; range: the GEMM rows' spread over chips (microbench.csv rows "
                           "1-14: 0.51 MI300X to 0.87 A100)"),
    "wafer": (0.7, 0.4, 0.9, "as wse-3; range: below the GPU GEMM rows (a core's SIMD fed from its own SRAM) to the "
                             "best of them"),
    "cpu": (0.5, 0.3, 0.8, "as xeon-gold-6242: framework GEMMs reach about half of AVX-512 peak; range: small "
                           "threaded GEMMs to large MKL GEMMs"),
}
# Of a device memory's bandwidth (a level of kind hbm, gddr, lpddr or ddr not reached over a link).
MEMORY_EFFICIENCY: dict[str, tuple[float, float, float, str]] = {
    "gpu": (0.8, 0.65, 0.92, "as tpu-v4 and sn40l; range: the HBM Triad rows' spread (microbench.csv rows 33, 35, "
                             "37, 39: 0.77 to 0.89) widened"),
    "cpu": (0.7, 0.6, 0.85, "as xeon-gold-6242: STREAM reaches about 70% of theoretical on Cascade Lake (60-85%)"),
}
MEMORY_EFFICIENCY["rdu"] = MEMORY_EFFICIENCY["wafer"] = MEMORY_EFFICIENCY["gpu"]
DEVICE_MEMORY_KINDS = ("hbm", "gddr", "lpddr", "ddr")


def efficiency_defaults(raw: object) -> dict[str, tuple[float, float, float, str]]:
    """The efficiencies a chip's raw mapping leaves out that its family fills in, by YAML path
    (``compute.efficiency``, ``levels[hbm].efficiency``), each (value, low, high, source)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("family"), str):
        return {}
    family, out = raw["family"], {}
    compute = raw.get("compute")
    if isinstance(compute, dict) and "efficiency" not in compute and family in COMPUTE_EFFICIENCY:
        out["compute.efficiency"] = COMPUTE_EFFICIENCY[family]
    levels = raw.get("levels")
    for lvl in levels if isinstance(levels, list) else []:
        if isinstance(lvl, dict) and lvl.get("kind") in DEVICE_MEMORY_KINDS and not lvl.get("via") and \
                "efficiency" not in lvl and family in MEMORY_EFFICIENCY and isinstance(lvl.get("name"), str):
            out[f"levels[{lvl['name']}].efficiency"] = MEMORY_EFFICIENCY[family]
    return out

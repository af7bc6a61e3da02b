"""The GEMM, attention and memory-bandwidth rows of ``microbench.csv`` as single-operator simulations.

A GEMM row becomes a trace of one matmul of the measured shape (inputs and output in HBM), an
attention row one fused attention of its batch, heads, sequence and head dimension, a bandwidth
row one elementwise op that streams the measured arrays. All run at the library's own rate
(``compute.kernel_efficiency`` 1). How the source timed its kernels decides their launch cost: a
profiler's kernel time holds the kernel's own start and drain, which the device's ``op_overhead``
charges (its dispatch between graph nodes, about 0.6 us by row 75, is the rest, so the profiled
time this gives is high by at most that); a harness that times each call after flushing the L2
(tritonbench's ``do_bench``) hides the host's call behind the flush, so each kernel pays
``op_overhead``; superbench's ``cublaslt_gemm`` launches its calls back to back with no
synchronisation between them, so its host runs ahead and a call takes the longer of its kernel
(with ``op_overhead``) and the host's call: the launch (the harness stack's ``dispatch.launch``)
and cuBLASLt's own host work, measured here (``library_us``); any other host loop launches eagerly (``op_overhead``
and the launch call in series). The MI300X table of the Azure guide's fork times 1024^3 (row
22), 1024 x 2145 x 1024 and 2048^3 at the same 40 us a call, for 1x, 2.1x and 8x the FLOPs: below
that its harness, not the kernel, sets the time, so a call takes the longer of its kernel and
that floor (``HARNESS_FLOOR_US``, taken from the 2048^3 row of the table).
"""
from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memsim.core.units import PS_PER_S
from memsim.run import api
from memsim.workload.dtypes import BITS, nbytes
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta

# The measured chip -> the preset that models it (an H800 SXM is an H100 SXM's compute and HBM).
PRESETS = {"a100-sxm": "a100-80gb-sxm", "a100-80gb-sxm": "a100-80gb-sxm", "h100-sxm": "h100-sxm",
           "h800-sxm": "h100-sxm", "h800": "h100-sxm", "h200-sxm": "h200-sxm", "b200": "b200",
           "mi300x": "mi300x", "gb10": "gb10", "wormhole-n150": "wormhole-n150"}
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "bfloat8_b": "fp8"}
BABELSTREAM_ELEMENTS = 1 << 25  # BabelStream's default array length, fp64 elements
STREAMS = {"copy": (1, 1), "triad": (2, 1), "read": (1, 0)}  # arrays read, arrays written
BENCHMARKS = ("gemm", "attention", "memory_bandwidth")  # the rows simulated
UNITS = {"TFLOP/s": 1e12, "TB/s": 1e12, "GB/s": 1e9}
# scripts/launch_cost.cu on the H200's host: an empty kernel's launch call and cublasLtMatmul's, timed alike
LAUNCH_COST = Path(__file__).resolve().parent / "data" / "h200-2026-11-28" / "launch_cost.csv"
# A harness's own time per call, where a table of the source shows it: the Azure guide's MI300X
# hipBLASLt table (source_url_or_repo_path -> us a call), from its 2048^3 fp8 row, 427.74 TFLOP/s
# (github.com/samuel-bohman/AI-benchmarking-guide Azure_Results/ND_MI300X_v5_results.md).
HARNESS_FLOOR_US = {"Azure_Results/ND_MI300X_v5_results.md": 2 * 2048**3 / 427.74e12 * 1e6}


@dataclass(frozen=True)
class Bench:
    id: str
    chip: str  # as measured
    label: str
    measured: float  # in ``unit``
    unit: str
    hw: str | None  # preset, None: skipped
    graph: OpGraph | None
    launch: dict  # hardware overrides for the source's timing
    why: str
    loop: bool = False  # back-to-back calls whose host runs ahead: a call is its kernel or its host's call
    library_us: float = 0.0  # the library's host work per call, beside the launch call it makes
    floor_us: float = 0.0  # the harness's own time per call, below which no kernel is timed


@lru_cache(maxsize=1)
def library_us(path: Path = LAUNCH_COST) -> float:
    """cuBLASLt's host work per cublasLtMatmul call beyond a kernel's launch call: the median call of
    the shapes whose kernels are shorter than it (up to 1024^3), less an empty kernel's launch, on
    the same host (about 5.5 us)."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    calls = [float(r["host_us"]) for r in rows if r["what"].startswith("cublasLtMatmul") and int(r["m"]) <= 1024]
    empty = next(float(r["host_us"]) for r in rows if r["what"] == "empty_kernel")
    return statistics.median(calls) - empty


def gemm_graph(m: int, n: int, k: int, dtype: str) -> OpGraph:
    """One C = A @ B with A (m x k) and B (k x n) in ``dtype``; C in bf16 for 8-bit inputs."""
    out = "bf16" if BITS[dtype] <= 8 else dtype
    g = OpGraph(meta=StepMeta(benchmark="gemm"))
    g.add_tensor(Tensor("a", (m, k), dtype, "activation", nbytes(m * k, dtype)))
    g.add_tensor(Tensor("b", (k, n), dtype, "weight", nbytes(k * n, dtype)))
    g.add_tensor(Tensor("c", (m, n), out, "activation", nbytes(m * n, out)))
    g.add_op(Op("gemm", "matmul", 0, dtype, 2 * m * n * k,
                (Read("a", g.tensors["a"].bytes), Read("b", g.tensors["b"].bytes)), ("c",),
                (("k", k), ("m", m), ("n", n))))
    return g


def stream_graph(reads: int, writes: int, elements: int, bytes_per_element: int = 8) -> OpGraph:
    """One elementwise op reading ``reads`` arrays and writing ``writes`` (a read-only kernel writes its 8-byte result)."""
    size = elements * bytes_per_element
    g = OpGraph(meta=StepMeta(benchmark="stream"))
    ins = []
    for i in range(reads):
        g.add_tensor(Tensor(f"in{i}", (elements,), "fp32", "weight", size))
        ins.append(Read(f"in{i}", size))
    g.add_tensor(Tensor("out", (elements if writes else 1,), "fp32", "activation", size if writes else 8))
    g.add_op(Op("stream", "elementwise", 0, "fp32", elements, tuple(ins), ("out",), (("elements", elements),)))
    return g


def attention_graph(batch: int, heads: int, seq: int, head_dim: int, dtype: str, causal: bool) -> OpGraph:
    """One fused self-attention: q, k and v of ``batch`` x ``seq`` tokens and ``heads`` heads of
    ``head_dim`` in HBM, its output written back; FLOPs as FlashAttention's benchmarks count them
    (4 x batch x heads x seq^2 x head_dim, half of it with a causal mask)."""
    g = OpGraph(meta=StepMeta(benchmark="attention"))
    size = nbytes(batch * seq * heads * head_dim, dtype)
    for name in ("q", "k", "v", "o"):
        g.add_tensor(Tensor(name, (batch, seq, heads * head_dim), dtype, "activation", size))
    pairs = seq * (seq + 1) // 2 if causal else seq * seq
    dims = dict(batch=batch, heads=heads, kv_heads=heads, q_len=seq, kv_len=seq, head_dim=head_dim,
                causal=int(causal), pairs=pairs)
    g.add_op(Op("attention", "attention", 0, dtype, 4 * batch * heads * pairs * head_dim,
                tuple(Read(t, size) for t in "qkv"), ("o",), tuple(sorted(dims.items()))))
    return g


def attention_shape(text: str) -> tuple[int, int, int, int, bool]:
    """(batch, heads, seq, head_dim, causal) of an attention row's ``shape_or_size``."""
    batch, heads, seq, head_dim = (_dim(name, text, "attention") for name in ("batch", "heads", "seq", "head_dim"))
    return batch, heads, seq, head_dim, "non-causal" not in text and "causal" in text


def gemm_shape(text: str) -> tuple[int, int, int]:
    square = re.search(r"M=N=K=(\d+)", text)
    if square:
        return (int(square.group(1)),) * 3
    m, n, k = (_dim(d, text, "GEMM") for d in "MNK")
    return m, n, k


def _dim(name: str, text: str, what: str) -> int:
    """The value of ``name=`` in a row's ``shape_or_size``."""
    found = re.search(rf"\b{name}=(\d+)", text)
    if found is None:
        raise ValueError(f"{what} shape {text!r} gives no {name}")
    return int(found.group(1))


def timing(row: dict) -> tuple[dict, bool]:
    """(hardware overrides, whether its host runs ahead) for how the source timed its kernels:
    profiler kernel times (DeepGEMM's) hold the kernel's start and drain, not the host's launch
    call, and DeepGEMM picks its tiles by its own rule (``kernels.gemm_tiles`` deepgemm);
    tritonbench times each call after an L2 flush, behind which the host's call hides;
    superbench's loop (``cublaslt_gemm.cu``: its timed loop calls ``cublasLtMatmul`` with no
    synchronisation until the end event) and the MI300X harness with a floor (``host_floor``)
    run ahead of the device; other host loops launch each kernel eagerly. The rows measured here
    (``scripts/gpu_measure.py``) time graph replays or do_bench's flushed calls, both at the
    device's cost per kernel, with a cuBLAS (13.0) whose kernels fill the units
    (a stack's ``kernels.gemm_tiles`` fill). Each runs on the harness's stack (``HARNESS``): the
    host's launch call (``dispatch.launch``) as this repository measured it."""
    if "gpu_measure.py" in row["software"]:
        return {"stack.kernels.gemm_tiles": "fill"}, False
    if "DeepGEMM" in row["software"]:
        return {"stack.kernels.gemm_tiles": "deepgemm"}, False
    if "tritonbench" in row["software"]:
        return {}, False
    if "superbench" in row["software"] or host_floor(row):
        return {}, True
    return {"stack.kernels.launch": "eager", "stack.kernels.prefill_launch": "eager", "stack.dispatch.host": "serial"}, \
        False


def host_floor(row: dict) -> float:
    """The harness's own time per call (us) where its source shows one, else 0."""
    return next((us for path, us in HARNESS_FLOOR_US.items() if path in row.get("source_url_or_repo_path", "")), 0.0)


def bench(row: dict) -> Bench:
    hw = PRESETS.get(row["chip"])
    text = row["shape_or_size"]
    launch, loop = timing(row)
    base = dict(id=row["id"], chip=row["chip"], label=f"{row['dtype']} {text}".strip(),
                measured=float(row["measured_value"]), unit=row["unit"], launch=launch, loop=loop,
                library_us=library_us() if "cublaslt" in row["software"].lower() else 0.0,
                floor_us=host_floor(row))
    if hw is None:
        return Bench(**base, hw=None, graph=None, why=f"no preset models {row['chip']}")
    if row["benchmark"] == "gemm":
        if "HiFi2" in row["software"]:
            return Bench(**base, hw=None, graph=None, why="math fidelity HiFi2 is not a memsim dtype")
        return Bench(**base, hw=hw, graph=gemm_graph(*gemm_shape(text), DTYPES[row["dtype"]]), why="gemm")
    if row["benchmark"] == "attention":
        if "no wgmma" in text:
            return Bench(**base, hw=None, graph=None,
                         why="a kernel without Hopper's wgmma; the preset models Hopper's own (FA3, cuDNN)")
        batch, heads, seq, head_dim, causal = attention_shape(text)
        return Bench(**base, hw=hw, graph=attention_graph(batch, heads, seq, head_dim, DTYPES[row["dtype"]], causal),
                     why="attention")
    kind = next((k for k in STREAMS if k in text.lower()), None)
    if kind is None or row["confidence"] == "low":
        return Bench(**base, hw=None, graph=None, why="kernel not described well enough to rebuild")
    return Bench(**base, hw=hw, graph=stream_graph(*STREAMS[kind], BABELSTREAM_ELEMENTS), why=kind)


# The stack a microbenchmark's harness runs its kernels on: a host loop that launches each call, its
# launch call as measured on that vendor's runtime (CUDA: microbench.csv row 71; HIP: an estimate).
HARNESS = {"mi300x": "harness-hip"}


def harness(hw: str) -> str:
    return HARNESS.get(hw, "harness-cuda")


def load(path: Path) -> list[Bench]:
    with path.open(newline="") as fh:
        return [bench(r) for r in csv.DictReader(fh) if r["benchmark"] in BENCHMARKS]


def simulate(b: Bench) -> float:
    """The simulated throughput in the row's unit."""
    if b.hw is None or b.graph is None:
        raise ValueError(f"row {b.id} is skipped: {b.why}")
    result = api.simulate_graph(b.hw, b.graph, set={"compute.kernel_efficiency": "1", **b.launch},
                                stack=harness(b.hw))
    seconds = result.summary.step_time_s
    if b.loop:  # the host issues the next call while this kernel runs: the slower of the two sets the pace
        call = result.plan.stack.dispatch.launch_ps / PS_PER_S + b.library_us / 1e6
        seconds = max(seconds, call, b.floor_us / 1e6)
    if b.graph.meta.benchmark in ("gemm", "attention"):
        work = b.graph.total_flops()
    else:  # the bytes the kernel moves (a read kernel's 8-byte result included)
        (op,) = b.graph.ops.values()
        work = sum(r.bytes for r in op.inputs) + sum(b.graph.tensors[t].bytes for t in op.outputs)
    return work / seconds / UNITS[b.unit]

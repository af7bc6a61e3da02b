"""torch.export importer: full-size configs on the meta device, offline, against memsim's own DAG."""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("transformers", reason="the torch extra is not installed")

from memsim import simulate_graph, workload
from memsim.core.presets import config_dir
from memsim.workload.importers.torch_import import import_torch

pytestmark = pytest.mark.slow  # exports through torch, seconds each


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b", "mixtral-8x7b"])
def test_full_size_export_matches_memsim_dag(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may be downloaded
    graph, report = import_torch(config_dir("models") / f"{name}.json", tokens=8)
    ref = workload.build_step(workload.model_config(name), workload.StepSpec.make("prefill", prompt=8))
    assert graph.total_flops() == pytest.approx(ref.total_flops(), rel=0.01)
    assert graph.bytes_of("weight") == pytest.approx(ref.bytes_of("weight"), rel=0.01)
    assert report.dropped  # views, casts and expands are no-ops
    kinds = {op.kind for op in graph}
    assert {"matmul", "attention", "embedding"} <= kinds
    if name == "mixtral-8x7b":
        assert report.mapped.get("_grouped_mm", 0) == 2 * 32  # the experts' grouped GEMMs
    s = simulate_graph("h100-sxm", graph).summary  # q, k and v may be slices of one tensor (GPT-2)
    assert s.step_time_s >= s.roofline_s > 0


def test_gqa_expansion_moves_no_bytes_and_the_graph_simulates():
    graph, _ = import_torch(config_dir("models") / "llama-3.2-1b.json", tokens=8)
    attn = next(op for op in graph if op.kind == "attention")
    assert attn.dim("heads") == 32 and attn.dim("kv_heads") == 8
    q, k, _v = attn.inputs
    assert k.bytes == q.bytes // 4  # K is read as stored: 8 heads, not expanded to 32
    s = simulate_graph("h100-sxm", graph).summary
    assert s.step_time_s >= s.roofline_s > 0


def test_an_imported_llama_runs_within_5_percent_of_the_native_one():
    """Issue 23: the export's 574 framework calls run as the native model's few kernels
    (memsim.workload.fusion), so a 128-token prefill of Llama-3.2-1B takes what the native
    model's does (it took 4.29 against 2.53 ms unfused, each call paying a launch)."""
    graph, report = import_torch(config_dir("models") / "llama-3.2-1b.json", tokens=128)
    assert report.fused[0] > 3 * report.fused[1] and len(graph.ops) == report.fused[1]
    native = workload.build_step(workload.model_config("llama-3.2-1b"), workload.StepSpec.make("prefill", prompt=128))
    assert len(graph.ops) <= len(native.ops)
    mine = simulate_graph("h100-sxm", graph).summary.step_time_s
    theirs = simulate_graph("h100-sxm", native).summary.step_time_s
    # the native model runs its 33 RMSNorms as kernels of their own, which the import's fusion folds into
    # their neighbours: without the device's cost per kernel of those, the two steps agree (the default
    # stack's faster GEMM tiles make the step short, and the same 0.1 ms a larger share of it)
    from memsim.run.machine import load_chip

    gap = (len(native.ops) - len(graph.ops)) * load_chip("h100-sxm", ())[0].execution.op_overhead_ps / 1e12
    assert mine == pytest.approx(theirs - gap, rel=0.03)


def test_a_decode_step_exports_with_its_kv_cache_and_runs_within_5_percent_of_the_native_one():
    """``--context N`` exports one decode step whose KV cache is an input: the cache is read as
    kv, each layer's append writes only the new token's K and V (the cache grows in place, as a
    serving stack's does), and the step takes what the native model's does."""
    graph, report = import_torch(config_dir("models") / "llama-3.2-1b.json", context=256)
    assert graph.meta.phase == "decode" and graph.meta.context == 256
    assert report.mapped["cat (KV cache append)"] == 2 * 2 * 16  # filling each layer's cache, then the append
    caches = [t for t in graph.tensors.values() if t.klass == "kv" and t.shape[-2:] == (256, 64)]
    assert len(caches) == 2 * 16
    appended = [t for t in graph.tensors.values() if t.klass == "kv" and t.name.endswith(".new")]
    assert appended and all(t.bytes == 8 * 64 * 2 for t in appended)  # 8 KV heads x 64 x bf16: one token
    attn = next(op for op in graph if op.kind == "attention")
    assert attn.dim("kv_len") == 257 and attn.dim("q_len") == 1
    native = workload.build_step(workload.model_config("llama-3.2-1b"), workload.StepSpec.make("decode", context=256))
    mine = simulate_graph("h100-sxm", graph).summary.step_time_s
    theirs = simulate_graph("h100-sxm", native).summary.step_time_s
    assert mine == pytest.approx(theirs, rel=0.05)

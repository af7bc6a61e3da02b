"""Concurrent execution: weight prefetch on the copy stream, wafer-scale layer pipelining,
preemptive priorities, and the shortcuts staying exact under concurrency."""
from __future__ import annotations

import pytest

from memsim import engine, mapping, simulate, workload


def test_weight_prefetch_hides_hbm_on_a_dataflow_chip():
    """sn40l Llama-3.1-70B decode on 16 chips: each layer approaches max(compute, HBM read)."""
    on = simulate("sn40l", "llama-3.1-70b", context=2048, tp=16).summary
    off = simulate("sn40l", "llama-3.1-70b", context=2048, tp=16, set={"execution.weight_prefetch": "0"}).summary
    assert on["stall_s"]["hbm"] < 0.1 * off["stall_s"]["hbm"]
    assert on["step_time_s"] < off["step_time_s"]
    # The step approaches its compute or its HBM time, whichever is longer: the HBM stream runs
    # behind the compute and the all-reduces instead of between them.
    hbm_s = on["bytes_per_level"]["hbm"]["total"] / 1.6e12 / 0.8  # bytes at the achievable HBM rate
    busy = max(on["compute_busy_s"], hbm_s)
    assert on["step_time_s"] < 1.3 * busy < 0.65 * off["step_time_s"]
    assert on["bytes_per_level"]["hbm"]["read"] == off["bytes_per_level"]["hbm"]["read"]  # same bytes, hidden


def test_prefetch_shows_on_the_copy_stream_and_waits_name_it():
    r = simulate("sn40l", "llama-3.2-1b", context=512, tp=2)
    tl = r.timeline
    copies = tl[(tl.stream == "copy") & (tl.kind == "transfer")]
    assert len(copies) > 0 and set(copies.dst) == {"sram"} and set(copies.resource) == {"hbm"}
    assert not (tl[tl.stream == "copy"].resource == "compute").any()  # the copy engine computes nothing


def test_a_wafer_pipelines_its_layers_over_a_prefill():
    """wse-3 Llama-3.1-8B prefill of 2048 tokens: regions run concurrently over token chunks."""
    s = simulate("wse-3", "llama-3.1-8b", phase="prefill", prompt=2048).summary
    assert s["compute_utilization"] >= 0.2  # one region at a time kept 2.1% busy
    assert s["step_time_s"] >= s["roofline_s"]
    assert s["workload"]["microbatches"] == 32 and s["workload"]["tokens"] == 2048
    assert s["bytes_per_level"]["memoryx"]["total"] == 0


def test_a_wafer_whose_weights_spill_streams_them_layer_by_layer():
    s = simulate("wse-3", "llama-3.1-70b", context=2048).summary
    assert s["roofline_bound"] == "memoryx" and s["step_over_roofline"] < 1.01
    four = simulate("wse-3", "llama-3.1-70b", context=2048, pp=4).summary  # 4 CS-3, 20 layers each
    assert four["bytes_per_level"]["memoryx"]["total"] == 0 and four["step_time_s"] < 0.01 * s["step_time_s"]


@pytest.mark.parametrize("kw", [
    dict(context=32, set={"execution.weight_prefetch": "2"}),  # prefetches on the copy stream
    dict(context=32, batch=4, pp=2, microbatches=4, set={"execution.weight_prefetch": "1"}),
    dict(phase="prefill", prompt=48, microbatches=4, wafer=True),  # layer regions in a pipeline
])
def test_shortcuts_stay_exact_under_concurrency(tiny_chip_path, tiny_wafer_path, tiny_model_path, kw):
    """Fast-forward and replay against the chunk-by-chunk run, with streams running concurrently."""
    chip = tiny_wafer_path if kw.pop("wafer", False) else tiny_chip_path
    fast = simulate(str(chip), str(tiny_model_path), **kw)
    full = simulate(str(chip), str(tiny_model_path), fast_forward=False, memoize=False, **kw)
    assert fast.summary["step_time_s"] == full.summary["step_time_s"]
    assert fast.summary["bytes_per_level"] == full.summary["bytes_per_level"]
    assert fast.summary["stall_s"] == pytest.approx(full.summary["stall_s"], rel=1e-12, abs=1e-15)
    assert fast.summary["engine"]["events"] < full.summary["engine"]["events"]
    assert any(t.stream != "compute" for t in fast.plan.tasks) or fast.plan.regions > 1


def test_single_stream_mode_runs_one_operator_at_a_time(tiny_graph, tiny_chip):
    import dataclasses

    single = dataclasses.replace(tiny_chip, execution=dataclasses.replace(tiny_chip.execution, streams=("compute",),
                                                                          weight_prefetch=2))
    result = engine.run(mapping.make_plan(tiny_graph, single))
    spans = sorted((s, e) for _, s, e in result.spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no two operators overlap


def test_micro_batches_of_a_decode_split_the_batch():
    step = workload.StepSpec.make("decode", batch=8, context=64)
    parts = workload.split(step, 4)
    assert [p.batch for p in parts] == [2, 2, 2, 2] and all(p.context == 64 for p in parts)

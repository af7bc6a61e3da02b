"""Concurrent execution: weight prefetch on the copy stream, wafer-scale layer pipelining,
preemptive priorities, and the shortcuts staying exact under concurrency."""
from __future__ import annotations

import itertools

import pytest

from memsim import engine, mapping, simulate, workload
from tests.conftest import warned


@pytest.mark.slow
def test_weight_prefetch_hides_hbm_on_a_dataflow_chip():
    """sn40l Llama-3.1-70B decode on 16 chips: each layer approaches the longer of its HBM read and
    its chain of compute, kernel overheads and all-reduces (here the HBM read: the step is
    HBM-bound), instead of their sum."""
    on = simulate("sn40l", "llama-3.1-70b", context=2048, tp=16).summary
    off = simulate("sn40l", "llama-3.1-70b", context=2048, tp=16, set={"execution.weight_prefetch": "0"}).summary
    assert on.stall_s["hbm"] < off.stall_s["hbm"]
    # The step approaches its HBM time or its chain of compute, overheads and all-reduces,
    # whichever is longer: the HBM stream runs behind the chain instead of between its links.
    hbm_s = on.bytes_per_level["hbm"].total / 1.6e12 / 0.8  # bytes at the achievable HBM rate
    chain = on.compute_busy_s + on.stall_s["overhead"] + on.exposed_comm_s
    assert on.step_time_s < 1.3 * max(chain, hbm_s)
    assert on.step_time_s < off.step_time_s - 0.5 * min(chain, hbm_s)
    assert on.bytes_per_level["hbm"].read == off.bytes_per_level["hbm"].read  # same bytes, hidden


def test_prefetch_shows_on_the_copy_stream_and_waits_name_it():
    r = simulate("sn40l", "llama-3.2-1b", context=512, tp=2)
    tl = r.timeline
    copies = tl[(tl.stream == "copy") & (tl.kind == "transfer")]
    assert len(copies) > 0 and set(copies.dst) == {"sram"} and set(copies.resource) == {"hbm"}
    assert not (tl[tl.stream == "copy"].resource == "compute").any()  # the copy engine computes nothing


@pytest.mark.slow
def test_a_wafer_pipelines_its_layers_over_a_prefill():
    """wse-3 Llama-3.1-8B prefill of 2048 tokens: regions run concurrently over token chunks."""
    s = simulate("wse-3", "llama-3.1-8b", phase="prefill", prompt=2048).summary
    # One micro-batch keeps 0.4% busy; the chunks keep 9.3% busy, the rest being the fabric's
    # traversals of each chunk's activations across each projection's part (memsim.mapping.mesh).
    assert s.compute_utilization >= 0.08
    assert s.step_time_s >= s.roofline_s
    assert s.workload.microbatches == 32 and s.workload.tokens == 2048
    assert s.bytes_per_level["memoryx"].total == 0


def test_a_wafer_whose_weights_spill_streams_them_layer_by_layer():
    with warned():
        s = simulate("wse-3", "llama-3.1-70b", context=2048).summary
    assert s.roofline_bound == "memoryx" and s.step_over_roofline < 1.01
    four = simulate("wse-3", "llama-3.1-70b", context=2048, pp=4).summary  # 4 CS-3, 20 layers each
    assert four.bytes_per_level["memoryx"].total == 0 and four.step_time_s < 0.01 * s.step_time_s


@pytest.mark.parametrize("kw", [
    dict(context=32, set={"execution.weight_prefetch": "2"}),  # prefetches on the copy stream
    dict(context=32, batch=4, pp=2, microbatches=4, set={"execution.weight_prefetch": "1"}),
    dict(phase="prefill", prompt=48, microbatches=4, wafer=True),  # layer regions in a pipeline
    # GPT-J's parallel attention and MLP on two compute streams, with prefetches beside them
    dict(context=64, parallel=True, set={"execution.streams": "compute,branch,copy", "execution.weight_prefetch": "1"}),
    dict(phase="prefill", prompt=32, parallel=True, set={"execution.streams": "compute,branch"}),
])
def test_shortcuts_stay_exact_under_concurrency(tiny_chip_path, tiny_wafer_path, tiny_model_path, kw, tmp_path):
    """Fast-forward and replay against the chunk-by-chunk run, with streams running concurrently."""
    chip = tiny_wafer_path if kw.pop("wafer", False) else tiny_chip_path
    if kw.pop("parallel", False):
        import json

        tiny_model_path = tmp_path / "tiny-gptj.json"
        tiny_model_path.write_text(json.dumps({"model_type": "gptj", "n_embd": 64, "n_head": 4, "n_layer": 2,
                                               "rotary_dim": 16, "vocab_size": 256, "n_positions": 512}))
    fast = simulate(str(chip), str(tiny_model_path), **kw)
    full = simulate(str(chip), str(tiny_model_path), fast_forward=False, **kw)
    assert fast.summary.step_time_s == full.summary.step_time_s
    assert fast.summary.bytes_per_level == full.summary.bytes_per_level
    assert fast.summary.stall_s == pytest.approx(full.summary.stall_s, rel=1e-12, abs=1e-15)
    assert fast.summary.engine.events < full.summary.engine.events
    assert any(t.stream != "compute" for t in fast.plan.tasks) or fast.plan.regions > 1
    if "branch" in kw.get("set", {}).get("execution.streams", ""):  # the MLP runs beside the attention
        assert {t.graph_op for t in fast.plan.tasks if t.stream == "branch"} == {
            f"L{i}.{op}" for i in range(2) for op in ("fc", "act", "down")}


def test_single_stream_mode_runs_one_operator_at_a_time(tiny_graph, tiny_chip):
    import dataclasses

    single = dataclasses.replace(tiny_chip, execution=dataclasses.replace(tiny_chip.execution, streams=("compute",),
                                                                          weight_prefetch=2))
    result = engine.run(mapping.make_plan(tiny_graph, single))
    spans = sorted((s, e) for _, s, e in result.spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no two operators overlap


def test_micro_batches_of_a_decode_split_the_batch():
    step = workload.StepSpec.make("decode", batch=8, context=64)
    parts = workload.split(step, 4)
    assert [p.batch for p in parts] == [2, 2, 2, 2] and all(p.context == 64 for p in parts)


def _streaming(nbytes: int):
    """A step that streams ``nbytes`` from HBM through SRAM and computes almost nothing."""
    from memsim.hardware.resource import Ref
    from memsim.mapping.lower import make_step

    return make_step("stream", {Ref.level("hbm"): nbytes}, {}, busy_ps=1000, flops=0, depth=2, sram_bytes=32 * 1024)


@pytest.mark.parametrize("shortcuts", [True, False])
def test_two_bandwidth_bound_operators_on_two_streams_share_the_level(tiny_chip, shortcuts):
    """Independent HBM-bound operators on the compute and branch streams of one chip take the
    time of their summed bytes at HBM's bandwidth, and each waits on HBM held by the other."""
    import dataclasses

    from memsim.hardware.resource import Ref
    from memsim.mapping.plan import OpTask, Plan

    chip = dataclasses.replace(tiny_chip, execution=dataclasses.replace(tiny_chip.execution,
                                                                        streams=("compute", "branch")))
    hbm = Ref.level("hbm")
    a, b = (OpTask(op=name, kind="elementwise", layer=0, flops=0, overhead_ps=0, steps=(_streaming(nbytes),), deps=(),
                   bound=hbm, stream=stream) for name, nbytes, stream in (("a", 1 << 20, "compute"), ("b", 3 << 19, "branch")))

    def plan(*tasks):
        return Plan(chip=chip, tasks=tasks, homes=(), roofline_s=0.0, roofline_bound="hbm", compulsory_bytes=())

    def run(*tasks):
        return engine.run(plan(*tasks), fast_forward=shortcuts, memoize=shortcuts)

    both, alone_a, alone_b = run(a, b), run(a), run(b)
    rate = chip.level("hbm").effective_bandwidth(chip.compute.units)  # bytes/s
    summed_ps = ((1 << 20) + (3 << 19)) / rate * 1e12
    assert both.end_ps >= summed_ps  # never faster than the summed bytes at the shared bandwidth
    assert both.end_ps == pytest.approx(alone_a.end_ps + alone_b.end_ps, rel=0.02)  # not the longer of the two
    assert both.end_ps > 1.5 * max(alone_a.end_ps, alone_b.end_ps)
    waits = {(r.op, r.cause.holder) for r in both.records if r.kind == "stall" and r.cause.on == hbm.on(0)}
    assert ("a", "b") in waits and ("b", "a") in waits  # each waits on the other
    assert dict(both.bytes_read)["hbm"] == (1 << 20) + (3 << 19)
    if shortcuts:  # the pair is fast-forwarded as a group, exactly
        full = engine.run(plan(a, b), fast_forward=False, memoize=False)
        assert both.end_ps == full.end_ps and both.events < 0.2 * full.events
        assert _stalls(both) == pytest.approx(_stalls(full), rel=1e-12)


def _stalls(result) -> dict:
    out: dict = {}
    for r in result.records:
        if r.kind == "stall":
            key = (r.op, str(r.cause), r.cause.holder)
            out[key] = out.get(key, 0) + r.end_ps - r.start_ps
    return out

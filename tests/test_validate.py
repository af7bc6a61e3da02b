"""memsim.validation and scripts/validate.py against the published measurements shipped in
``memsim/validation/data``."""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import numpy as np
import pytest

from memsim import hardware
from memsim.run import api
from memsim.stack import load_stack
from memsim.validation import calibration, fit, llmcompass, microbench, report

CALIBRATION = calibration.DATA  # shipped in the repository
MICROBENCH = Path(microbench.__file__).resolve().parent / "data" / "microbench.csv"  # shipped in the repository


def test_weight_formats_parse():
    assert calibration.weight_format("int4 weight-only g32") == ("int4", 32)
    assert calibration.weight_format("int8 weight-only (bf16 act)") == ("int8", 128)
    assert calibration.weight_format("bf16") == ("bf16", 128)
    assert calibration.chip_of("NVIDIA A100-80GB SXM (330W cap)") == "a100-80gb-sxm"


def test_a_row_runs_on_the_system_and_in_the_unit_it_was_measured_in():
    assert calibration.system_of("8xA100 hybrid cube mesh, ENABLE_INTRA_NODE_COMM=1") == calibration.HYBRID_CUBE_MESH
    assert dict(calibration.HYBRID_CUBE_MESH)["system.topology"] == "dragonfly"
    assert calibration.system_of("8x A100 SXM, NVSwitch") == ()
    row = {"derived_ms_per_decode_step": "", "unit": "s", "value": "0.022", "id": "x", "phase": "prefill"}
    assert calibration.measured_ms(row) == pytest.approx(22.0)
    with pytest.raises(ValueError, match="not a time"):
        calibration.measured_ms({**row, "unit": "tok/s"})


def test_every_row_of_the_four_sources_becomes_a_run():
    """Nothing is skipped: decode steps (at the middle of a growing KV cache where the row gives
    its range), prefills, and whole generations timed end to end, on the chips and grids measured."""
    cases = {c.id: c for c in calibration.load(CALIBRATION)}
    assert all(c.kwargs is not None for c in cases.values()), [c.why for c in cases.values() if c.kwargs is None]
    assert {calibration.repository(c.source) for c in cases.values()} == {
        "pytorch-labs/gpt-fast", "NVIDIA/TensorRT-LLM", "InternLM/lmdeploy", "NVIDIA/FasterTransformer"}
    assert cases["207"].kwargs["context"] == (2049 + 4096) // 2  # "2048 generated (KV 2049..4096)"
    assert cases["1"].kwargs["context"] > 0 and cases["206"].kwargs["batch"] == 64
    ft = cases["227"]  # 200 tokens generated after a 200-token prompt, 5648 ms in all (not the 28.24 ms per step)
    assert ft.kwargs["phase"] == "generate" and (ft.kwargs["prompt"], ft.kwargs["generate"]) == (200, 200)
    assert ft.measured_ms == pytest.approx(5648.0)
    assert cases["212"].kwargs["tp"] == 4 and cases["225"].kwargs["tp"] == 8
    # Each row runs on its stack's profile: FasterTransformer and TurboMind all-reduce with NCCL, a ring
    # inside the node; gpt-fast keeps the chip's own algorithm
    stacks = {i: load_stack(c.stack)[0] for i, c in cases.items()}
    assert [c.algorithm for c in stacks["225"].collectives] == ["ring"] == [c.algorithm for c in stacks["210"].collectives]
    assert not stacks["10"].collectives
    # The C++ stacks launch eagerly; gpt-fast replays CUDA graphs
    eager = {i for i, s in stacks.items() if s.kernels.launch == "eager"}
    assert eager == {i for i, c in cases.items() if calibration.repository(c.source) != "pytorch-labs/gpt-fast"}
    assert "1" not in eager and {"47", "200", "225"} <= eager


def _toy_table(slope: float, base: float) -> fit.Table:
    """Cases whose step time is base + slope * overhead / efficiency, exactly."""
    cases = tuple(calibration.Case(str(i), src, "toy", meas, {}, "") for i, (src, meas)
                  in enumerate([("a", 10.0), ("a", 20.0), ("b", 15.0)]))
    params = fit.PARAMS

    def sim(c, over):
        eff = float(over[params[0].path])
        over_us = float(over[params[1].path].split()[0])
        return c.measured_ms * (base + slope * over_us) / eff

    return fit.table(list(cases), params, sim), sim


def test_fit_recovers_the_parameters_that_generated_the_rows():
    # step = measured * (0.5 + 0.25 * overhead) / eff: exact at eff 0.8 and overhead 1.2 us
    t, sim = _toy_table(0.25, 0.5)
    theta = fit.fit(t, np.arange(3))
    assert (0.5 + 0.25 * theta[1]) / theta[0] == pytest.approx(1.0, abs=0.01)
    _full, outcomes = fit.validate(t, sim)
    assert all(abs(o.error("out")) < 0.02 for o in outcomes)


def test_a_parameter_the_rows_do_not_constrain_keeps_its_prior():
    # step time independent of the overhead: the fit leaves it at its prior
    t, _ = _toy_table(0.0, 0.9)
    theta = fit.fit(t, np.arange(3))
    assert theta[1] == pytest.approx(fit.PARAMS[1].prior, abs=0.1)


def test_presets_carry_the_all_rows_fit():
    chip = hardware.load("a100-80gb-sxm")
    assert chip.compute.kernel_efficiency == pytest.approx(0.84)
    assert chip.execution.op_overhead_ps == 2_470_000


@pytest.mark.slow
@pytest.mark.xdist_group("calibration")  # one fit per process, shared with tests/test_figures.py's block
@pytest.mark.long
def test_calibration_in_and_out_of_sample():
    every = calibration.load(CALIBRATION)  # every row parses, whatever its unit
    assert all(c.measured_ms > 0 for c in every)
    r = report.calibrate(CALIBRATION)
    # The presets hold the fit to all four sources (the grid step apart); no row is left unfitted.
    assert len(r.outcomes) == len(every) == 30 and not r.predicted and not r.skipped
    # (within one step of the fit's search, as the presets write it: 0.84 and 2.47 us)
    steps = [(max(p.grid) - min(p.grid)) / (fit.FINE - 1) for p in fit.PARAMS]
    assert abs(r.full[0] - 0.84) <= steps[0] + 0.001 and abs(r.full[1] - 2.47) <= steps[1] + 0.005
    inside = [abs(o.error("in")) for o in r.outcomes]
    assert statistics.median(inside) <= 0.045 and max(inside) <= 0.19, inside
    # Every row without its source. Issue 23's target is median <= 6%, max <= 15%; neither holds.
    # These are the bounds memsim reaches (docs/validation.md, Accuracy), so that a change that
    # worsens them fails.
    held = [abs(e) for _, e in report.held_out(r)]
    assert len(held) == len(every)
    assert statistics.median(held) <= 0.075 and max(held) <= 0.22, held
    # Without the one source that captures CUDA graphs, the eager stacks alone put the device's
    # per-kernel cost between a graph node's replay (0.58 us, row 75) and the all-rows fit.
    gpt_fast = {o.held_out_fit for o in r.outcomes if calibration.repository(o.case.source) == "pytorch-labs/gpt-fast"}
    assert len(gpt_fast) == 1 and 0.58 < gpt_fast.pop()[1] <= r.full[1] + 0.07
    # TurboMind's first token is a prefill of all but the last prompt token and a decode step
    by_decode = [c for c in every if c.why == calibration.BY_DECODE]
    assert {c.id for c in by_decode} == {"200", "201", "202", "203", "204", "205"}
    assert all(c.kwargs["phase"] == "generate" and c.kwargs["generate"] == 1 for c in by_decode)


def test_turbomind_decode_grows_with_its_kv_cache_as_two_reads_of_each_kv_head():
    """LMDeploy's A100 table (docs/en/benchmark/a100_fp16.md at v0.1.0, the source of rows 210-212)
    gives Llama-2-70B at TP 4 and batch 64 a median step of 37, 43 and 55 ms as the KV cache runs
    2..129, 129..2176 and 2049..4096 keys; the middle one is not a calibration row. TurboMind's
    decode kernel serves 4 of a group's 8 query heads a block, so it reads each KV head twice: that
    gives the slope (about 6 us a key at batch 64); one read gives half of it."""
    row = next(c for c in calibration.load(CALIBRATION) if c.id == "212")
    assert load_stack(row.stack)[0].kernels.decode_group_heads == 4

    def ms(context: int, settings: tuple = row.settings) -> float:
        return api.simulate(**{**row.kwargs, "context": context}, set=dict(settings)).summary.step_time_s * 1e3

    published = {65: 37.0, 1152: 43.0, 3072: 55.0}
    assert all(abs(ms(ctx) / value - 1) <= 0.08 for ctx, value in published.items())
    slope = (ms(3072) - ms(65)) / (3072 - 65)
    assert slope == pytest.approx((55.0 - 37.0) / (3072 - 65), rel=0.15)
    once = (*row.settings, ("stack.kernels.decode_group_heads", "0"))
    assert (ms(3072, once) - ms(65, once)) / (3072 - 65) < 0.6 * slope


def test_microbench_rows_simulated_as_single_operators():
    benches = [b for b in microbench.load(MICROBENCH) if b.hw is not None]
    errors = {b.id: microbench.simulate(b) / b.measured - 1 for b in benches}
    assert len(errors) >= 30
    within = [i for i, e in errors.items() if abs(e) <= 0.10]
    # every bandwidth row and all but the tall-skinny GEMMs that docs/validation.md names
    assert set(errors) - set(within) <= {"16", "19"}, errors
    # superbench's loop runs its host ahead: a 1024^3 call takes its kernel's time on an A100 (row
    # 15) and the host's cublasLtMatmul call on an H100 (row 18), whose fp8 kernel is shorter
    assert abs(errors["15"]) <= 0.10 and abs(errors["18"]) <= 0.10, errors
    # DeepGEMM's rows, its tiles by its own rule
    assert all(abs(errors[i]) <= 0.10 for i in ("24", "25", "26", "27")), errors


def test_attention_follows_head_dimension_as_its_exponentials_on_the_special_function_units():
    """FlashAttention-3 on an H100 (microbench.csv rows 77-82) and cuDNN on an H200 (measured.csv,
    head dimensions 64 and 128): matrix work at the matrix peak, one exponential a score on the
    special-function units, and the fill (docs/validation.md). At the vector rate the rows at head
    dimension 64 came out 15-47% too fast."""
    rows = [b for f in (MICROBENCH, report.MEASURED) for b in microbench.load(f)
            if b.graph is not None and "attention" in b.label.lower()]
    errors = {b.id: microbench.simulate(b) / b.measured - 1 for b in rows}
    assert len(errors) == 30, sorted(errors)
    assert all(abs(errors[str(i)]) <= 0.05 for i in range(77, 83)), errors
    assert statistics.median(abs(e) for e in errors.values()) <= 0.05, errors
    assert max(abs(e) for e in errors.values()) <= 0.20, errors
    # the mechanism, not the fill, carries head dimension 64: without the units' rate the long rows run too fast
    hd64 = [b for b in rows if "head_dim=64" in b.label and "seq=16384" in b.label]
    assert len(hd64) == 2
    for b in hd64:
        vector = dataclasses.replace(b, launch={**b.launch, "compute.special_peak": "0 FLOP/s"})
        assert microbench.simulate(vector) / b.measured - 1 >= 0.15, b.id


def test_a_loop_whose_host_runs_ahead_takes_the_longer_of_kernel_and_launch_call():
    row = {"id": "x", "chip": "h100-sxm", "benchmark": "gemm", "dtype": "bf16", "shape_or_size": "M=N=K=64",
           "measured_value": "1", "unit": "TFLOP/s", "software": "CUDA 12.6, superbench cublaslt_gemm",
           "confidence": "high"}
    tiny = microbench.bench(row)
    assert tiny.loop and tiny.launch == {}
    # a call takes the longer of its kernel (with the device's per-kernel cost) and the host's call:
    # the 3 us launch and cuBLASLt's own work, measured on the H200's host (launch_cost.csv)
    assert 5.0 <= tiny.library_us == microbench.library_us() <= 6.0
    kernel = api.simulate_graph("h100-sxm", tiny.graph, set={"compute.kernel_efficiency": "1", **tiny.launch},
                                stack=microbench.harness("h100-sxm"))
    launch = kernel.plan.stack.dispatch.launch_ps
    call = launch / 1e12 + tiny.library_us / 1e6
    assert launch == 3_000_000 and call > kernel.summary.step_time_s
    assert microbench.simulate(tiny) == pytest.approx(2 * 64**3 / call / 1e12)
    big = microbench.bench({**row, "shape_or_size": "M=N=K=8192"})
    eager = microbench.bench({**row, "shape_or_size": "M=N=K=8192", "software": "a host loop"})
    assert not eager.loop and eager.launch["stack.kernels.launch"] == "eager"
    # a long kernel hides the call: faster than the same loop paying the call in series
    assert microbench.simulate(big) > microbench.simulate(eager)


def test_a_harness_whose_calls_take_the_same_time_at_any_size_sets_a_floor():
    # the Azure guide's MI300X table: 1024^3 (row 22), 1024 x 2145 x 1024 and 2048^3 all take 40 us
    # a call; the floor comes from the 2048^3 row, so row 22 is predicted, not fitted
    assert microbench.HARNESS_FLOOR_US["Azure_Results/ND_MI300X_v5_results.md"] == pytest.approx(40.2, abs=0.1)
    rows = {b.id: b for b in microbench.load(MICROBENCH)}
    assert rows["22"].loop and rows["22"].floor_us == pytest.approx(40.2, abs=0.1)
    assert microbench.simulate(rows["22"]) == pytest.approx(2 * 1024**3 / 40.2e-6 / 1e12, rel=0.01)
    # an 8192^3 call is its kernel's (~0.9 ms): the floor is hidden
    assert microbench.simulate(rows["21"]) > 1000
    assert rows["11"].floor_us == 0  # AMD's own hipBLASLt-bench runs (rows 11-13) show no floor


def test_llmcompass_gpt3_layer_case():
    """LLMCompass's own validation case, run as it was measured. The data sum to the totals its
    repository's plot reports (66.748 ms and 1.111 ms); each measured operator finds memsim's.
    Issue 23's bounds: both layers within 10%, the decode closer than LLMCompass's -12.4% and the
    prefill no more than 3 points worse than its -2.1%; the prefill's GEMMs within 8%, and the
    decode's small operators, whose time is mostly the harness's per-call overhead, within 10%."""
    real = llmcompass.measured()
    assert sum(v for (p, _), v in real.items() if p == "prefill") == pytest.approx(0.066748, abs=1e-6)
    assert sum(v for (p, _), v in real.items() if p == "decode") == pytest.approx(0.0011109, abs=1e-7)
    rows = llmcompass.rows()
    assert {(r.phase, r.operator) for r in rows} == {(p, o) for p in llmcompass.PHASES for o in llmcompass.OPERATORS}
    layer = llmcompass.totals(rows)
    assert layer["prefill"].measured_s == pytest.approx(0.066748, abs=1e-6)
    assert abs(layer["prefill"].error) <= min(0.10, abs(llmcompass.LLMCOMPASS_ERROR["prefill"]) + 0.03)
    assert abs(layer["decode"].error) <= 0.10 and abs(layer["decode"].error) < abs(llmcompass.LLMCOMPASS_ERROR["decode"])
    small = [r for r in rows if r.phase == "decode" and r.operator.startswith(("LayerNorm", "GeLU"))]
    assert len(small) == 3 and all(abs(r.error) <= 0.10 for r in small)
    gemms = [r for r in rows if r.phase == "prefill" and r.operator.endswith(("_proj", "Q_K_V"))]
    assert len(gemms) == 4 and all(abs(r.error) <= 0.08 for r in gemms)


def _measured_rows_script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "measured_rows.py"
    spec = importlib.util.spec_from_file_location("measured_rows", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_measured_csv_is_what_its_script_writes_from_the_kept_run():
    script = _measured_rows_script()
    assert report.MEASURED.read_text() == script.text(script.RUN)


def _measured_gemms(tiles: str) -> list[float]:
    """|error| of the measured few-row GEMMs (M <= 512: short prefills and batches), as simulated
    with the library's tiles ``tiles``."""
    errors = []
    for b in microbench.load(report.MEASURED):
        if b.graph is None or b.graph.meta.benchmark != "gemm" or microbench.gemm_shape(b.label)[0] > 512:
            continue
        b = dataclasses.replace(b, launch={**b.launch, "stack.kernels.gemm_tiles": tiles})
        errors.append(abs(microbench.simulate(b) / b.measured - 1))
    return errors


def test_tiles_that_fill_the_units_follow_todays_cublas_on_few_rows():
    """measured.csv (an H200, cuBLAS 13): GEMMs of 1 to 512 rows. Tiles that fill the SMs put them
    within 10% at the median; one fixed 128-wide tile leaves SMs idle and errs far more."""
    fill, fixed = _measured_gemms("fill"), _measured_gemms("fixed")
    assert len(fill) == 28
    assert statistics.median(fill) <= 0.10
    assert max(fill) < max(fixed) and statistics.mean(fill) < 0.6 * statistics.mean(fixed)


# TensorRT-LLM 0.9's docs/source/performance.md, 'Low Latency' tables (the document calibration rows
# 47-50 come from): Llama-2-7B's first token at batch 1 from 128 input tokens, fp8, gptSessionBenchmark.
TRT_09_FP8_FIRST_TOKEN_S = {"h100-sxm": 6.3e-3, "h200-sxm": 5.7e-3}


@pytest.mark.parametrize("hw", sorted(TRT_09_FP8_FIRST_TOKEN_S))
def test_the_2024_stacks_fit_fixed_tiles_on_hopper_too(hw):
    """Outside calibration.csv: TensorRT-LLM 0.9's short fp8 prefills on H100 and H200 fit the
    fixed 128-wide tiles (the presets' default), and come out far too fast with the tiles today's
    cuBLAS picks (measured.csv), as its A100 rows do (docs/validation.md, Measured here)."""
    def step_s(tiles: str) -> float:
        r = api.simulate(hw, "llama-2-7b", phase="prefill", prompt=128, weight_dtype="fp8", kv_dtype="fp8",
                         stack="trtllm-0.9", set={"stack.kernels.gemm_tiles": tiles})
        return r.summary.step_time_s

    measured = TRT_09_FP8_FIRST_TOKEN_S[hw]
    assert abs(step_s("fixed") / measured - 1) <= 0.10
    assert step_s("fill") / measured - 1 <= -0.20


# The same tables' every fp8 first token on Hopper (GPT-J-6B, head dimension 256, and Llama-2-7B, 128),
# from 128 and 2048 input tokens: (chip, model, prompt) -> seconds.
TRT_09_FP8_FIRST_TOKENS_S = {
    ("h100-sxm", "gpt-j-6b", 128): 5.5e-3, ("h100-sxm", "gpt-j-6b", 2048): 23.8e-3,
    ("h100-sxm", "llama-2-7b", 128): 6.3e-3, ("h100-sxm", "llama-2-7b", 2048): 30.8e-3,
    ("h200-sxm", "gpt-j-6b", 128): 5.0e-3, ("h200-sxm", "gpt-j-6b", 2048): 23.5e-3,
    ("h200-sxm", "llama-2-7b", 128): 5.7e-3, ("h200-sxm", "llama-2-7b", 2048): 30.2e-3,
}


def test_tensorrt_llm_09s_fp8_first_tokens_on_hopper_are_within_10_percent():
    """Outside calibration.csv, on the chips it was not fitted on, with the stack's own profile: every
    row within 10%. GPT-J's 2048-token prefill takes about a quarter less than Llama-2-7B's, on fewer
    FLOPs and attention at head dimension 256, whose exponentials are a smaller share."""
    errors = {}
    for (hw, model, prompt), measured in TRT_09_FP8_FIRST_TOKENS_S.items():
        r = api.simulate(hw, model, phase="prefill", prompt=prompt, weight_dtype="fp8", kv_dtype="fp8",
                         stack="trtllm-0.9", sensitivity=0)
        errors[hw, model, prompt] = r.summary.step_time_s / measured - 1
    assert all(abs(e) <= 0.10 for e in errors.values()), errors
    assert statistics.median(abs(e) for e in errors.values()) <= 0.07, errors


def test_a_compiled_decode_step_measured_here_is_within_15_percent():
    """measured.csv's run: Llama-2-7B's shapes in plain PyTorch, compiled as gpt-fast compiles
    (torch.compile, mode="reduce-overhead": Triton fusions replayed as one CUDA graph), on an H200.
    memsim's own Llama-2-7B on h200-sxm comes out faster, never by more than 15%: the compiled step
    launches more kernels (copies into the KV cache, cuBLAS's split-K reductions)."""
    import csv as _csv

    run = report.MEASURED.parent / "h200-2026-11-28" / "compiled.csv"
    rows = list(_csv.DictReader(run.open()))
    assert [(int(r["batch"]), int(r["context"])) for r in rows] == [(1, 1024), (16, 1024)]
    for r in rows:
        sim = api.simulate("h200-sxm", "llama-2-7b", phase="decode", batch=int(r["batch"]),
                           context=int(r["context"]), stack="gpt-fast", set={"stack.kernels.gemm_tiles": "fill"})
        error = sim.summary.step_time_s / float(r["seconds"]) - 1
        assert -0.15 <= error < 0, (r, error)

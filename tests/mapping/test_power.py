"""The power cap: a pure throttle on a step's compute, and its effect on whole runs."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from memsim import hardware, simulate
from memsim.errors import ConfigError
from memsim.hardware.resource import Ref
from memsim.mapping import power
from memsim.mapping.plan import Step

GPUS = [p for p in hardware.presets() if hardware.load(p).family == "gpu"]
A100 = hardware.load("a100-80gb-sxm")


def _step(compute_ps: int, hbm_bytes: int, compute_fj: int, count: int = 4) -> Step:
    per = ((Ref.level("hbm"), hbm_bytes // count),)
    return Step("gemm", count, per, (), compute_ps, 0, 2, 0, ((Ref.level("hbm"), hbm_bytes),), (),
                compute_fj=compute_fj)


@given(compute_ps=st.integers(1, 10**9), hbm=st.integers(0, 10**9), fj=st.integers(0, 10**15),
       budget=st.integers(1, 10**6))
def test_a_throttled_chunk_draws_at_most_the_budget_and_is_never_sped_up(compute_ps, hbm, fj, budget):
    step = _step(compute_ps, hbm * 4, fj)
    out = power.throttle(A100, step, budget)
    assert out.compute_ps >= step.compute_ps
    assert out.compute_ps - out.throttle_ps == step.compute_ps
    pace = power.chunk_pace(A100, out)
    assert power.step_energy(A100, out) / out.count <= budget * pace  # fJ <= mW x ps
    if out.throttle_ps:  # slowed no more than it takes to fit
        assert power.step_energy(A100, out) / out.count > budget * (pace - 1)


def test_no_cap_and_no_compute_mean_no_throttle():
    step = _step(1000, 10**6, 10**12)
    assert power.throttle(A100, step, 0) is step
    copy = dataclasses.replace(step, compute_ps=0)
    assert power.throttle(A100, copy, 1) is copy
    uncapped = dataclasses.replace(A100, power=hardware.PowerSpec())
    assert power.budget_mw(uncapped) == 0
    assert power.budget_mw(A100) == 400_000 - 80_000
    assert power.budget_mw(A100, 0.25) == 80_000


def test_a_cap_at_or_below_static_power_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="execution.power_cap.*static"):
        simulate("a100-80gb-sxm", "gpt2", set={"execution.power_cap": "80 W"})
    with pytest.raises(ConfigError, match="power.tdp"):
        simulate("a100-80gb-sxm", "gpt2", set={"power.tdp": "50 W"})


@pytest.mark.parametrize("preset", GPUS)
def test_a_bandwidth_bound_decode_is_not_throttled_at_the_tdp(preset):
    at_tdp = simulate(preset, "llama-2-7b", phase="decode", batch=1, context=2048).summary
    assert "power" not in at_tdp["stall_s"]
    assert at_tdp["avg_power_w"] < at_tdp["power_cap_w"]
    free = simulate(preset, "llama-2-7b", phase="decode", batch=1, context=2048,
                    set={"execution.power_cap": "1 MW"}).summary
    assert free["step_time_s"] == at_tdp["step_time_s"]


CASES = [("a100-80gb-sxm", "prefill", 1), ("h100-sxm", "decode", 1), ("h100-sxm", "prefill", 2),
         ("sn40l", "prefill", 1), ("wse-3", "prefill", 1)]


@settings(max_examples=6, deadline=None)
@given(case=st.sampled_from(CASES), fractions=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=4))
def test_lowering_the_cap_never_speeds_a_run_up_and_average_power_stays_under_it(case, fractions):
    preset, phase, tp = case
    chip = hardware.load(preset)
    static, tdp = chip.power.static_mw / 1000, chip.power.tdp_mw / 1000
    times = []
    for f in sorted(set(fractions), reverse=True):  # from the highest cap down
        cap = static + 1 + f * (tdp - static)
        s = simulate(preset, "llama-3.2-1b", phase=phase, batch=4, context=512, prompt=512, tp=tp,
                     set={"execution.power_cap": f"{cap:.3f} W"}).summary
        assert s["avg_power_w"] / s["chips"] <= cap * (1 + 1e-9), (cap, s["avg_power_w"])
        times.append(s["step_time_s"])
    assert times == sorted(times)


def test_a_capped_prefill_is_throttled_and_says_so():
    full = simulate("a100-80gb-sxm", "llama-2-7b", phase="prefill", batch=1, prompt=2048).summary
    capped = simulate("a100-80gb-sxm", "llama-2-7b", phase="prefill", batch=1, prompt=2048,
                      set={"execution.power_cap": "200 W"}).summary
    assert capped["stall_s"]["power"] > 0
    assert capped["step_time_s"] > full["step_time_s"] * 1.3
    assert capped["avg_power_w"] <= 200 and capped["peak_power_w"] <= 200 * 1.001
    assert capped["compute_busy_s"] == pytest.approx(full["compute_busy_s"], rel=1e-6)

"""The power cap as a clock: whole runs under caps, on every family."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim import engine, hardware, mapping, simulate
from memsim.core.errors import ConfigError, MemsimWarning
from memsim.report.summary_records import ABSENT
from memsim.run import powercap
from memsim.run import table as console_table
from memsim.workload import StepSpec, build_step, model_config
from tests.conftest import warned

GPUS = [p for p in hardware.presets() if hardware.load(p).family == "gpu"]


def test_a_cap_at_or_below_static_power_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"execution.power_cap.*static"):
        simulate("a100-80gb-sxm", "gpt2", set={"execution.power_cap": "80 W"})
    with pytest.raises(ConfigError, match=r"power.tdp"):
        simulate("a100-80gb-sxm", "gpt2", set={"power.tdp": "50 W"})


@pytest.mark.parametrize("preset", GPUS)
def test_a_bandwidth_bound_decode_runs_at_full_clock_at_the_tdp(preset):
    spills = preset.startswith("wormhole")  # 13.5 GB of bf16 weights past a Wormhole's 12 GB
    with warned(when=spills):
        at_tdp = simulate(preset, "llama-2-7b", phase="decode", batch=1, context=2048).summary
    assert "power" not in at_tdp.stall_s and not at_tdp.power_limited and at_tdp.clock == 1
    assert at_tdp.chip_power_w < at_tdp.power_cap_w
    with warned(when=spills):
        free = simulate(preset, "llama-2-7b", phase="decode", batch=1, context=2048,
                        set={"execution.power_cap": "1 MW"}).summary
    assert free.step_time_s == at_tdp.step_time_s


def _counted(chip, graph):
    """powercap.run on ``graph``, and how many steps it simulated."""
    runs = []

    def execute(plan):
        runs.append(plan.clock)
        return engine.run(plan)

    plan, result = powercap.run(chip, lambda at: mapping.make_plan(graph, at), execute)
    return plan, result, runs


def test_a_run_within_its_cap_is_simulated_once_and_one_over_it_bisects_the_clock_grid():
    chip = hardware.load("a100-80gb-sxm")
    graph = build_step(model_config("gpt2"), StepSpec.make("prefill", batch=1, prompt=256))
    plan, _, runs = _counted(chip, graph)
    assert runs == [1.0] and plan.clock == 1
    capped = dataclasses.replace(chip, execution=dataclasses.replace(chip.execution, power_cap_mw=100_000))
    plan, result, runs = _counted(capped, graph)
    grid = mapping.power.clocks(chip.power)
    assert len(runs) <= 2 + (len(grid) - 1).bit_length() and plan.clock < 1
    assert powercap.fits(plan, result)
    above = grid[[float(f) for f in grid].index(plan.clock) + 1]
    assert float(above) in runs, "the next clock up was simulated, and did not fit"


CASES = [("a100-80gb-sxm", "gpt2", "prefill", {}), ("h100-sxm", "llama-3.2-1b", "prefill", {"tp": 2}),
         ("h100-sxm", "llama-3.2-1b", "decode", {"batch": 64}), ("sn40l", "gpt2", "prefill", {}),
         ("groq-lpu", "gpt2", "prefill", {"tp": 2, "weight_dtype": "int8"}), ("wse-3", "gpt2", "prefill", {}),
         ("xeon-gold-6242", "gpt2", "prefill", {}), ("tpu-v5e", "gpt2", "prefill", {})]


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(case=st.sampled_from(CASES), fractions=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=3, unique=True))
def test_a_higher_cap_never_lowers_the_clock_nor_slows_a_step(case, fractions):
    """On every family: the clock chosen rises with the cap (the bisection's probes depend on the
    cap only through whether a clock fits), and a step is never slower at a higher clock."""
    preset, model, phase, kw = case
    chip = hardware.load(preset)
    static, tdp = chip.power.static_mw / 1000, chip.power.tdp_mw / 1000
    runs = []
    for f in sorted(fractions):
        cap = static + 1 + f * (tdp - static)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", MemsimWarning)
            s = simulate(preset, model, phase=phase, batch=kw.get("batch", 1), prompt=256, context=256,
                         set={"execution.power_cap": f"{cap:.3f} W"},
                         **{k: v for k, v in kw.items() if k != "batch"}).summary
        said = [str(w.message) for w in caught]
        # it warns of an unmet cap exactly where the summary reports one (and of nothing else)
        assert [("is not held" in line) for line in said] == ([True] if s.power_cap_unmet_w is not ABSENT else []), said
        if s.clock > power_floor(chip):  # a clock that fits was found: the chip is within its cap
            assert s.chip_power_w <= cap
        # over the cap only at the lowest clock, and never in silence
        assert (s.power_cap_unmet_w is ABSENT) == (s.chip_power_w <= cap)
        if s.power_cap_unmet_w is not ABSENT:
            assert s.clock == power_floor(chip) and s.power_cap_unmet_w == pytest.approx(s.chip_power_w - cap)
        assert s.power_limited == (s.clock < 1) and s.power_cap_w == pytest.approx(cap, abs=1e-3)
        runs.append(s)
    assert [s.clock for s in runs] == sorted(s.clock for s in runs)
    times = [s.step_time_s for s in runs]
    assert times == sorted(times, reverse=True), times


def power_floor(chip) -> float:
    return float(mapping.power.clocks(chip.power)[0])


def test_a_cap_no_clock_can_hold_is_reported_never_exceeded_in_silence(recwarn):
    """h100-sxm at 150 W (its static power 70 W) over a prefill: at the lowest clock the limiter sets its
    HBM and static power alone draw more. The step runs there, and the summary, the console and a
    warning say by how much it stays over the cap."""
    r = simulate("h100-sxm", "llama-3.2-1b", phase="prefill", prompt=256, sensitivity=0,
                 set={"execution.power_cap": "150 W"})
    s = r.summary
    grid = mapping.power.clocks(r.chip.power)
    assert s.clock == float(grid[0]) and s.chip_power_w > 150
    assert s.power_cap_unmet_w == pytest.approx(s.chip_power_w - 150)
    assert "power_cap_unmet_w" in s.as_dict()
    line = next(str(w.message) for w in recwarn if "not held" in str(w.message))
    assert "150 W" in line and f"{s.power_cap_unmet_w:.1f} W above" in line
    assert "still over the cap" in console_table.table(s)
    held = simulate("h100-sxm", "llama-3.2-1b", phase="prefill", prompt=256, sensitivity=0,
                    set={"execution.power_cap": "400 W"}).summary
    assert held.power_cap_unmet_w is ABSENT and "power_cap_unmet_w" not in held.as_dict()
    gen = simulate("h100-sxm", "llama-3.2-1b", phase="generate", prompt=64, generate=4, sensitivity=0,
                   set={"execution.power_cap": "150 W"}).summary
    assert gen.power_cap_unmet_w == pytest.approx(gen.chip_power_w - 150)  # the worst step's


def test_a_capped_prefill_lowers_its_clock_and_voltage_and_says_so():
    """Llama-2-7B prefill of 2048 tokens on h100-sxm: at 400 W the clock falls, energy per FLOP falls
    with the voltage squared, and the step is at most 1.3 times as long as at 700 W (it was 1.48
    with the energy per FLOP held fixed)."""
    full = simulate("h100-sxm", "llama-2-7b", phase="prefill", batch=1, prompt=2048).summary
    capped = simulate("h100-sxm", "llama-2-7b", phase="prefill", batch=1, prompt=2048,
                      set={"execution.power_cap": "400 W"}).summary
    assert full.clock == 1 and not full.power_limited and full.clock_mhz == 1830
    assert capped.power_limited and capped.clock < 1
    assert capped.clock_mhz == pytest.approx(capped.clock * 1830)
    assert capped.stall_s["power"] > 0 and capped.chip_power_w <= 400
    assert full.step_time_s < capped.step_time_s <= 1.3 * full.step_time_s
    assert capped.energy_j.compute < full.energy_j.compute
    # the compute rows are the work at full clock; what the lower clock added is the power stall
    assert capped.compute_busy_s == pytest.approx(full.compute_busy_s, rel=1e-3)


def test_a_generation_reports_its_lowest_clock():
    g = simulate("a100-80gb-sxm", "gpt2", phase="generate", batch=8, prompt=256, generate=4, samples=2,
                 set={"execution.power_cap": "150 W"}).summary
    prefill = simulate("a100-80gb-sxm", "gpt2", phase="prefill", batch=8, prompt=256,
                       set={"execution.power_cap": "150 W"}).summary
    assert g.clock <= prefill.clock < 1 and g.power_limited
    assert g.chip_power_w >= prefill.chip_power_w

"""More SRAM, more bandwidth on any level or link, or a higher power cap never makes a step
slower, on a preset of every family (issue 19).

The general statements and their bounds are tested elsewhere: with one stream at a time more
bandwidth is never slower (``test_properties``); with concurrent streams the engine is a list
scheduler, so only Graham's bound holds in general (``test_properties_concurrent``); more SRAM
is never slower (``test_properties_sram``); a higher cap never lowers the clock (``test_powercap``). Here the presets
themselves are checked: for every family (gpu, cpu, rdu: SN40L and Groq, wafer) and small
models, each of its levels' and links' bandwidths, its SRAM and its power cap grown by a factor.
The examples are drawn deterministically (``derandomize``), so the suite checks the same cases
on every run; every one of them is asserted strictly.
"""
from __future__ import annotations

import os
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsim import CapacityError, hardware, simulate
from memsim.core.errors import ConfigError, MemsimWarning

# preset -> (model, run options that make it fit)
CASES = {
    "h100-sxm": [("llama-3.2-1b", {}), ("gpt2", {"tp": 2})],
    "xeon-gold-6242": [("gpt2", {})],
    "sn40l": [("llama-3.2-1b", {}), ("gpt2", {"tp": 2})],
    "groq-lpu": [("gpt2", {"weight_dtype": "int8", "tp": 2})],
    "wse-3": [("llama-3.2-1b", {}), ("gpt2", {"pp": 2})],
    "tpu-v5e": [("gpt2", {"tp": 4})],
}
FAMILIES = {hardware.load(hw).family for hw in CASES}


def knobs(hw: str) -> list[tuple[str, str]]:
    """(what grows, its --set path): the SRAM, every level's and link's bandwidth, the power cap."""
    chip = hardware.load(hw)
    out = [("capacity", "sram.capacity")]
    out += [("bandwidth", f"levels.{lvl.name}.bandwidth") for lvl in chip.levels]
    out += [("bandwidth", f"links.{lk.name}.bandwidth") for lk in chip.links]
    return [*out, ("cap", "execution.power_cap")]


def grown(hw: str, path: str, factor: float) -> str:
    chip = hardware.load(hw)
    if path == "sram.capacity":
        return f"{int(chip.scratchpad.capacity_bytes * factor)} B"
    if path == "execution.power_cap":
        return f"{chip.power_cap_mw * factor / 1000:g} W"
    kind, name, _ = path.split(".")
    item = chip.level(name) if kind == "levels" else chip.link(name)
    return f"{int(item.bandwidth_bytes_per_s * factor)} B/s"


@st.composite
def cases(draw):
    hw = draw(st.sampled_from(sorted(CASES)))
    model, options = draw(st.sampled_from(CASES[hw]))
    phase = draw(st.sampled_from(["decode", "prefill"]))
    options = {**options, "phase": phase, ("context" if phase == "decode" else "prompt"): draw(st.integers(16, 512))}
    kind, path = draw(st.sampled_from(knobs(hw)))
    low = draw(st.sampled_from([0.25, 0.5, 1.0]))  # the cap low enough to bind, now and then
    return hw, model, options, kind, path, low, draw(st.sampled_from([1.5, 2.0, 4.0]))


def step(hw: str, model: str, options: dict, sets: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemsimWarning)
        return simulate(hw, model, set=sets, **options)


def test_every_family_is_covered():
    assert FAMILIES == {"gpu", "cpu", "rdu", "wafer"}


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("MEMSIM_EXAMPLES", "40")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_growing_a_resource_never_makes_a_preset_slower(case):
    hw, model, options, kind, path, low, factor = case
    base = {path: grown(hw, path, low)} if kind == "cap" else {}
    try:
        before = step(hw, model, options, base)
    except (CapacityError, ConfigError):
        return  # a case that does not fit, or a cap at or below static power: nothing to compare
    after = step(hw, model, options, {path: grown(hw, path, low * factor if kind == "cap" else factor)})
    t0, t1 = before.summary.step_time_s, after.summary.step_time_s
    assert t1 <= t0, (t0, t1)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_growing_a_resource_never_makes_a_preset_slower_on_a_few_cases(case):
    """The default run's few cases of the property above, which the slow run searches in full."""
    test_growing_a_resource_never_makes_a_preset_slower.hypothesis.inner_test(case)

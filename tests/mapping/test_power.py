"""A chip at a lower clock: the clock grid, the voltage curve, the scaled figures and the throttle marks."""
from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.hardware.spec import PowerSpec
from memsim.mapping import make_plan, power
from memsim.workload import StepSpec, build_step, model_config

PRESETS = hardware.presets()
A100 = hardware.load("a100-80gb-sxm")


@pytest.mark.parametrize("preset", PRESETS)
def test_the_clock_grid_rises_from_the_lowest_clock_to_the_maximum(preset):
    spec = hardware.load(preset).power
    grid = power.clocks(spec)
    assert list(grid) == sorted(set(grid)) and grid[-1] == 1 and grid[0] > 0
    if spec.min_clock_hz:
        assert grid[0] == Fraction(spec.min_clock_hz, spec.max_clock_hz)
    step = spec.clock_step_hz or spec.max_clock_hz / power.GRID_STEPS
    assert all(b - a <= Fraction(step) / spec.max_clock_hz for a, b in itertools.pairwise(grid))


def test_a100_clocks_are_nvidia_s_15_mhz_steps_from_210_to_1410_mhz():
    grid = power.clocks(A100.power)
    assert len(grid) == 81 and [int(f * 1410) for f in grid[:2]] == [210, 225]


def test_a_chip_without_clocks_steps_in_sixty_fourths():
    assert power.clocks(PowerSpec()) == tuple(Fraction(k, 64) for k in range(1, 65))
    assert power.voltage(PowerSpec(), Fraction(1, 2)) == 1.0


@pytest.mark.parametrize("preset", PRESETS)
def test_the_voltage_is_its_floor_up_to_the_ridge_then_rises_to_one(preset):
    spec = hardware.load(preset).power
    grid = power.clocks(spec)
    volts = [power.voltage(spec, f) for f in grid]
    assert volts == sorted(volts) and volts[-1] == pytest.approx(1.0)
    ridge = Fraction(spec.ridge_clock_hz, spec.max_clock_hz)
    assert all(v == spec.floor_voltage for f, v in zip(grid, volts) if f <= ridge)
    assert all(v > spec.floor_voltage for f, v in zip(grid, volts) if f > ridge)


@given(preset=st.sampled_from(PRESETS), k=st.integers(0, 10**6))
def test_a_lower_clock_slows_the_core_and_cheapens_its_work_and_leaves_the_rest(preset, k):
    chip = hardware.load(preset)
    grid = power.clocks(chip.power)
    f = grid[k % len(grid)]
    slow = power.at_clock(chip, f)
    squared = power.voltage(chip.power, f) ** 2
    for (_d, p), (_, q) in zip(chip.compute.peak_flops_per_s, slow.compute.peak_flops_per_s):
        assert q == max(1, math.floor(p * f)) and q <= p
    for (_d, e), (_, g) in zip(chip.compute.energy_fj_per_flop, slow.compute.energy_fj_per_flop):
        assert g == round(e * squared) and g <= e
    for lvl, low in zip(chip.levels, slow.levels):
        if lvl.kind_of.clock == "core":
            assert low.bandwidth_bytes_per_s <= lvl.bandwidth_bytes_per_s and low.latency_ps >= lvl.latency_ps
            assert low.energy_fj_per_bit == round(lvl.energy_fj_per_bit * squared)
        else:  # off-chip memory keeps its own clock and voltage
            assert low == lvl
    for link, low in zip(chip.links, slow.links):
        assert (low == link) == (link.name != chip.execution.fabric or f == 1)
    assert slow.power == chip.power and slow.execution == chip.execution
    assert power.at_clock(chip, Fraction(1)) is chip


@pytest.mark.slow
@given(k=st.integers(0, 80))
def test_a_throttled_plan_marks_the_compute_time_its_clock_added(k):
    f = power.clocks(A100.power)[k]
    graph = build_step(model_config("gpt2"), StepSpec.make("prefill", batch=1, prompt=64))
    full = make_plan(graph, A100)
    slow = power.throttled(make_plan(graph, power.at_clock(A100, f)), f)
    assert slow.clock == float(f)
    for fast_task, task in zip(full.tasks, slow.tasks):
        for fast, step in zip(fast_task.steps, task.steps):
            assert step.compute_ps - step.throttle_ps == math.ceil(step.compute_ps * f)
            assert step.compute_ps - step.throttle_ps - step.feed_ps >= 0  # the busy part: what neither clock nor feed added
            assert step.compute_ps >= fast.compute_ps  # a lower clock never computes faster
    assert power.throttled(full, Fraction(1)) is full


def test_clock_fields_are_checked_naming_the_field():
    with pytest.raises(ConfigError, match=r"power.max_clock"):
        PowerSpec(ridge_clock_hz=10**9)
    with pytest.raises(ConfigError, match=r"power.min_clock"):
        PowerSpec(max_clock_hz=10**9, min_clock_hz=2 * 10**9)
    with pytest.raises(ConfigError, match=r"power.ridge_clock"):
        PowerSpec(max_clock_hz=10**9, min_clock_hz=5 * 10**8, ridge_clock_hz=10**8)
    with pytest.raises(ConfigError, match=r"power.floor_voltage"):
        dataclasses.replace(A100.power, floor_voltage=0.0)

"""Weight prefetch: the part of a GEMM's weights that fits its share of the staging area."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim import hardware, simulate
from memsim.core.units import PS_PER_S
from memsim.engine.resources import ChipResources
from memsim.engine.simpy_fast import Environment
from memsim.hardware.rates import effective_bandwidth as bandwidth_of
from memsim.hardware.resource import Ref
from memsim.mapping import make_plan, tiling
from memsim.mapping.lower import Context, gemm_compute_ps, lower_matmul, staging
from memsim.mapping.placement import sram_split
from memsim.mapping.prefetch import GRAIN, Prefetcher, grain, kept, part_bytes
from memsim.run.api import resolve
from memsim.run.steps import load_workload

HBM = Ref.level("hbm")
UNCAPPED = {"execution.power_cap": "100000W"}  # power out of the way: times are the bytes' and rates'


def _staged(sram: str, op: str = "L0.gate_up"):
    chip = hardware.load("sn40l", [("sram.capacity", sram)])
    g = load_workload(resolve(model="llama-3.1-8b", context=64))
    homes = {t.name: "hbm" if t.klass != "activation" else "sram" for t in g.tensors.values()}
    room, staging = sram_split(g, chip, homes)
    cx = Context(chip, g, homes, staging_bytes=staging, room_bytes=room)
    task, staged_cx = Prefetcher().stage(g.ops[op], cx, 0, op)
    return chip, g, cx, task, staged_cx


def test_a_gemm_larger_than_its_share_prefetches_the_part_that_fits():
    """Llama-3.1-8B's gate/up weights (224 MiB) on sn40l with 64 MiB of SRAM: 32 MiB of staging,
    two GEMMs' worth at a time, so 16 MiB are prefetched and 208 MiB stream from HBM."""
    chip, g, cx, task, staged_cx = _staged("64MiB")
    weights = g.tensors["L0.gate_up.weight"].bytes
    part = part_bytes(cx, weights)
    assert part == 16 * 2**20 == cx.staging_bytes // chip.execution.prefetch_depth
    assert task.acquires == part and task.steps[0].total_loads == ((Ref.level("hbm"), part),)
    (step,) = lower_matmul(g.ops["L0.gate_up"], staged_cx)
    (plain,) = lower_matmul(g.ops["L0.gate_up"], cx)
    loads, before = dict(step.total_loads), dict(plain.total_loads)
    assert loads[Ref.level("hbm")] == before[Ref.level("hbm")] - part  # the rest streams as before
    assert loads[Ref.level("sram")] == before[Ref.level("sram")] + part
    assert step.tile == plain.tile and step.compute_ps == plain.compute_ps


@pytest.mark.parametrize("sram", ["1MiB", "7MiB", "520MB", "4GiB"])
def test_a_part_is_all_the_weights_or_whole_grains_of_them(sram):
    """A part is cut in whole grains, so that a larger one does not round every chunk up; a
    GEMM stages what its share holds of what it does not leave to stream (``kept``)."""
    chip, g, cx, task, _staged_cx = _staged(sram, "L0.o_proj")
    weights = g.tensors["L0.o_proj.weight"].bytes
    share = cx.staging_bytes // chip.execution.prefetch_depth
    unit = grain(chip, HBM)
    assert unit % GRAIN == 0
    part = part_bytes(cx, weights + 1, unit)
    assert part == weights + 1 if weights + 1 <= share else part % unit == 0 and part <= share
    keep = kept(weights, gemm_compute_ps(g.ops["L0.o_proj"], cx), bandwidth_of(chip, HBM),
                bandwidth_of(chip, staging(chip)), chip.level("hbm").latency_ps - chip.level("sram").latency_ps, unit)
    assert 0 < keep < weights and keep % unit == 0  # o_proj's compute outlasts HBM's latency on sn40l
    assert (task.acquires if task is not None else 0) == part_bytes(cx, weights - keep, unit)


@pytest.mark.parametrize("hw", ["sn40l", "wse-3", "h100-sxm", "wormhole-n150"])
@pytest.mark.parametrize("share", [1.0, 0.5, 0.3])
def test_a_grain_moved_between_copy_and_stream_is_whole_picoseconds(hw, share):
    """A grain of a level's bytes is whole picoseconds on every channel the engine stripes a
    step's transfer over (and on the link the level is reached over), and whole bytes over the
    copy's transfers and the GEMM's chunks: a part a grain larger and a stream a grain smaller
    round nothing differently, so staging more never costs a picosecond of rounding."""
    chip = hardware.load(hw)
    res = ChipResources(Environment(), chip, 0)
    for level in chip.levels:
        if level.is_scratchpad:
            continue
        unit, server = grain(chip, Ref.level(level.name), share), res.ports[Ref.level(level.name)]
        assert unit % GRAIN == 0
        if unit == GRAIN:  # a level whose picosecond needs more than MAX_GRAIN bytes: not exact
            continue
        ways = [(server, share)] + ([(server.via, 1.0)] if server.via is not None else [])
        for s, of in ways:  # the level's channels, then the link it is reached over
            assert s.duration(unit, of) % tiling.CHUNKS == 0
            for nbytes in (1, 12345, 7 * 2**20 + 3, 3 * 10**9 + 1):
                assert s.duration(nbytes + 5 * unit, of) - s.duration(nbytes, of) == 5 * s.duration(unit, of)


RATE, SRAM_RATE = 10**12, 50 * 10**12  # bytes/s: a home level and the SRAM


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**10), st.integers(0, 10**9), st.integers(0, 10**6))
def test_a_gemm_leaves_to_stream_what_its_work_hides(total, compute_ps, later_ps):
    """What a GEMM leaves to stream from home is all its weights, none, or whole grains that the
    stream needs at least as long as its compute and its read of the staged rest from SRAM; it
    stages all of them only where that read and its compute take no longer than the home
    level's latency over the SRAM's, which is what streaming any of them would add."""
    keep = kept(total, compute_ps, RATE, SRAM_RATE, later_ps)
    stream_ps = keep * PS_PER_S / RATE
    if keep == 0:
        assert max(compute_ps, total * PS_PER_S // SRAM_RATE) <= later_ps
    elif keep < total:
        assert keep % GRAIN == 0
        assert stream_ps >= compute_ps and stream_ps >= (total - keep) * PS_PER_S / SRAM_RATE
        assert (keep - GRAIN) * PS_PER_S / RATE < max(compute_ps, (total - keep + GRAIN) * PS_PER_S / SRAM_RATE)
    else:
        assert keep == total and total - GRAIN < max(compute_ps * RATE / PS_PER_S, total * RATE / (RATE + SRAM_RATE)) \
            + 1  # what it must stream is within a grain of them all


def test_every_prefetch_is_given_back_by_the_gemm_that_used_it():
    """The copy stream's accounting: what each prefetch takes of the staging area, the GEMM that
    reads the weights releases, whether the weights were staged whole or in part."""
    plan = make_plan(load_workload(resolve(model="llama-3.2-1b", context=64, tp=2)),
                     hardware.load("sn40l", [("sram.capacity", "48MiB")]))
    tasks = {t.op: t for t in plan.tasks}
    prefetches = [t for t in plan.tasks if t.acquires]
    sizes = {t.acquires for t in prefetches}
    assert len(sizes) > 1 and max(sizes) == plan.staging_of(0) // plan.chip.execution.prefetch_depth  # some in part
    for p in prefetches:
        (user,) = [t for t in plan.tasks if p.op in t.deps and t.releases]
        assert user.releases == p.acquires and tasks[user.op].kind == "matmul"
    assert sum(t.acquires for t in plan.tasks) == sum(t.releases for t in plan.tasks)


@pytest.mark.slow
def test_the_70b_decode_on_small_or_large_sram_is_hbm_bound_alike():
    """sn40l, Llama-3.1-70B decode on 16 chips (issue 19). Its all-reduces take a few µs (two-shot,
    no launch inside the fused kernel), so HBM streams the weights almost all the time and the
    copy stream's staging area decides little: both SRAM sizes move the same HBM bytes, HBM is the
    largest stall, and the larger SRAM is faster by at most 2%. (With 50 µs all-reduces, as before
    issue 19, the staging area decided 3 ms: the copy stream could fetch only S bytes while an
    all-reduce ran.)"""
    def step(sram: str) -> dict:
        return simulate("sn40l", "llama-3.1-70b", tp=16, context=1024, set={**UNCAPPED, "sram.capacity": sram}).summary

    small, large = step("32MiB"), step("128MiB")
    assert small.bytes_per_level["hbm"] == large.bytes_per_level["hbm"]
    for s in (small, large):
        assert max(s.stall_s, key=s.stall_s.get) == "hbm" and s.roofline_bound == "hbm"
    assert 0 <= small.step_time_s - large.step_time_s <= 0.02 * large.step_time_s

"""Weight prefetch: the part of a GEMM's weights that fits its share of the staging area."""
from __future__ import annotations

import pytest

from memsim import hardware, simulate
from memsim.api import load_workload, resolve
from memsim.hardware.resource import Ref
from memsim.mapping import make_plan
from memsim.mapping.lower import Context, lower_matmul
from memsim.mapping.placement import sram_split
from memsim.mapping.prefetch import GRAIN, Prefetcher, part_bytes

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
    """A part is cut in whole grains, so that a larger one does not round every chunk up; weights
    that fit are staged whole, biases and all (a bias left behind would pay a latency for bytes)."""
    chip, g, cx, task, staged_cx = _staged(sram, "L0.o_proj")
    weights = g.tensors["L0.o_proj.weight"].bytes
    share = cx.staging_bytes // chip.execution.prefetch_depth
    part = part_bytes(cx, weights + 1)
    assert part == weights + 1 if weights + 1 <= share else part % GRAIN == 0 and part <= share
    assert (task.acquires if task is not None else 0) == part_bytes(cx, weights)


def test_every_prefetch_is_given_back_by_the_gemm_that_used_it():
    """The copy stream's accounting: what each prefetch takes of the staging area, the GEMM that
    reads the weights releases, whether the weights were staged whole or in part."""
    plan = make_plan(load_workload(resolve(model="llama-3.2-1b", context=64, tp=2)),
                     hardware.load("sn40l", [("sram.capacity", "48MiB")]))
    tasks = {t.op: t for t in plan.tasks}
    prefetches = [t for t in plan.tasks if t.acquires]
    sizes = {t.acquires for t in prefetches}
    assert len(sizes) > 1 and max(sizes) == plan.staging_bytes // plan.chip.execution.prefetch_depth  # some in part
    for p in prefetches:
        (user,) = [t for t in plan.tasks if p.op in t.deps and t.releases]
        assert user.releases == p.acquires and tasks[user.op].kind == "matmul"
    assert sum(t.acquires for t in plan.tasks) == sum(t.releases for t in plan.tasks)


def test_the_70b_gap_between_small_and_large_sram_is_what_the_bytes_say():
    """sn40l, Llama-3.1-70B decode on 16 chips (issue 19): with S bytes of staging, the copy stream
    can fetch at most S bytes while an all-reduce runs (the running GEMMs gave theirs back), and the
    rest of a layer's weights stream in front of the compute. Per layer: 8.4 MB o_proj, 10.5 MB qkv,
    58.7 MB gate/up and 29.4 MB down, 107 MB in all, and two all-reduces. With 16 MiB of staging
    (32 MiB of SRAM) 2 x 16.8 MB per layer can be hidden, 73.4 MB cannot; with 64 MiB (128 MiB of
    SRAM) all but the 25.2 MB of gate/up beyond its 32 MiB share. The 80 layers at 1.28 TB/s
    differ by (73.4 - 25.2) MB x 80 / 1.28 TB/s = 3.0 ms."""
    def step_ms(sram: str) -> float:
        s = simulate("sn40l", "llama-3.1-70b", tp=16, context=1024, set={**UNCAPPED, "sram.capacity": sram})
        return s.summary["step_time_s"] * 1e3

    small, large = step_ms("32MiB"), step_ms("128MiB")
    assert large < small
    assert small - large == pytest.approx(3.0, abs=0.3)

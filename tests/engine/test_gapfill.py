"""Gap filling: fast-forward of a step whose gaps on a shared level a prefetch fills."""
from __future__ import annotations

import dataclasses

import pytest

from memsim import engine
from memsim.engine import gapfill
from memsim.hardware.resource import Ref
from memsim.mapping.lower import make_step
from memsim.mapping.plan import OpTask, Plan
from memsim.mapping.prefetch import copy_step


def _plan(chip, prefetch_bytes: int) -> Plan:
    """A compute-bound operator that reads a little HBM per chunk, beside a large prefetch from HBM."""
    hbm = Ref.level("hbm")
    work = make_step("gemm", {hbm: 256 * 4000}, {}, busy_ps=4000 * 30_000, flops=0, depth=2, sram_bytes=1024)
    copy = copy_step("prefetch", {hbm: prefetch_bytes}, None, depth=2)
    tasks = (OpTask(op="copy", kind="prefetch", layer=0, flops=0, overhead_ps=0, steps=(copy,), deps=(), bound=hbm,
                    stream="copy"),
             OpTask(op="work", kind="matmul", layer=0, flops=0, overhead_ps=0, steps=(work,), deps=(), bound=None))
    return Plan(chip=chip, tasks=tasks, homes=(), roofline_s=0.0, roofline_bound="compute", compulsory_bytes=())


@pytest.mark.parametrize("prefetch_bytes", [16 << 20, 1 << 20])  # outlasts the operator, or ends during it
def test_a_prefetch_in_the_gaps_is_skipped_over_exactly(tiny_chip, prefetch_bytes, monkeypatch):
    chip = dataclasses.replace(tiny_chip, execution=dataclasses.replace(tiny_chip.execution,
                                                                        streams=("compute", "copy")))
    fills = []
    fill = gapfill.fill
    monkeypatch.setattr(gapfill, "fill", lambda *a: fills.append(a) or fill(*a))
    fast = engine.run(_plan(chip, prefetch_bytes))
    full = engine.run(_plan(chip, prefetch_bytes), fast_forward=False, memoize=False)
    assert fills  # the operator's cycles were skipped with the prefetch served in their gaps
    assert fast.end_ps == full.end_ps
    assert sorted(fast.spans) == sorted(full.spans)  # the prefetch ends when it would have
    assert fast.bytes_read == full.bytes_read and fast.busy_ps == full.busy_ps
    assert fast.events < full.events / 5


def test_drift_needs_the_same_transfer_progressing_steadily():
    class Use:  # stands for a prefetch request
        pass

    a, b = Use(), Use()
    steady = [((a, 100, True),), ((a, 90, True),), ((a, 80, True),)]
    assert gapfill.drift(steady, 0, 1, None, 10).left == 80
    assert gapfill.drift(steady, 0, 1, None, 5) is None  # it progresses by more than the gap
    assert gapfill.drift([steady[0], steady[1], ((b, 80, True),)], 0, 1, None, 10) is None  # another transfer
    assert gapfill.drift([steady[0], ((a, 90, False),), steady[2]], 0, 1, None, 10) is None  # another phase
    assert gapfill.cycles_left(gapfill.Gap(None, a, 10, 80)) == 6  # it must not finish within the skip

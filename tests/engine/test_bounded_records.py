"""Memory grows with operators, not with chunks: a step's chunks are aggregated as they run.

Every step is cut into ``tiling.CHUNKS`` chunks. The records of a run, chunk by chunk
(shortcuts off), must not grow with that count: a step leaves one compute row standing for all
its chunks, a stall row per cause and a transfer row per level and link, whatever the count.
"""
from __future__ import annotations

import pytest

from memsim import simulate
from memsim.engine.records import COMPUTE
from memsim.mapping import tiling

CASES = {
    "tiny-decode": (None, dict(context=32, batch=2)),
    "tiny-prefill": (None, dict(phase="prefill", prompt=64)),
    "gpu-tp2": ("h100-sxm", dict(context=32, tp=2)),
    "rdu-prefetch": ("sn40l", dict(context=32)),
    "wafer-pipelined": ("wse-3", dict(phase="prefill", prompt=4)),
}


def _records(hw: str, model: str, kw: dict, chunks: int, monkeypatch) -> tuple:
    monkeypatch.setattr(tiling, "CHUNKS", chunks)
    r = simulate(hw, model, fast_forward=False, **kw)
    return r.engine.records, r.plan, r.engine.events


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "wafer-pipelined" else n
                                  for n in sorted(CASES)])
def test_records_do_not_grow_with_the_chunks(name, tiny_chip_path, tiny_model_path, monkeypatch):
    hw, kw = CASES[name]
    hw = hw or str(tiny_chip_path)
    few, plan, few_events = _records(hw, str(tiny_model_path), kw, 16, monkeypatch)
    many, _, many_events = _records(hw, str(tiny_model_path), kw, 2048, monkeypatch)
    assert many_events > 64 * few_events  # the chunks were simulated one by one
    # Stall causes may come and go with the cut; the rows per step do not multiply.
    assert len(many) <= 1.2 * len(few) and len(few) <= 1.2 * len(many)
    assert len(many) <= 10 * len(plan.tasks)
    steps = sum(1 for t in plan.tasks for s in t.steps if s.compute_ps or t.stream == COMPUTE)
    compute = [r for r in many if r.kind == "compute"]
    assert len(compute) <= steps
    assert {r.count for r in compute} == {2048}  # each stands for its step's chunks
    flops = sum(s.flops for t in plan.tasks for s in t.steps)
    assert sum(r.flops for r in compute) == flops  # totals over the chunks


def test_rows_are_totals_over_their_count(tiny_chip_path, tiny_model_path):
    r = simulate(str(tiny_chip_path), str(tiny_model_path), context=32, batch=2, fast_forward=False)
    tl = r.timeline
    hbm = tl[(tl.resource == "hbm") & (tl.kind == "transfer")]
    assert (hbm["count"] == tiling.CHUNKS).all()
    assert hbm.bytes.sum() == r.summary.bytes_per_level["hbm"].total
    assert tl[tl.kind == "compute"].flops.sum() == r.summary.flops_total

"""Summaries that add up, for every family, weight format and mode, with shortcuts on and off.

- per chip, the compute stream's compute and stall rows tile the step, so ``compute_busy_s +
  stall_total_s`` is the step time of every chip simulated (plus, with a ``branch`` stream,
  its compute, which ran while the compute stream waited);
- the bytes of timeline.csv (rows summed, counts included) are summary.json's, per level and link,
  and so is the time its transfer rows held each (``busy_s``; a row holds its resource no longer
  than it spans, as a resource serves one transfer at a time);
- the FLOPs of ops.csv are ``flops_total``;
- no transfer row carries zero bytes;
- fast-forward and replay change nothing in summary.json but the engine's statistics.

A generation's timeline holds its prefill and first decode step, so it is checked against those
two steps simulated on their own, and its summary's busy and stall time against its total.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from memsim import simulate
from tests.conftest import warned

CASES = {
    "gpu-bf16-decode": ("h100-sxm", dict(context=32)),
    "gpu-fp8-decode": ("h100-sxm", dict(context=32, weight_dtype="fp8")),
    "gpu-int8-decode": ("a100-80gb-sxm", dict(context=32, weight_dtype="int8")),
    "gpu-int4-decode": ("a100-80gb-sxm", dict(context=32, weight_dtype="int4")),
    "gpu-int4-prefill": ("a100-80gb-sxm", dict(phase="prefill", prompt=32, weight_dtype="int4")),
    "gpu-tp2-prefill": ("h100-sxm", dict(phase="prefill", prompt=32, tp=2)),
    "gpu-pp2-decode": ("h100-sxm", dict(context=32, pp=2)),
    "gpu-offloaded-over-pcie": ("h100-sxm", dict(context=32, set={"hbm.capacity": "64 KiB"})),
    "gpu-generate": ("h100-sxm", dict(phase="generate", prompt=16, generate=3)),
    "wafer-decode": ("wse-3", dict(context=32)),
    "wafer-prefill-pipelined": ("wse-3", dict(phase="prefill", prompt=4)),
    "wafer-weight-streaming": ("wse-3", dict(context=32, set={"sram.capacity": "64 KiB"})),
    "rdu-decode": ("sn40l", dict(context=32)),
    "rdu-int8-tp2-pp2": ("groq-lpu", dict(context=32, weight_dtype="int8", tp=2, pp=2)),
    "rdu-generate": ("sn40l", dict(phase="generate", prompt=16, generate=3)),
    # GEMMs larger than their share of the staging area prefetch the part that fits
    "rdu-partial-prefetch": ("sn40l", dict(context=32, set={"sram.capacity": "96 KiB"})),
    # weights resident in SRAM beside the reserve for tiles and staging, the rest staged in part
    "rdu-resident-weights": ("sn40l", dict(context=32, set={"sram.capacity": "128 KiB",
                                                            "sram.holds": "weight,activation"})),
    "cpu-decode": ("xeon-gold-6242", dict(context=32)),
    "cpu-int8-decode": ("xeon-gold-6242", dict(context=32, weight_dtype="int8")),
    "gpu-branch-stream": ("h100-sxm", dict(context=32, set={"execution.streams": "compute,branch,copy,comm"},
                                           model="parallel")),
}
SPILLING = {"gpu-offloaded-over-pcie", "wafer-weight-streaming"}  # they warn of it, as they mean to
# A parallel block (GPT-J): its MLP runs on the branch stream, beside the attention.
TINY_PARALLEL = {"model_type": "gptj", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": None, "n_positions": 512,
                 "rotary_dim": 16, "vocab_size": 256}
SHORTCUTS = {"shortcuts": True, "chunk-by-chunk": False}


@pytest.fixture(scope="module")
def models(tiny_model_file, tmp_path_factory) -> dict[str, str]:
    parallel = tmp_path_factory.mktemp("models") / "tiny-gptj.json"
    parallel.write_text(json.dumps(TINY_PARALLEL))
    return {"llama": tiny_model_file, "parallel": str(parallel)}


_RUNS: dict = {}


def run(models: dict[str, str], name: str, shortcuts: bool = True):
    """A case's run, simulated once per session."""
    key = (models["llama"], name, shortcuts)
    if key not in _RUNS:
        hw, kw = CASES[name]
        kw = dict(kw)
        model = models[kw.pop("model", "llama")]
        with warned(when=name in SPILLING):
            _RUNS[key] = simulate(hw, model, fast_forward=shortcuts, **kw)
    return _RUNS[key]


def _tiles(timeline, step_s: float) -> None:
    """Per chip, the compute stream's compute and stall rows cover [0, step_s] without gap or overlap."""
    rows = timeline[(timeline.resource == "compute") & (timeline.stream == "compute")]
    assert set(rows.kind) <= {"compute", "stall"}
    for chip, part in rows.groupby("chip"):
        part = part.sort_values("start_s", kind="stable")
        assert part.start_s.iloc[0] == pytest.approx(0, abs=1e-15), chip
        assert part.start_s.iloc[1:].to_numpy() == pytest.approx(part.end_s.iloc[:-1].to_numpy(), abs=1e-15), chip
        assert part.end_s.iloc[-1] == pytest.approx(step_s, rel=1e-12), chip
        assert (part.end_s - part.start_s).sum() == pytest.approx(step_s, rel=1e-9), chip


def _bytes(summary: dict) -> dict[str, int]:
    out = {name: v.total for name, v in summary.bytes_per_level.items()}
    out.update({f"link:{name}": v.total for name, v in summary.bytes_per_link.items()})
    return {k: v for k, v in out.items() if v}


def _busy(summary: dict) -> dict[str, float]:
    out = {name: v.busy_s for name, v in summary.bytes_per_level.items()}
    out.update({f"link:{name}": v.busy_s for name, v in summary.bytes_per_link.items()})
    return {k: v for k, v in out.items() if v}


def _timeline_bytes(timeline) -> dict[str, int]:
    moved = timeline[timeline.kind == "transfer"].groupby("resource")["bytes"].sum()
    return {k: int(v) for k, v in moved.items()}


def _check_step(r) -> None:
    s, tl = r.summary, r.timeline
    _tiles(tl, s.step_time_s)
    chips = tl[(tl.resource == "compute") & (tl.stream == "compute")].chip.nunique()
    branch = tl[(tl.stream == "branch") & (tl.kind == "compute")]
    assert s.compute_busy_s + s.stall_total_s == \
        pytest.approx(chips * s.step_time_s + (branch.end_s - branch.start_s).sum(), rel=1e-9)
    assert _timeline_bytes(tl) == _bytes(s)
    transfers = tl[tl.kind == "transfer"]
    held = transfers.groupby("resource")["busy_s"].sum()
    assert {k: v for k, v in held.items() if v} == pytest.approx(_busy(s), rel=1e-9)
    assert (transfers.busy_s <= (transfers.end_s - transfers.start_s) * (1 + 1e-12) + 1e-15).all()
    assert (tl[tl.kind != "transfer"].busy_s == 0).all()
    assert r.ops.flops.sum() == s.flops_total
    # Every level and link of every chip was held at most the step (a server serves one request at a time).
    assert all(0 <= u <= 1 for who in s.utilization.values() for u in who.values())


@pytest.mark.parametrize("shortcuts", SHORTCUTS.values(), ids=SHORTCUTS.keys())
@pytest.mark.parametrize("name", sorted(CASES))
def test_summaries_add_up(models, name, shortcuts):
    r = run(models, name, shortcuts)
    model = models["llama"]
    tl, s = r.timeline, r.summary
    transfers = tl[tl.kind == "transfer"]
    assert (transfers.bytes > 0).all(), "a transfer row without bytes"
    assert (tl["count"] >= 1).all()
    if s.workload.phase != "generate":
        _check_step(r)
        return
    hw, kw = CASES[name]
    steps, prompt = kw["generate"], kw["prompt"]
    prefill = simulate(hw, model, phase="prefill", prompt=prompt, fast_forward=shortcuts).summary
    first = simulate(hw, model, phase="decode", context=prompt, fast_forward=shortcuts).summary
    _tiles(tl, s.ttft_s + first.step_time_s)
    both = {k: _bytes(prefill).get(k, 0) + _bytes(first).get(k, 0) for k in _bytes(prefill) | _bytes(first)}
    assert _timeline_bytes(tl) == both
    assert r.ops.flops.sum() == prefill.flops_total + first.flops_total
    assert s.compute_busy_s + s.stall_total_s == pytest.approx(s.total_s, rel=1e-9)
    assert s.total_s == pytest.approx(s.ttft_s + steps * s.tpot_s, rel=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_shortcuts_change_nothing_but_engine_statistics(models, name):
    fast, slow = run(models, name, True).summary, run(models, name, False).summary
    assert dataclasses.replace(fast, engine=slow.engine) == slow
    assert fast.engine.events < slow.engine.events


def test_dequantisation_is_not_compute(models):
    tl = run(models, "gpu-int4-decode").timeline
    dequant = tl[tl.resource == "dequant"]
    assert len(dequant) and set(dequant.kind) == {"dequant"}
    assert not (tl[tl.kind == "compute"].resource == "dequant").any()


def test_transfers_over_the_link_a_level_is_reached_through_are_rows_on_it(models):
    for name, level, link in (("gpu-offloaded-over-pcie", "ddr", "link:pcie"),
                              ("wafer-weight-streaming", "memoryx", "link:io")):
        tl = run(models, name).timeline
        moved = _timeline_bytes(tl)
        assert moved[level] > 0 and moved[link] >= moved[level], name
        assert run(models, name).summary.bytes_per_link[link[5:]].total == moved[link]

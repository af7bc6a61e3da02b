"""Traffic by cause (issue 22, Deliver 2): every level's bytes split into compulsory (what each
operator moves with unlimited SRAM: each operand once) and capacity (the re-fetches its tiles add
because SRAM is finite), in summary.json and ops.csv."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsim import CapacityError, simulate
from memsim.run import table as console_table

UNCAPPED = {"execution.power_cap": "100000W"}


def run(hw: str, model: str, phase: str, kib: int, **dims: int):
    try:
        return simulate(hw, model, phase=phase, sensitivity=0, set={**UNCAPPED, "sram.capacity": f"{kib}KiB"},
                        **dims)
    except CapacityError:
        return None  # too small an SRAM for a tile


def split(result) -> dict[str, tuple[int, int, int]]:
    return {name: (v.compulsory, v.capacity, v.total) for name, v in result.summary.bytes_per_level.items()}


@st.composite
def cases(draw):
    hw = draw(st.sampled_from(["h100-sxm", "a100-80gb-sxm"]))
    model = draw(st.sampled_from(["gpt2", "llama-3.2-1b"]))
    phase = draw(st.sampled_from(["decode", "prefill"]))
    dims = {"batch": draw(st.integers(1, 8))}
    dims["context" if phase == "decode" else "prompt"] = draw(st.integers(1, 1024))
    small = draw(st.integers(64, 4096))
    return hw, model, phase, small, small + draw(st.integers(1, 65536)), dims


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_compulsory_bytes_hold_and_capacity_bytes_only_fall_as_sram_grows(case):
    """On a GPU (whose scratchpad is no home for tensors, so placement does not follow the SRAM):
    compulsory bytes do not depend on SRAM capacity, capacity bytes never grow with it, and the
    two add up to each level's total."""
    hw, model, phase, small, large, dims = case
    before = run(hw, model, phase, small, **dims)
    if before is None:
        return
    after = run(hw, model, phase, large, **dims)
    assert after is not None
    a, b = split(before), split(after)
    for level in a:
        assert a[level][0] + a[level][1] == a[level][2] and b[level][0] + b[level][1] == b[level][2]
        assert a[level][0] == b[level][0], (level, a[level], b[level])
        assert b[level][1] <= a[level][1], (level, a[level], b[level])


@pytest.mark.parametrize("hw,model,kw", [
    ("sn40l", "llama-3.1-8b", {"context": 1024}),
    ("wse-3", "llama-3.1-8b", {"phase": "prefill", "prompt": 128}),
    ("h100-sxm", "gpt2", {"context": 128, "tp": 2, "pp": 2}),
])
def test_every_family_splits_each_level_whole(hw, model, kw):
    r = simulate(hw, model, sensitivity=0, **kw)
    for level, (compulsory, capacity, total) in split(r).items():
        assert compulsory >= 0 and capacity >= 0 and compulsory + capacity == total, level
    ops = r.ops
    for level, v in r.summary.bytes_per_level.items():
        if f"{level}_capacity_bytes" in ops:  # (a level no operator touches has no columns)
            assert ops[f"{level}_capacity_bytes"].sum() == v.capacity, level
            assert (ops[f"{level}_compulsory_bytes"] + ops[f"{level}_capacity_bytes"]
                    == ops[f"{level}_read_bytes"] + ops[f"{level}_written_bytes"]).all()


def test_a_small_sram_shows_as_capacity_bytes_and_a_large_one_does_not():
    """Llama-2-7B prefill of 2048 tokens on h100-sxm (issue 22's acceptance): at 256 KiB of SRAM,
    capacity bytes are at least half of HBM's; at 64 MiB under 10%; a batch-1 decode has none (its
    step streams the weights once, which no tile changes). The HBM stall splits in proportion."""
    result = run("h100-sxm", "llama-2-7b", "prefill", 256, prompt=2048)
    summary = result.summary
    small = summary.bytes_per_level["hbm"]
    assert small.capacity >= small.total / 2
    # each wait on HBM splits as the traffic it waited for: the holder's, or the waiting operator's own
    ops = result.ops.set_index("op")
    share = ops["hbm_capacity_bytes"] / (ops["hbm_compulsory_bytes"] + ops["hbm_capacity_bytes"])
    tl = result.timeline
    waits = tl[(tl["kind"] == "stall") & (tl["stream"] == "compute") & (tl["cause"] == "hbm")]
    whose = waits["holder"].where(waits["holder"] != "", waits["op"])
    expected = ((waits["end_s"] - waits["start_s"]) * whose.map(share).fillna(0.0)).sum()
    assert summary.capacity_stall_s["hbm"] == pytest.approx(expected, rel=1e-6)
    assert 0 < summary.capacity_stall_s["hbm"] < summary.stall_s["hbm"]
    hbm_line = next(line for line in console_table.table(summary).splitlines() if line.strip().startswith("hbm"))
    assert f"{small.capacity / small.total:.0%} re-fetched" in hbm_line
    large = run("h100-sxm", "llama-2-7b", "prefill", 64 * 1024, prompt=2048).summary.bytes_per_level["hbm"]
    assert large.capacity < large.total / 10
    summary = simulate("h100-sxm", "llama-2-7b", context=2048, sensitivity=0).summary
    decode = summary.bytes_per_level["hbm"]
    assert decode.capacity == 0 and decode.compulsory == decode.total
    assert summary.stall_s["hbm"] > 0 and summary.capacity_stall_s["hbm"] == 0
    assert "re-fetched" not in console_table.table(summary)

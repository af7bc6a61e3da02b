"""One step's pipeline: a step that grows never ends sooner."""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsim import engine, hardware
from memsim.core.units import PS_PER_S
from memsim.engine.chunk import Port
from memsim.engine.resources import ChipResources
from memsim.engine.simpy_fast import Environment
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel
from memsim.mapping.plan import OpTask, Plan, Step

L2, HBM, DDR = Ref.level("l2"), Ref.level("hbm"), Ref.level("ddr")
LEVELS = (L2, HBM, DDR)


def _alone(chip: ChipSpec, count: int, loads, stores, compute_ps: int, depth: int = 2, unpack_ps: int = 0,
           fast_forward: bool = False) -> int:
    """When one step of ``count`` chunks, alone on the chip, ends: ``loads`` and ``stores`` are
    (level, bytes per chunk) pairs."""
    loads, stores = tuple((r, b) for r, b in loads if b), tuple((r, b) for r, b in stores if b)
    step = Step(label="s", count=count, loads=loads, stores=stores, compute_ps=compute_ps, flops=0, depth=depth,
                sram_bytes=1 << 20, total_loads=tuple((r, b * count) for r, b in loads),
                total_stores=tuple((r, b * count) for r, b in stores), unpack_ps=unpack_ps)
    task = OpTask(op="op", kind="matmul", layer=0, flops=0, overhead_ps=0, steps=(step,), deps=(), bound=None)
    plan = Plan(chip=chip, tasks=(task,), homes=(), roofline_s=0.0, roofline_bound="compute", compulsory_bytes=())
    return engine.run(plan, fast_forward=fast_forward, memoize=fast_forward).end_ps


def test_bigger_stores_never_let_a_step_end_sooner():
    """Found on h100-sxm, GPT-2 prefill of 266 and 267 tokens: the attention's chunks store one
    byte more to HBM and L2 and load one more from L2, and it ended sooner, because a store that
    reached L2 a picosecond before the next chunk's load had held L2 and delayed that load in one
    case and not the other. Loads now take a level from stores of their priority."""
    chip = hardware.load("h100-sxm")
    small = _alone(chip, 64, [(L2, 150)], [(HBM, 100), (L2, 50)], 27)
    big = _alone(chip, 64, [(L2, 151)], [(HBM, 101), (L2, 51)], 27)
    assert big >= small


def _chip(l2_latency: int, hbm_latency: int, l2_channels: int, hbm_channels: int) -> ChipSpec:
    return ChipSpec(
        name="t", family="gpu",
        compute=ComputeSpec(units=4, peak_flops_per_s=(("bf16", 10**14),), vector_flops_per_s=10**13, efficiency=1.0),
        levels=(MemoryLevel("sram", "sram", 1 << 20, 10**13, 0, 4, "chip"),
                MemoryLevel("l2", "l2", 1 << 26, 7 * 10**12, l2_latency, l2_channels, "chip"),
                MemoryLevel("hbm", "hbm", 1 << 34, 3 * 10**12, hbm_latency, hbm_channels, "chip"),
                MemoryLevel("ddr", "ddr", 1 << 36, 3 * 10**11, 1000, 4, via="pcie")),
        links=(LinkSpec("pcie", 64 * 10**9, 2000),),
        execution=ExecutionSpec(op_overhead_ps=0, streams=("compute",), prefetch_depth=2))


AMOUNTS = st.lists(st.integers(0, 5000), min_size=3, max_size=3)


# Found while a level served loads and stores in arrival order: one picosecond more of compute
# per chunk ended the step sooner.
@example(0, 0, 1, 1, 3, [1, 0, 0], [2017, 0, 0], 0, 288, 2, "compute", 0, 1, False)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 300_000), st.integers(0, 700_000), st.integers(1, 4), st.integers(1, 6), st.integers(1, 200),
       AMOUNTS, AMOUNTS, st.integers(0, 200), st.integers(0, 300), st.integers(1, 3),
       st.sampled_from(["load", "store", "compute", "unpack"]), st.integers(0, 2), st.integers(1, 30), st.booleans())
def test_a_step_never_ends_sooner_when_a_chunk_needs_more(l2_latency, hbm_latency, l2_channels, hbm_channels, count,
                                                           loads, stores, compute, unpack, depth, grow, level, by,
                                                           fast_forward):
    """More bytes on a level (or over the link it is reached by), more compute or more unpacking
    per chunk never lets a step end sooner. Each level serves a step's loads in chunk order, its
    stores in chunk order after them, and the compute units its chunks in order, so every
    request starts at the latest of times that only grow with the work (the store's share of a
    level is what the loads leave it)."""
    chip = _chip(l2_latency, hbm_latency, l2_channels, hbm_channels)
    more_loads, more_stores = list(loads), list(stores)
    (more_loads if grow == "load" else more_stores)[level] += by if grow in ("load", "store") else 0
    before = _alone(chip, count, list(zip(LEVELS, loads)), list(zip(LEVELS, stores)), compute, depth, unpack,
                    fast_forward)
    after = _alone(chip, count, list(zip(LEVELS, more_loads)), list(zip(LEVELS, more_stores)),
                   compute + (by if grow == "compute" else 0), depth, unpack + (by if grow == "unpack" else 0),
                   fast_forward)
    assert after >= before


def test_a_chunk_holds_a_level_for_its_share_of_the_whole_transfer():
    """A chunk's hold is the whole transfer's time over the count, rounded up once, and a level's
    transfer is not rounded to whole bytes per channel: a small chunk pays its bytes' time."""
    res = ChipResources(Environment(), hardware.load("h100-sxm"), 0)
    hbm = res.ports[HBM]  # 5 channels
    port = Port(hbm, 207 * 1024, 1024, 1.0)
    assert port.hold == -(-hbm.duration(207 * 1024) // 1024)
    assert port.hold == hbm.duration(207) == -(-207 * PS_PER_S // hbm.bandwidth)  # not 42 B on each of 5


@given(st.integers(1, 2000), st.integers(0, 2_000_000), st.integers(1, 10**8))
@settings(max_examples=60, deadline=None)
def test_a_stream_pays_its_latency_once_however_finely_it_is_cut(count, latency, total):
    """A step that only streams ``total`` bytes from HBM ends one latency after it starts plus
    its chunks' transfers, back to back, however many chunks it is cut into: the latency comes before the
    first bytes, and later requests were issued ahead. (When the first chunk's latency held its
    buffer, a step of chunks shorter than the latency idled HBM for the difference at its start,
    and one of longer chunks hid the latency altogether.)"""
    chip = _chip(0, latency, 1, 3)
    per = -(-total // count)
    port = Port(ChipResources(Environment(), chip, 0).ports[HBM], per * count, count, 1.0)
    assert _alone(chip, count, [(HBM, per)], [], 0) == latency + count * port.hold

"""Pipeline stages cut by bytes and time; a layer-pipelined chip's regions sized by theirs."""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import SETTINGS

from memsim import CapacityError, hardware, simulate, workload
from memsim.mapping import lookup_shards
from memsim.mapping.layout import Layout, lay_out
from memsim.mapping.partition import ALL, FAST, FLOPS, TIME, Block, _runs, cut
from memsim.mapping.regions import fill
from memsim.report.summary_records import Grid
from tests.conftest import warned

GROQ = hardware.load("groq-lpu")


def _costs(items: list[Block], stage_of: list[int], chip) -> list[tuple[float, ...]]:
    """Each stage's costs (footprint in the first weight level and in all, least time, FLOPs)."""
    fast = next(lvl for lvl in chip.levels if lvl.home_for("weight"))
    bandwidth = fast.bandwidth_bytes_per_s * (chip.compute.units if fast.scope == "unit" else 1)
    holds = tuple(fast.home_for(k) for k in ("weight", "kv", "activation"))
    return [_runs([b for b, s in zip(items, stage_of) if s == stage], holds, bandwidth)[-1]
            for stage in range(max(stage_of) + 1)]


@st.composite
def block_lists(draw):
    n = draw(st.integers(1, 7))
    return [Block("layer", (f"op{i}",), draw(st.integers(0, 100)), draw(st.integers(0, 20)), draw(st.integers(0, 10)),
                  f := draw(st.integers(0, 1000)), f / 1e3, draw(st.integers(0, 200))) for i in range(n)]


@SETTINGS
@given(block_lists(), st.integers(1, 7), st.integers(1, 300))
def test_the_cut_is_the_best_contiguous_partition(items, parts, capacity):
    """Against every contiguous partition: the stages fit the first weight level when any cut
    does, with the least largest time and then FLOPs; else the least largest footprint."""
    if parts > len(items):
        with pytest.raises(Exception, match="pipeline stages"):
            cut(items, parts, GROQ)
        return
    chip = hardware.load("groq-lpu", [("sram.capacity", f"{capacity} B")])
    stage_of = cut(items, parts, chip)
    assert stage_of == sorted(stage_of) and set(stage_of) == set(range(parts))  # contiguous, none empty
    got = _costs(items, stage_of, chip)
    options = []
    for ends in itertools.combinations(range(1, len(items)), parts - 1):
        bounds = (0, *ends, len(items))
        option = [s for s in range(parts) for _ in range(bounds[s], bounds[s + 1])]
        options.append(_costs(items, option, chip))
    fitting = [o for o in options if max(c[FAST] for c in o) <= capacity]
    if fitting:
        assert max(c[FAST] for c in got) <= capacity
        best = min(max(c[TIME] for c in o) for o in fitting)
        assert max(c[TIME] for c in got) == pytest.approx(best)
        tied = [o for o in fitting if max(c[TIME] for c in o) <= best]
        assert max(c[FLOPS] for c in got) <= min(max(c[FLOPS] for c in o) for o in tied)
    else:
        assert max(c[ALL] for c in got) == min(max(c[ALL] for c in o) for o in options)


@given(st.lists(st.floats(0, 0.3), min_size=1, max_size=6), st.lists(st.floats(0, 5), min_size=6, max_size=6))
def test_region_shares_cover_their_bytes_and_fill_the_chip(floor, times):
    times = times[:len(floor)]
    if sum(floor) > 1:
        return
    shares = fill(floor, times)
    assert sum(shares) == pytest.approx(1)
    assert all(s >= f for s, f in zip(shares, floor))
    # The rest goes by time: a region above its floor is as slow as the slowest such region.
    paced = [t / s for s, f, t in zip(shares, floor, times) if s > f and t > 0]
    assert all(p == pytest.approx(max(paced)) for p in paced)


def test_an_8b_model_on_64_lpus_holds_every_weight_in_sram():
    """int8 Llama-3.1-8B on 8 x 8 LPUs: cut by layer count, the first stage held 4 layers and the
    bf16 embedding shard (240 MB of 230 MB); cut by bytes, every stage fits."""
    r = simulate("groq-lpu", "llama-3.1-8b", weight_dtype="int8", tp=8, pp=8, context=2048)
    assert set(dict(r.plan.homes).values()) == {"sram"}
    assert r.summary.grid == Grid(tp=8, pp=8)
    assert r.summary.step_over_roofline >= 1


def test_an_embedding_too_big_for_a_chip_is_split_over_stages_of_its_own():
    """Llama-3.1-70B's bf16 embedding is 263 MB per rank at tp 8, more than an LPU's 230 MB: the
    table is split by vocabulary over two stages that hold no layer, and the rest fits."""
    chip = hardware.load("groq-lpu")
    step = workload.StepSpec.make("decode", context=1024, weight_dtype="int8", tp=8)
    graph = workload.build_step(workload.model_config("llama-3.1-70b"), step)
    assert graph.tensors["embed.weight"].bytes > chip.chip_capacity(chip.scratchpad)
    assert lookup_shards(graph, chip, 72) == 2
    assert lookup_shards(graph, chip, 1) == 1  # no stage to spare
    r = simulate("groq-lpu", "llama-3.1-70b", weight_dtype="int8", tp=8, pp=72, context=1024)
    assert set(dict(r.plan.homes).values()) == {"sram"}
    assert r.summary.embedding_placement["embedding"] == "own stage (split over 2 stages)"
    shards = [t for t in r.plan.tasks if t.graph_op.startswith("embed.shard")]
    assert len({t.chip for t in shards}) == 2


def test_a_table_that_only_lookups_read_stays_in_host_memory_first():
    """With too little HBM, the embedding table (a row per token read) is what stays in host DDR."""
    graph = workload.build_step(workload.model_config("llama-2-7b"), workload.StepSpec.make("decode", context=256))
    need = graph.bytes_of("weight") + graph.bytes_of("kv")
    hbm = need - graph.tensors["embed.weight"].bytes // 2  # all but half the table
    with warned():
        r = simulate("h100-sxm", "llama-2-7b", context=256, set={"hbm.capacity": f"{hbm} B"})
    homes = dict(r.plan.homes)
    assert homes["embed.weight"] == "ddr"
    assert {homes[n] for n, t in r.graph.tensors.items() if t.klass == "weight" and n != "embed.weight"} == {"hbm"}
    assert r.summary.embedding_placement == {"embedding": "host", "lm_head": "with layers"}


def _region_bytes(r) -> dict[int, int]:
    """Per stage (region): the weights and KV cache its ops use that live in SRAM, and the
    largest activation working set of one op."""
    homes, tensors = dict(r.plan.homes), r.graph.tensors
    used: dict[int, set[str]] = {}
    work: dict[int, int] = {}
    for t in r.plan.tasks:
        op = r.graph.ops.get(t.graph_op)
        if op is None:
            continue
        names = {x.tensor for x in op.inputs} | set(op.outputs)
        used.setdefault(t.chip // r.plan.tp, set()).update(names)
        acts = sum(tensors[n].bytes for n in names if tensors[n].klass == "activation")
        work[t.chip // r.plan.tp] = max(work.get(t.chip // r.plan.tp, 0), acts)
    return {s: sum(tensors[n].bytes for n in names if tensors[n].klass in ("weight", "kv") and homes[n] == "sram")
            + work[s] for s, names in used.items()}


@pytest.mark.parametrize("capacity", [None, "20GB"])
def test_no_wafer_region_holds_more_than_its_share(capacity):
    """Each region's weights, KV cache and working set fit its share of the SRAM, and the shares
    fill the wafer; the region holding the embedding table gets more than a layer's."""
    r = simulate("wse-3", "llama-3.1-8b", context=2048, set={"sram.capacity": capacity} if capacity else {})
    plan = r.plan
    assert plan.regions == 32 and sum(plan.shares) == pytest.approx(1)
    sram = r.chip.chip_capacity(r.chip.scratchpad)
    for stage, nbytes in _region_bytes(r).items():
        assert nbytes <= round(plan.shares[stage] * sram) + 1, stage
    assert plan.shares[0] > plan.shares[1]


def test_a_wafer_too_small_for_its_regions_streams_within_its_sram():
    """16.3 GB of SRAM cannot give 32 regions their 16.3 GB of weights, KV cache and room: the
    wafer runs each layer on all of it and streams from MemoryX what its SRAM cannot hold beside
    the KV cache and the staging area for prefetched weights."""
    with warned():
        r = simulate("wse-3", "llama-3.1-8b", context=2048, set={"sram.capacity": "16.3GB"})
    plan = r.plan
    assert plan.regions == 1 and plan.staging[0] > 0
    held = _region_bytes(r)[0]
    assert held + plan.staging[0] <= r.chip.chip_capacity(r.chip.scratchpad)
    assert r.summary.bytes_per_level["memoryx"].read > 0
    assert r.summary.embedding_placement["embedding"] == "host"  # MemoryX holds the table


def test_a_stage_that_does_not_fit_is_one_error():
    with pytest.raises(CapacityError, match="pipeline stage"):
        simulate("groq-lpu", "llama-2-70b", weight_dtype="int8", tp=8, pp=36, context=2048)


def _tiny_layout(chip, pp: int, layers: int, context: int):
    config = workload.ModelConfig("tiny", "llama", layers=layers, hidden=64, heads=4, kv_heads=2, intermediate=128,
                                  vocab=512, max_positions=4096, tie_embeddings=False)
    graph = workload.build_step(config, workload.StepSpec.make("decode", batch=2, context=context))
    return lay_out(graph, chip, Layout(pp=pp))


@SETTINGS
@given(st.integers(2, 6), st.integers(1, 8), st.integers(1, 512), st.integers(50_000, 1_500_000), st.floats(1, 4),
       st.booleans())
def test_more_sram_never_makes_placement_fail(layers, pp, context, capacity, more, wafer):
    """Where a chip's SRAM holds the model (an LPU's stages, a wafer's regions or its streaming),
    more of it never turns a layout that fits into one that does not."""
    base = hardware.load("wse-3" if wafer else "groq-lpu")
    pp = min(pp, layers + 2) if not wafer else 1
    small, big = (replace(base, levels=tuple(replace(lvl, capacity_bytes=int(c), scope="chip")
                                            if lvl.name == "sram" else lvl for lvl in base.levels))
                  for c in (capacity, capacity * more))
    try:
        _tiny_layout(small, pp, layers, context)
    except CapacityError:
        return
    laid = _tiny_layout(big, pp, layers, context)
    assert len(laid.shares) == laid.layout.stages
    if wafer and _tiny_layout(small, pp, layers, context).layout.regions > 1:
        assert laid.layout.regions > 1  # regions that fit keep fitting

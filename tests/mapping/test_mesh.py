"""A wafer's fabric from its geometry: the block a region occupies, a traversal's cost, and the
wafer family using them."""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim import hardware, simulate
from memsim.core.errors import ConfigError
from memsim.mapping.mesh import Block, block, region_block, traversal_latency_ps, traversal_ps

WSE3 = hardware.load("wse-3")
HOP, WIDTH, SYNC = 1176, 4, 1_000_000  # ps, B per hop time, ps

meshes = st.tuples(st.integers(1, 1200), st.integers(1, 1200))
shares = st.fractions(Fraction(1, 10_000), 1).map(float)


@settings(max_examples=200, deadline=None)
@given(meshes, shares)
def test_a_region_is_the_most_nearly_square_block_of_its_share_that_fits(mesh, share):
    short, long = sorted(mesh)
    b = block(*mesh, share)
    units = max(1, min(short * long, round(share * short * long)))
    assert 1 <= b.rows <= min(short, b.cols) and b.cols <= long
    assert units <= b.rows * b.cols < units + b.rows  # every unit, and less than one row spare
    if b.rows < short:  # a square, as near as whole units allow
        assert b.cols - b.rows <= math.isqrt(units) + 1


def test_a_region_wider_than_the_mesh_is_as_tall_as_the_mesh():
    assert block(762, 1172, 1.0) == Block(762, 1172)
    assert block(1172, 762, 0.9) == Block(762, 1055)  # the mesh's shorter side, whichever it is
    assert block(762, 1172, 1 / 32) == Block(167, 168)


def test_a_traversal_is_the_diameter_the_slice_per_row_and_the_sync():
    # 8 KiB over a 167 x 168 block: 333 hops, ceil(8192 / 167) = 50 B a row, 13 hop times of 4 B.
    assert traversal_ps(Block(167, 168), 8192, HOP, WIDTH, SYNC) == (333 + 13) * HOP + SYNC
    assert traversal_ps(Block(1, 1), 1, HOP, WIDTH, 0) == HOP  # one byte, one unit: one hop time to stream it


@settings(max_examples=200, deadline=None)
@given(meshes, shares, st.integers(1, 1 << 24), st.integers(1, 1 << 24))
def test_a_traversal_grows_with_the_vector_and_its_hops_with_the_region(mesh, share, a, b):
    region = block(*mesh, share)
    small, large = sorted((a, b))
    assert traversal_ps(region, small, HOP, WIDTH, SYNC) <= traversal_ps(region, large, HOP, WIDTH, SYNC)
    assert block(*mesh, share / 2).hops <= region.hops <= block(*mesh, min(1.0, share * 2)).hops


def test_a_traversal_takes_longer_across_a_larger_region_while_its_hops_dominate():
    """A square block of side r costs about 2r hops plus nbytes / (r x width) hop times to
    stream: it grows with r once r^2 >= nbytes / (2 width), as for a token's vectors on any part
    of a layer's region. A far longer vector streams faster over a larger region's more rows."""
    shares = [1 / n for n in (2000, 1000, 640, 320, 160, 80, 40, 20, 10, 4, 2, 1)]
    for nbytes in (8192, 16384, 57344, 1 << 20):
        hop_bound = [s for s in shares if region_block(WSE3, s).rows ** 2 >= nbytes / (2 * WIDTH)]
        times = [traversal_latency_ps(WSE3, s, nbytes) for s in hop_bound]
        assert len(times) > 1 and times == sorted(times), nbytes
    assert traversal_latency_ps(WSE3, 1 / 2, 1 << 24) < traversal_latency_ps(WSE3, 1 / 640, 1 << 24)


def test_without_a_mesh_a_traversal_pays_the_link_latency_once():
    flat = dataclasses.replace(WSE3, execution=dataclasses.replace(WSE3.execution, fabric_rows=0, fabric_cols=0))
    assert region_block(flat, 0.5) is None
    assert traversal_latency_ps(flat, 0.5, 1 << 20) == WSE3.link("fabric").latency_ps
    assert traversal_latency_ps(WSE3, 0.5, 1 << 20) > WSE3.link("fabric").latency_ps


def _fabric_steps(plan):
    """Per matrix task: its traversal steps and its lowered steps."""
    for t in plan.tasks:
        moves = [s for s in t.steps if s.label in ("broadcast", "reduce")]
        if moves:
            yield t, moves, [s for s in t.steps if s.label not in ("broadcast", "reduce")]


def test_the_wafer_family_costs_each_traversal_from_its_part_of_the_region():
    r = simulate("wse-3", "llama-3.1-8b", context=1024)
    plan, graph_ops = r.plan, {}
    parts: dict[int, float] = defaultdict(float)
    for t, moves, work in _fabric_steps(plan):
        share = moves[0].share
        assert all(s.share == share for s in work)  # it reads, computes and traverses on its part
        for s in moves:
            nbytes = dict(s.total_loads)[next(iter(dict(s.total_loads)))]
            assert s.latency_ps == traversal_latency_ps(plan.chip, share, nbytes)
        if t.kind == "matmul":
            parts[t.chip] += share
        graph_ops[t.op] = t
        # The engine pays the traversals' latencies: the operator lasts at least as long.
        row = r.ops[r.ops.op == t.op].iloc[0]
        assert row.duration_s * 1e12 >= sum(s.latency_ps for s in moves)
    # A region's projections split it by their weights: their parts make up its share.
    assert len(parts) == 32 and all(abs(p - plan.shares[unit]) < 1e-12 for unit, p in parts.items())
    qkv, up = graph_ops["L0.qkv"], graph_ops["L0.gate_up"]
    assert math.isclose(qkv.steps[0].share / up.steps[0].share, qkv.flops / up.flops, rel_tol=1e-9)
    assert graph_ops["L0.attn"].steps[0].share == plan.shares[0]  # the KV cache is spread over the region


@pytest.mark.slow
def test_an_operator_on_its_part_is_slower_than_on_the_whole_region_but_a_prefill_keeps_the_region():
    """One micro-batch: the other parts idle, so an operator has its part's channels and compute.
    A prefill's chunks: the parts serve different chunks at once, at the region's rate."""
    decode = simulate("wse-3", "llama-3.1-8b", context=1024).plan
    t, moves, work = next(_fabric_steps(decode))
    assert all(s.share == moves[0].share < decode.shares[t.chip] for s in work)
    prefill = simulate("wse-3", "gpt2", phase="prefill", prompt=256).plan
    for t, moves, work in _fabric_steps(prefill):
        region = prefill.shares[t.chip]
        assert all(s.share == region for s in work)
        assert moves[0].share < region if t.kind == "matmul" else moves[0].share == region  # its part's block


def test_a_faster_fabric_never_slows_a_wafer_and_a_longer_sync_never_speeds_it():
    base = simulate("wse-3", "gpt2", context=128).summary.step_time_s
    wide = simulate("wse-3", "gpt2", context=128, set={"execution.fabric_width": "64 B"}).summary.step_time_s
    near = simulate("wse-3", "gpt2", context=128, set={"fabric.latency": "0.5 ns"}).summary.step_time_s
    slow = simulate("wse-3", "gpt2", context=128, set={"execution.fabric_sync": "2 us"}).summary.step_time_s
    assert wide <= base and near < base < slow


def test_a_mesh_needs_rows_columns_and_a_link_width():
    for change, field in (({"fabric_cols": 0}, "execution.fabric_cols"), ({"fabric_rows": 0}, "execution.fabric_rows"),
                          ({"fabric_width_bytes": 0}, "execution.fabric_width")):
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(WSE3.execution, **change)
        assert err.value.field == field

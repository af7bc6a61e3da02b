"""Tiling against SRAM: GEMM traffic bounds, attention passes. Pure functions, checked as physics."""
from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memsim.core.errors import CapacityError
from memsim.mapping.tiling import (
    MIN_TK,
    attention_floor,
    attention_tile,
    bits_bytes,
    feed_bytes,
    gemm_floor,
    gemm_tile,
    unit_edge,
)

DIMS = st.integers(min_value=1, max_value=5000)
BITS = st.sampled_from([4, 8, 16, 32])
SRAM = st.integers(min_value=4 * 1024, max_value=64 * 2**20)
DEPTH = st.integers(min_value=1, max_value=4)
ACC = 4


def working_set(tile, a_bits, b_bits, depth, acc=ACC) -> int:
    return tile.tm * tile.tn * acc + depth * (bits_bytes(tile.tm * MIN_TK, a_bits) + bits_bytes(MIN_TK * tile.tn, b_bits))


def compulsory(m, n, k, a_bits, b_bits, c_bits) -> tuple[int, int, int]:
    return bits_bytes(m * k, a_bits), bits_bytes(k * n, b_bits), bits_bytes(m * n, c_bits)


@settings(max_examples=150, deadline=None)
@given(m=DIMS, n=DIMS, k=DIMS, a_bits=BITS, b_bits=BITS, c_bits=BITS, sram=SRAM, depth=DEPTH)
def test_gemm_traffic_at_least_compulsory_and_tile_fits(m, n, k, a_bits, b_bits, c_bits, sram, depth):
    try:
        tile = gemm_tile(m, n, k, a_bits, b_bits, c_bits, ACC, sram, depth)
    except CapacityError:
        # Only when not even a 1x1 tile fits.
        assume(False)
    a, b, c = compulsory(m, n, k, a_bits, b_bits, c_bits)
    assert tile.a_bytes >= a and tile.b_bytes >= b and tile.c_bytes == c
    assert tile.traffic >= a + b + c
    # Operands are re-fetched once per tile column / row, exactly.
    assert tile.a_bytes == a * math.ceil(n / tile.tn)
    assert tile.b_bytes == b * math.ceil(m / tile.tm)
    assert 1 <= tile.tm <= m and 1 <= tile.tn <= n
    assert working_set(tile, a_bits, b_bits, depth) <= sram
    assert tile.tm * tile.tn * ACC + depth * tile.buffer_bytes <= sram
    assert tile.buffer_bytes >= bits_bytes(tile.tm * MIN_TK, a_bits) + bits_bytes(MIN_TK * tile.tn, b_bits)


@settings(max_examples=60, deadline=None)
@given(m=DIMS, n=DIMS, k=DIMS, bits=BITS, depth=DEPTH,
       sizes=st.lists(st.integers(min_value=2 * 1024, max_value=256 * 2**20), min_size=2, max_size=6))
def test_gemm_traffic_non_increasing_as_sram_grows(m, n, k, bits, depth, sizes):
    previous = None
    for sram in sorted(sizes):
        try:
            tile = gemm_tile(m, n, k, bits, bits, bits, ACC, sram, depth)
        except CapacityError:
            assert previous is None  # a bigger SRAM never loses a tile a smaller one had
            continue
        if previous is not None:
            assert tile.traffic <= previous
        previous = tile.traffic


def test_gemm_traffic_reaches_compulsory_when_everything_fits():
    m, n, k = 64, 256, 512
    tile = gemm_tile(m, n, k, 16, 16, 16, ACC, 2**30, 2)
    assert (tile.tm, tile.tn) == (m, n)
    assert tile.traffic == sum(compulsory(m, n, k, 16, 16, 16))


def test_decode_gemm_reads_weights_once():
    # Decode: m is the batch, tiny; one row of tiles covers it, so the weight streams exactly once.
    m, n, k = 4, 11008, 4096
    tile = gemm_tile(m, n, k, 16, 16, 16, ACC, 30096 * 1024, 2)
    assert tile.tm == m
    assert tile.b_bytes == k * n * 2


def test_gemm_small_sram_forces_refetch():
    m = n = k = 4096
    big = gemm_tile(m, n, k, 16, 16, 16, ACC, 64 * 2**20, 2)
    small = gemm_tile(m, n, k, 16, 16, 16, ACC, 64 * 1024, 2)
    assert small.traffic > big.traffic > sum(compulsory(m, n, k, 16, 16, 16))


def test_gemm_tile_too_small_sram_is_a_capacity_error():
    with pytest.raises(CapacityError) as info:
        gemm_tile(128, 128, 128, 16, 16, 16, ACC, 16, 2, what="L0.qkv")
    assert "L0.qkv" in str(info.value)
    assert info.value.field == "sram.capacity"


def test_gemm_traffic_depends_on_depth_only_through_fit():
    # More buffers take SRAM from the accumulator tile, so traffic can only rise.
    m = n = k = 2048
    shallow = gemm_tile(m, n, k, 16, 16, 16, ACC, 256 * 1024, 1)
    deep = gemm_tile(m, n, k, 16, 16, 16, ACC, 256 * 1024, 4)
    assert deep.traffic >= shallow.traffic


ATTN = dict(head_dim=128, q_bits=16, kv_bits=16, acc_bytes=ACC, depth=2)
GROUPS = 8  # (batch x KV heads) whose caches add up to kv_bytes_once


def _attn(q_rows, kv_len, sram, causal, **kw):
    args = {**ATTN, **kw}
    kv_once = 2 * kv_len * args["head_dim"] * args["kv_bits"] // 8 * GROUPS
    return attention_tile(q_rows=q_rows, kv_len=kv_len, sram_bytes=sram, kv_bytes_once=kv_once, causal=causal,
                          **args), kv_once


@pytest.mark.parametrize("causal", [False, True])
def test_attention_passes_fall_as_sram_grows(causal):
    results = [_attn(4096, 4096, sram, causal) for sram in (256 * 1024, 1 * 2**20, 4 * 2**20, 16 * 2**20,
                                                            256 * 2**20)]
    passes = [tile.passes for tile, _ in results]
    traffic = [tile.kv_traffic for tile, _ in results]
    assert passes == sorted(passes, reverse=True)
    assert passes[0] > passes[-1] == 1
    assert traffic == sorted(traffic, reverse=True)
    for tile, once in results:
        assert tile.kv_traffic >= once
    assert results[-1][0].kv_traffic == results[-1][1]  # one pass: the cache is read exactly once


@settings(max_examples=150, deadline=None)
@given(q_rows=st.integers(1, 20000), kv_len=st.integers(1, 20000), head_dim=st.sampled_from([64, 80, 128, 256]),
       kv_bits=BITS, depth=DEPTH, causal=st.booleans(), sram=st.integers(64 * 1024, 64 * 2**20))
def test_attention_tile_invariants(q_rows, kv_len, head_dim, kv_bits, depth, causal, sram):
    kw = dict(head_dim=head_dim, kv_bits=kv_bits, depth=depth)
    try:
        tile, once = _attn(q_rows, kv_len, sram, causal, **kw)
    except CapacityError:
        assume(False)
    assert tile.kv_traffic >= once
    assert tile.kv_traffic <= once * tile.passes
    assert 1 <= tile.block_rows <= q_rows
    assert tile.passes == math.ceil(q_rows / tile.block_rows)
    assert tile.buffer_bytes >= 1
    # Q rows, their accumulators and the streamed K/V blocks fit in SRAM together.
    bc = tile.block_cols
    assert 1 <= bc <= min(64, kv_len)
    per_row = bits_bytes(head_dim, 16) + head_dim * ACC + bc * ACC
    kv_chunk = depth * bits_bytes(2 * bc * head_dim, kv_bits)
    assert tile.block_rows * per_row + kv_chunk <= sram
    # A bigger SRAM never needs more passes.
    bigger, _ = _attn(q_rows, kv_len, 2 * sram, causal, **kw)
    assert bigger.passes <= tile.passes
    assert bigger.kv_traffic <= tile.kv_traffic


def test_causal_attention_reads_less_than_full():
    full, once = _attn(8192, 8192, 1 * 2**20, causal=False)
    causal, _ = _attn(8192, 8192, 1 * 2**20, causal=True)
    assert full.passes == causal.passes > 1
    assert full.kv_traffic == once * full.passes
    assert causal.kv_traffic < full.kv_traffic
    assert causal.kv_traffic == math.ceil(once * (causal.passes + 1) / 2)


def test_attention_too_small_sram_is_a_capacity_error():
    with pytest.raises(CapacityError) as info:
        _attn(128, 128, 1024, causal=True)
    assert info.value.field == "sram.capacity"


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 600), n=st.integers(1, 600), k=DIMS, a_bits=BITS, b_bits=BITS, depth=DEPTH)
def test_the_gemm_floor_is_the_least_sram_for_the_least_traffic(m, n, k, a_bits, b_bits, depth):
    """Placement keeps ``gemm_floor`` for tiles: there each operand is fetched once, one byte less
    fetches one again, and more changes nothing."""
    floor = gemm_floor(m, n, a_bits, b_bits, ACC, depth)
    least = sum(compulsory(m, n, k, a_bits, b_bits, 16))
    at = gemm_tile(m, n, k, a_bits, b_bits, 16, ACC, floor, depth)
    assert at.traffic == least and (at.tm, at.tn) == (m, n)
    assert gemm_tile(m, n, k, a_bits, b_bits, 16, ACC, 2 * floor, depth).traffic == least
    try:
        assert gemm_tile(m, n, k, a_bits, b_bits, 16, ACC, floor - 1, depth).traffic > least
    except CapacityError:
        pass


@settings(max_examples=150, deadline=None)
@given(q_rows=st.integers(1, 4096), kv_len=st.integers(1, 4096), head_dim=st.sampled_from([64, 128]),
       kv_bits=BITS, depth=DEPTH, causal=st.booleans())
def test_the_attention_floor_streams_kv_once(q_rows, kv_len, head_dim, kv_bits, depth, causal):
    floor = attention_floor(q_rows, head_dim, 16, kv_bits, ACC, depth)
    once = bits_bytes(2 * kv_len * head_dim, kv_bits)
    tile = attention_tile(q_rows, kv_len, head_dim, 16, kv_bits, ACC, floor, depth, once, causal)
    assert tile.passes == 1 and tile.kv_traffic == once
    if q_rows > 1:
        assert attention_tile(q_rows, kv_len, head_dim, 16, kv_bits, ACC, floor - 1, depth, once, causal).passes > 1


@settings(max_examples=200, deadline=None)
@given(share=st.integers(0, 2**20), more=st.integers(0, 2**20), bits=st.sampled_from([4, 8, 16]),
       acc=st.sampled_from([2, 4]), depth=st.integers(1, 4), most=st.integers(1, 512))
def test_a_units_tile_is_the_largest_that_its_share_holds(share, more, bits, acc, depth, most):
    t = unit_edge(share, bits, bits, acc, depth, most)
    need = lambda e: e * e * acc + depth * 2 * bits_bytes(e * MIN_TK, bits)
    assert 1 <= t <= most
    assert t == 1 or need(t) <= share  # it fits (an edge of 1 is the least a unit computes)
    assert t == most or need(t + 1) > share  # and one more does not
    assert unit_edge(share + more, bits, bits, acc, depth, most) >= t  # more SRAM, no smaller tile


def test_the_feed_reads_each_operand_once_per_tile_it_meets():
    """A t x t tile reads t elements of A and t of B per K-step for its 2 t^2 FLOPs: a GEMM of
    m x n x k in bf16 reads 4 m n k / t bytes; a GEMV (m = 1) reads its weights once."""
    m, n, k = 4096, 4096, 4096
    assert feed_bytes(2 * m * n * k, m, n, 128, 16, 16) == 4 * m * n * k // 128
    assert feed_bytes(2 * m * n * k, m, n, 16, 16, 16) == 4 * m * n * k // 16
    gemv = feed_bytes(2 * n * k, 1, n, 128, 16, 16)
    assert 2 * n * k < gemv < 2 * n * k * 1.01  # the weights, and the activation once per tile

"""Tiling against the SRAM budget: tile shapes, HBM traffic and chunking, as pure functions.

Tiles are output-stationary: an (tm x tn) output tile accumulates in SRAM while its
operands stream through ``depth`` buffers along K. SRAM capacity bounds the tile, the tile
sets how often each operand is fetched again, and that sets the traffic. The tile shape is
chosen to minimise traffic, which depends only on shapes and capacity, never on bandwidth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from memsim.core.errors import CapacityError

MIN_TK = 8  # smallest K-step worth streaming
# Identical chunks every step is cut into (``lower.make_step``). A chunk is a fixed share of its
# step, not of its bytes or of the SRAM: the pipeline's fill and drain (the first chunk's loads,
# the last one's compute and stores) are 1/1024 of any step, so growing a step grows every
# chunk and a bigger SRAM never coarsens them. When the count followed the bytes (a chunk of a
# few hundred bytes), a step one token bigger could be cut into more, smaller chunks, round
# each chunk's share to fewer bytes and picoseconds, fill and drain faster and end sooner. The
# tile, which fits the SRAM, sets the traffic; the chunk only sets how finely a step's loads,
# compute and stores overlap.
CHUNKS = 1024


@dataclass(frozen=True, slots=True)
class GemmTile:
    tm: int
    tn: int
    a_bytes: int  # activation operand traffic (M x K, fetched once per column of tiles)
    b_bytes: int  # weight operand traffic (K x N, fetched once per row of tiles)
    c_bytes: int  # output written once
    buffer_bytes: int  # SRAM left for streamed operand buffers, per buffer

    @property
    def traffic(self) -> int:
        return self.a_bytes + self.b_bytes + self.c_bytes


def _candidates(n: int) -> list[int]:
    vals = {n}
    p = 1
    while p < n:
        vals.add(p)
        if 3 * p // 2 < n and p >= 2:
            vals.add(3 * p // 2)
        p *= 2
    return sorted(vals)


def bits_bytes(elements: int, bits: int) -> int:
    return -(-elements * bits // 8)


def gemm_tile(m: int, n: int, k: int, a_bits: int, b_bits: int, c_bits: int, acc_bytes: int,
              sram_bytes: int, depth: int, what: str = "matmul") -> GemmTile:
    """Minimum-traffic output tile for C[m,n] = A[m,k] @ B[k,n] in ``sram_bytes``."""
    best: GemmTile | None = None
    a_total, b_total, c_total = bits_bytes(m * k, a_bits), bits_bytes(k * n, b_bits), bits_bytes(m * n, c_bits)
    for tm in _candidates(m):
        for tn in _candidates(n):
            acc = tm * tn * acc_bytes
            step = bits_bytes(tm * MIN_TK, a_bits) + bits_bytes(MIN_TK * tn, b_bits)
            if acc + depth * step > sram_bytes:
                continue
            tile = GemmTile(tm, tn, a_total * math.ceil(n / tn), b_total * math.ceil(m / tm), c_total,
                            (sram_bytes - acc) // depth)
            if best is None or (tile.traffic, -tm * tn) < (best.traffic, -best.tm * best.tn):
                best = tile
    if best is None:
        raise CapacityError(f"SRAM of {sram_bytes} B cannot hold even a 1x1 tile of {what} with {depth} buffers",
                            field="sram.capacity")
    return best


def gemm_floor(m: int, n: int, a_bits: int, b_bits: int, acc_bytes: int, depth: int) -> int:
    """The least SRAM at which ``gemm_tile`` reaches its least traffic: the whole output as one
    tile, so that each operand is fetched once. More SRAM changes nothing."""
    return m * n * acc_bytes + depth * (bits_bytes(m * MIN_TK, a_bits) + bits_bytes(MIN_TK * n, b_bits))


def unit_edge(share_bytes: int, a_bits: int, b_bits: int, acc_bytes: int, depth: int, most: int) -> int:
    """The edge of the largest square output tile, at most ``most``, that one compute unit holds in
    its ``share_bytes`` of SRAM: the tile's accumulators and ``depth`` K-steps of both operands
    (as ``gemm_tile`` counts a tile). At least 1."""
    fits = lambda t: gemm_floor(t, t, a_bits, b_bits, acc_bytes, depth) <= share_bytes
    lo, hi = 1, max(1, most)
    while lo < hi:  # fits() only turns false as t grows
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def feed_bytes(flops: int, m: int, n: int, edge: int, a_bits: int, b_bits: int) -> int:
    """The operand bytes the matrix units read from SRAM for ``flops`` of a GEMM of ``m`` x ``n``
    outputs computed in tiles of at most ``edge`` x ``edge``: every K-step, a tm x tn tile reads tm
    elements of A and tn of B for its 2 tm tn FLOPs, so a unit's tile sets its operands' reuse."""
    tm, tn = min(m, edge), min(n, edge)
    return -(-flops * (tm * a_bits + tn * b_bits) // (16 * tm * tn))


@dataclass(frozen=True, slots=True)
class AttentionTile:
    block_rows: int  # query rows held in SRAM per pass (per KV head)
    block_cols: int  # keys per streamed K/V block
    passes: int  # times the K/V of one head is streamed
    kv_traffic: int  # bytes of K/V read including re-reads
    buffer_bytes: int


def attention_floor(q_rows: int, head_dim: int, q_bits: int, kv_bits: int, acc_bytes: int, depth: int) -> int:
    """The least SRAM at which ``attention_tile`` streams K/V once: every query row of a KV head
    held beside ``depth`` K/V blocks one key wide (the narrowest it tries). More SRAM changes no
    byte moved."""
    per_row = bits_bytes(head_dim, q_bits) + head_dim * acc_bytes + acc_bytes
    return depth * bits_bytes(2 * head_dim, kv_bits) + q_rows * per_row


def attention_tile(q_rows: int, kv_len: int, head_dim: int, q_bits: int, kv_bits: int,
                   acc_bytes: int, sram_bytes: int, depth: int, kv_bytes_once: int, causal: bool,
                   block_cols: int = 64) -> AttentionTile:
    """FlashAttention tiling: Q blocks stay in SRAM while K/V stream past them.

    ``q_rows`` counts query rows per KV head (tokens x query heads per KV group), so a KV
    head's cache is shared by its whole group. Traffic falls as Theta(N^2 d^2 / M).
    """
    best = None
    bc = max(1, min(block_cols, kv_len))
    while bc >= 1:  # narrower K/V blocks leave room for more query rows when SRAM is tight
        kv_chunk = depth * bits_bytes(2 * bc * head_dim, kv_bits)
        per_row = bits_bytes(head_dim, q_bits) + head_dim * acc_bytes + bc * acc_bytes
        room = sram_bytes - kv_chunk
        if room >= per_row:
            rows = min(q_rows, room // per_row)
            if best is None or rows > best[0]:
                best = (rows, bc, per_row)
        bc //= 2
    if best is None:
        raise CapacityError(f"SRAM of {sram_bytes} B cannot hold one attention row block with {depth} buffers",
                            field="sram.capacity")
    rows, bc, per_row = best
    passes = math.ceil(q_rows / rows)
    fraction = (passes + 1) / (2 * passes) if causal and passes > 1 else 1.0
    kv = math.ceil(kv_bytes_once * passes * fraction) if passes > 1 else kv_bytes_once
    return AttentionTile(rows, bc, passes, kv, max(1, (sram_bytes - rows * per_row) // depth))

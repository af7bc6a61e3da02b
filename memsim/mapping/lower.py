"""Lowering: one operator becomes pipelined steps of identical chunks on a chip.

Each op kind registers a lowering function. A lowering decides the tile (from SRAM
capacity), the traffic per memory level (from the tile and the tensors' homes), and the
compute time per chunk (from FLOPs and the named efficiency parameters).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

from memsim.core.registry import Registry
from memsim.core.units import PS_PER_S, compute_ps, transfer_ps
from memsim.hardware import rates
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping import kerneltile, tiling
from memsim.mapping.context import Context
from memsim.mapping.plan import Step, level_bytes
from memsim.mapping.workitems import attention_share, filled, kv_split
from memsim.workload.dtypes import BITS
from memsim.workload.graph import Op, OpGraph

SOFTMAX_FLOPS_PER_SCORE = 5


Lowering = Callable[[Op, Context], tuple[Step, ...]]
LOWERINGS: Registry[Lowering] = Registry("lowering", field="kind")  # by op kind, all in this module
register = LOWERINGS.register


def staging(chip: ChipSpec) -> Ref:
    """Where prefetched weights land: the scratchpad's staging area."""
    return Ref.level(chip.scratchpad.name)


def _add(acc: dict[Ref, int], where: Ref, nbytes: int) -> None:
    if nbytes:
        acc[where] = acc.get(where, 0) + nbytes


def _add_read(acc: dict[Ref, int], cx: Context, tensor: str, read: int, moved: int) -> None:
    """``moved`` bytes of a read of ``read`` bytes of ``tensor`` (more with re-fetches): the share a
    prefetch staged comes from SRAM, the rest from the tensor's home."""
    staged = min(read, dict(cx.staged).get(tensor, 0))
    from_sram = moved * staged // read if read else 0
    _add(acc, staging(cx.chip), from_sram)
    _add(acc, cx.home(tensor), moved - from_sram)


def _ordered(d: dict[Ref, int]) -> tuple[tuple[Ref, int], ...]:
    return tuple(sorted(d.items(), key=lambda kv: str(kv[0])))


def make_step(label: str, loads: dict[Ref, int], stores: dict[Ref, int], busy_ps: int, flops: int,
              depth: int, sram_bytes: int, tile: dict[str, int] | None = None, unpack_ps: int = 0, *,
              energy_fj: int = 0, unpack_fj: int = 0, feed_ps: int = 0) -> Step:
    """Cut a step's totals into ``tiling.CHUNKS`` identical chunks (sizes rounded up, so no byte is lost);
    ``energy_fj`` and ``unpack_fj`` are the dynamic energies of its FLOPs and of unpacking its weights,
    ``feed_ps`` the part of ``busy_ps`` its matrix units wait for operands from SRAM."""
    n = tiling.CHUNKS
    per = lambda d: tuple((k, -(-v // n)) for k, v in _ordered(d))
    return Step(label=label, count=n, loads=per(loads), stores=per(stores), compute_ps=-(-busy_ps // n), flops=flops,
                depth=depth, sram_bytes=sram_bytes, total_loads=_ordered(loads), total_stores=_ordered(stores),
                tile=tuple(sorted((tile or {}).items())), unpack_ps=-(-unpack_ps // n), compute_fj=energy_fj,
                unpack_fj=unpack_fj, feed_ps=min(-(-busy_ps // n), -(-feed_ps // n)))


@lru_cache(maxsize=4096)
def _gemm(m, n, k, a_bits, b_bits, c_bits, acc, sram, depth, name):
    return tiling.gemm_tile(m, n, k, a_bits, b_bits, c_bits, acc, sram, depth, name)


def gemm_compute_ps(op: Op, cx: Context) -> int:
    """Picoseconds a GEMM keeps the matrix units busy: its FLOPs at the rate of the dtype it
    computes in (``peak_ps``), and no less than the time its operands take to reach the units
    from SRAM (``feed_ps``)."""
    return max(peak_ps(op, cx), feed_ps(op, cx))


def peak_ps(op: Op, cx: Context) -> int:
    """Picoseconds a GEMM's FLOPs take at the matrix rate of its dtype, stretched by the waves of
    the tiles its kernel launches (``kerneltile.for_op``)."""
    dtype = cx.chip.compute.matmul_dtype(op.dtype, cx.graph.tensors[op.inputs[1].tensor].dtype)
    return math.ceil(compute_ps(op.flops, cx.matrix_rate(dtype)) * kerneltile.for_op(op, cx).stretch)


def feeds_from_sram(chip: ChipSpec) -> bool:
    """Whether a GEMM's operands reach the matrix units in a read from SRAM that no load counts
    (``feed_ps``): units that compute output tiles, and weights that do not live in SRAM (where
    they do, as on Groq, their stream from it is the GEMM's load)."""
    return chip.execution.unit_tile > 0 and not chip.scratchpad.home_for("weight")


def feed_ps(op: Op, cx: Context) -> int:
    """Picoseconds the operands of a GEMM take from SRAM to the matrix units, on a chip whose
    units each compute an output tile (``execution.unit_tile`` > 0) from their own share of the
    SRAM, where the SRAM stages tiles that loads bring in from another level. A unit's tile is the
    largest that share holds (``tiling.unit_edge``), and the tile sets how often each operand
    element is read (``tiling.feed_bytes``): a GPU's SMs read their operands from shared memory
    at its bandwidth (128 B per clock per SM on Hopper, microbench.csv row 44). At the presets'
    SRAM the feed of a large GEMM is faster than the matrix units; a small SRAM starves them.
    Where the weights live in SRAM (Groq), their stream from it is the GEMM's load already.
    Behind that SRAM, a GPU's L2 delivers each tile its operands (``kerneltile.for_op``): no less than
    their bytes at the L2's bandwidth (12.5 TB/s measured on an H200, measured.csv)."""
    ex = cx.chip.execution
    l2 = kerneltile.l2_rate(cx)
    from_l2 = transfer_ps(kerneltile.for_op(op, cx).l2_bytes, l2) if l2 else 0
    if not feeds_from_sram(cx.chip):
        return from_l2
    units = max(1, math.floor(cx.chip.compute.units * cx.compute_share))
    a_bits, b_bits = cx.bits(op.inputs[0].tensor), cx.bits(op.inputs[1].tensor)  # as SRAM holds them
    edge = tiling.unit_edge(cx.sram_bytes // units, a_bits, b_bits, ex.accumulator_bytes, cx.depth, ex.unit_tile)
    nbytes = tiling.feed_bytes(op.flops, op.dim("m"), op.dim("n"), edge, a_bits, b_bits)
    rate = rates.shared(rates.effective_bandwidth(cx.chip, Ref.level(cx.chip.scratchpad.name)), cx.compute_share)
    return max(from_l2, transfer_ps(nbytes, rate))


@register("matmul")
def lower_matmul(op: Op, cx: Context) -> tuple[Step, ...]:
    """C = A @ B, tiled; ``groups`` independent GEMMs of ``m`` rows each (grouped MoE experts)
    share the tile. Inputs after A and B (bias vectors, routing weights) are read once."""
    a_read, b_read, *extra = op.inputs
    a, b = a_read.tensor, b_read.tensor
    m, n, k, groups = op.dim("m"), op.dim("n"), op.dim("k"), op.dim("groups", 1)
    c_bits = BITS[cx.graph.tensors[op.outputs[0]].dtype]
    tile = _gemm(m, n, k, cx.bits(a), cx.bits(b), c_bits, cx.chip.execution.accumulator_bytes,
                 cx.sram_bytes, cx.depth, op.name)
    loads: dict[Ref, int] = {}
    # Re-fetch factors come from the tile; the bytes fetched once are what the op reads.
    refetch_a = tile.a_bytes // max(1, tiling.bits_bytes(m * k, cx.bits(a)))
    # Elements the GEMMs consume over what the op reads: above 1 when rows are routed to several
    # experts (MoE), 1 for a plain or batched GEMM.
    gathered = m * groups * k / max(1, a_read.bytes * 8 // cx.bits(a))
    _add_read(loads, cx, a, a_read.bytes, math.ceil(a_read.bytes * max(1.0, gathered)) * refetch_a)
    refetch_b = tile.b_bytes // max(1, tiling.bits_bytes(k * n, cx.bits(b)))
    _add_read(loads, cx, b, b_read.bytes, b_read.bytes * refetch_b)
    for r in extra:
        _add_read(loads, cx, r.tensor, r.bytes, r.bytes)
    stores: dict[Ref, int] = {}
    for out in op.outputs:
        _add(stores, cx.home(out), cx.graph.tensors[out].bytes)
    ex = cx.chip.execution
    w_dtype = cx.graph.tensors[b].dtype
    dtype = cx.chip.compute.matmul_dtype(op.dtype, w_dtype)
    peak, feed = peak_ps(op, cx), feed_ps(op, cx)
    # A kernel whose tiles keep only some units busy draws only their bandwidth (``kerneltile``).
    peak = at_share(peak, loads, stores, kerneltile.for_op(op, cx).share, cx)
    busy = max(peak, feed)
    energy, unpack, unpack_fj = cx.matrix_energy(op.flops, dtype), 0, 0
    if dtype != w_dtype and ex.dequant(w_dtype):
        weight = cx.graph.tensors[b]
        numel = math.prod(weight.shape)
        elements = math.ceil(numel * b_read.bytes / weight.bytes) * refetch_b  # touched weights, scales aside
        ops = math.ceil(elements * ex.dequant(w_dtype))
        unpack, unpack_fj = compute_ps(ops, cx.vector_rate()), cx.vector_energy(ops)
        if cx.stack.kernels.dequant_kernel == "fused":  # unpacking runs beside the multiply, as the next weights stream in
            busy, peak, unpack, energy, unpack_fj = max(busy, unpack), max(peak, unpack), 0, energy + unpack_fj, 0
    return (make_step("gemm", loads, stores, busy, op.flops, cx.depth, cx.sram_bytes,
                      {"tm": tile.tm, "tn": tile.tn}, unpack, energy_fj=energy, unpack_fj=unpack_fj,
                      feed_ps=busy - peak),)


def at_share(busy_ps: int, loads: dict[Ref, int], stores: dict[Ref, int], share: float, cx: Context) -> int:
    """Idle units leave their share of bandwidth unused: the busy ones take as long as the whole
    stream at that share would (shown as their compute time, not as a memory stall)."""
    if share >= 1:
        return busy_ps
    return max(busy_ps, *(transfer_ps(b, rates.shared(rates.effective_bandwidth(cx.chip, ref), share))
                          for ref, b in (*loads.items(), *stores.items())))


def _streams(op: Op, cx: Context) -> tuple[dict[Ref, int], dict[Ref, int]]:
    loads: dict[Ref, int] = {}
    stores: dict[Ref, int] = {}
    for r in op.inputs:
        _add(loads, cx.home(r.tensor), r.bytes)
    for out in op.outputs:
        _add(stores, cx.home(out), cx.graph.tensors[out].bytes)
    return loads, stores


@register("elementwise")
@register("norm")
@register("embedding")
def lower_stream(op: Op, cx: Context) -> tuple[Step, ...]:
    """Memory-bound ops stream their inputs through SRAM once: no reuse to tile for."""
    loads, stores = _streams(op, cx)
    busy = compute_ps(op.flops, cx.vector_rate())
    return (make_step(op.kind, loads, stores, busy, op.flops, cx.depth, cx.sram_bytes,
                      energy_fj=cx.vector_energy(op.flops)),)


@register("compute")
def lower_compute(op: Op, cx: Context) -> tuple[Step, ...]:
    """An op known only by FLOPs and bytes: its inputs and ``bytes`` stream once, FLOPs at matrix rate."""
    loads, stores = _streams(op, cx)
    extra = op.dim("bytes", 0) - sum(loads.values())
    if extra > 0:  # bytes the op touches beyond its inputs (e.g. a memory node's own traffic)
        _add(loads, cx.home(op.outputs[0]), extra)
    busy = compute_ps(op.flops, cx.matrix_rate(op.dtype))
    return (make_step("compute", loads, stores, busy, op.flops, cx.depth, cx.sram_bytes,
                      energy_fj=cx.matrix_energy(op.flops, op.dtype)),)


@register("attention")
def lower_attention(op: Op, cx: Context) -> tuple[Step, ...]:
    return _fused_attention(op, cx) if is_fused(op, cx.attention) else _unfused_attention(op, cx)


def is_fused(op: Op, attention: str) -> bool:
    """Whether an attention runs as one fused kernel: always with ``fused``; with ``context_unfused``
    only a decode step's (FasterTransformer's masked multi-head attention)."""
    return attention == "fused" or (attention == "context_unfused" and op.dim("q_len") == 1)


def _attn_shape(op: Op) -> tuple[int, int, int, int, int]:
    heads, kvh = op.dim("heads"), op.dim("kv_heads")
    return op.dim("batch"), heads, kvh, op.dim("q_len"), op.dim("kv_len")


def _fused_attention(op: Op, cx: Context) -> tuple[Step, ...]:
    batch, heads, kvh, q_len, kv_len = _attn_shape(op)
    hd = op.dim("head_dim")
    q, *kv_reads = op.inputs
    kv_bits = max(cx.bits(r.tensor) for r in kv_reads)
    served, reads = group_reads(heads // kvh, q_len, cx.stack.kernels.decode_group_heads)
    tile = tiling.attention_tile(q_rows=served * q_len, kv_len=kv_len, head_dim=hd,
                                 q_bits=cx.bits(q.tensor), kv_bits=kv_bits,
                                 acc_bytes=cx.chip.execution.accumulator_bytes, sram_bytes=cx.sram_bytes,
                                 depth=cx.depth, kv_bytes_once=sum(r.bytes for r in kv_reads),
                                 causal=bool(op.dim("causal", 0)))
    scale = reads * tile.kv_traffic / max(1, sum(r.bytes for r in kv_reads))
    loads: dict[Ref, int] = {}
    _add(loads, cx.home(q.tensor), q.bytes)
    for r in kv_reads:
        _add(loads, cx.home(r.tensor), math.ceil(r.bytes * scale))
    _, stores = _streams(op, cx)
    items = batch * kvh * reads * math.ceil(served * q_len / max(1, cx.chip.execution.unit_tile))
    share = attention_share(cx, items, kv_len)
    pairs = op.dim("pairs", q_len * kv_len)
    scores = batch * heads * pairs
    exact = attention_compute(cx, op.flops, op.dtype, scores)
    if cx.grid:  # each work item's loop over its keys fills and drains
        exact = filled(exact, cx.chip.execution.attention_fill, pairs / q_len / kv_split(cx, items, kv_len))
    busy = at_share(math.ceil(exact / Fraction(share)), loads, stores, share, cx)
    energy = cx.matrix_energy(op.flops, op.dtype) + cx.vector_energy(SOFTMAX_FLOPS_PER_SCORE * scores)
    return (make_step("flash", loads, stores, busy, op.flops, cx.depth, cx.sram_bytes,
                      {"block_rows": tile.block_rows, "passes": tile.passes}, energy_fj=energy),)


def attention_compute(cx: Context, flops: int, dtype: str, scores: int) -> Fraction:
    """A fused attention's compute in ps, before its fill: its matrix work, then its softmax. Where
    the chip declares its special-function units (``compute.special_peak``) the matrix work runs at
    the matrix peak and each score's exponential on those units, in series: FlashAttention-3's own
    accounting (Shah et al. 2024, section 3.1: an H100's 989 TFLOP/s of matmul against 3.9 TFLOP/s
    of special functions, so at head dimension 128 the exponentials take half the matmul's time).
    measured.csv's cuDNN rows on an H200 (head dimensions 64 and 128, causal and not, 512 to 16k
    keys) and microbench.csv rows 77-82 follow it with the fill (docs/validation.md); the GEMMs'
    ``dtype_efficiency``, measured on GEMMs, does not apply. Elsewhere the matrix work runs at the
    GEMMs' rate and the softmax's FLOPs on the vector units."""
    special = cx.special_rate()
    if special:
        return Fraction(flops * PS_PER_S, cx.peak_rate(dtype)) + Fraction(scores * PS_PER_S, special)
    return (Fraction(flops * PS_PER_S, cx.matrix_rate(dtype))
            + Fraction(SOFTMAX_FLOPS_PER_SCORE * scores * PS_PER_S, cx.vector_rate()))


def group_reads(group: int, q_len: int, per_item: int) -> tuple[int, int]:
    """(query heads a work item serves, reads of each KV head) for a fused attention over GQA
    groups of ``group`` query heads: a decode kernel whose items serve ``per_item`` heads
    (``kernels.decode_group_heads`` of the stack; TurboMind v0.1.0's serves 4, so a 70B group of 8 reads its
    KV head twice) reads it once per item; 0, or a prefill, packs the whole group into one read."""
    if not per_item or q_len > 1 or per_item >= group:
        return group, 1
    return per_item, math.ceil(group / per_item)


def _unfused_attention(op: Op, cx: Context) -> tuple[Step, ...]:
    """QK^T, softmax and PV as separate kernels: the score matrix goes through memory twice, the
    QK^T's scores in fp32 with ``context_unfused`` (FasterTransformer's GPT context, whose decode
    steps run a fused kernel), which its softmax reads and writes as probabilities in the
    activations' dtype.

    Attention inputs are ordered q, k, v, then optionally k_cache, v_cache (the trace schema).
    """
    batch, heads, _kvh, q_len, kv_len = _attn_shape(op)
    q, *kv_reads = op.inputs
    keys, values = kv_reads[0::2], kv_reads[1::2]
    act = cx.home(q.tensor)
    score_bytes = tiling.bits_bytes(batch * heads * q_len * kv_len, cx.bits(q.tensor))
    raw_bytes = tiling.bits_bytes(batch * heads * q_len * kv_len, 32) if cx.attention == "context_unfused" else score_bytes
    rate = cx.matrix_rate(op.dtype)
    half = op.flops // 2
    out, *appended = op.outputs  # appended: this step's keys and values, written to the cache

    qk_loads: dict[Ref, int] = {}
    _add(qk_loads, act, q.bytes)
    for r in keys:
        _add(qk_loads, cx.home(r.tensor), r.bytes)
    qk_stores: dict[Ref, int] = {}
    _add(qk_stores, act, raw_bytes)
    for name in appended:
        _add(qk_stores, cx.home(name), cx.graph.tensors[name].bytes)
    pv_loads: dict[Ref, int] = {act: score_bytes}
    for r in values:
        _add(pv_loads, cx.home(r.tensor), r.bytes)
    pv_stores: dict[Ref, int] = {}
    _add(pv_stores, cx.home(out), cx.graph.tensors[out].bytes)
    sm_flops = SOFTMAX_FLOPS_PER_SCORE * batch * heads * q_len * kv_len
    return (
        make_step("qk", qk_loads, qk_stores, compute_ps(half, rate), half, cx.depth, cx.sram_bytes,
                  energy_fj=cx.matrix_energy(half, op.dtype)),
        make_step("softmax", {act: raw_bytes}, {act: score_bytes}, compute_ps(sm_flops, cx.vector_rate()), 0,
                  cx.depth, cx.sram_bytes, energy_fj=cx.vector_energy(sm_flops)),
        make_step("pv", pv_loads, pv_stores, compute_ps(op.flops - half, rate), op.flops - half, cx.depth,
                  cx.sram_bytes, energy_fj=cx.matrix_energy(op.flops - half, op.dtype)),
    )


def tile_floor(op: Op, graph: OpGraph, chip: ChipSpec) -> int:
    """The SRAM an op's tiles need for their least traffic, as its lowering tiles it (the chip's
    buffers and accumulator; an attention that can be fused, as a fused kernel tiles it: a stack
    that runs it unfused needs no more); 0 for an op that only streams."""
    ex = chip.execution
    bits = {t: BITS[graph.tensors[t].dtype] for t in [r.tensor for r in op.inputs] + list(op.outputs)}
    if op.kind == "matmul":
        return tiling.gemm_floor(op.dim("m"), op.dim("n"), bits[op.inputs[0].tensor], bits[op.inputs[1].tensor],
                                 ex.accumulator_bytes, ex.prefetch_depth)
    if op.kind == "attention" and is_fused(op, "fused"):
        _, heads, kvh, q_len, _ = _attn_shape(op)
        q, *kv_reads = op.inputs
        return tiling.attention_floor((heads // kvh) * q_len, op.dim("head_dim"), bits[q.tensor],
                                      max(bits[r.tensor] for r in kv_reads), ex.accumulator_bytes, ex.prefetch_depth)
    return 0


def lower(op: Op, cx: Context) -> tuple[Step, ...]:
    return LOWERINGS[op.kind](op, cx)


# A scratchpad no operator outgrows: every tile the whole operator, every operand fetched once.
UNLIMITED_SRAM = 1 << 62


def capacity_bytes(op: Op, cx: Context, steps: tuple[Step, ...]) -> tuple[tuple[Ref, int], ...]:
    """Of what the op's lowered ``steps`` move at each level, the bytes beyond what it would move
    with unlimited SRAM (``UNLIMITED_SRAM``: each operand once, as its placement has it): the
    re-fetches its tiles add because SRAM is finite, a cache's capacity misses. The rest of its
    traffic is compulsory; that includes what its kernel moves whatever the SRAM (an unfused
    attention's scores, through memory and back). Only levels with some, by name."""
    unlimited = level_bytes(lower(op, dataclasses.replace(cx, room_bytes=UNLIMITED_SRAM)))
    extra = ((where, b - unlimited.get(where, 0)) for where, b in level_bytes(steps).items())
    return tuple(sorted(((where, b) for where, b in extra if b > 0), key=lambda kv: str(kv[0])))


def lowering_key(op: Op, cx: Context) -> tuple:
    """Everything a lowering reads: ops with equal keys (the same op in identical layers and
    micro-batches) lower to the same steps."""
    tensors = cx.graph.tensors
    ins = tuple((r.bytes, tensors[r.tensor].dtype, tensors[r.tensor].shape, tensors[r.tensor].bytes,
                 tensors[r.tensor].klass, cx.homes[r.tensor]) for r in op.inputs)
    outs = tuple((tensors[t].bytes, tensors[t].dtype, cx.homes[t]) for t in op.outputs)
    return (op.kind, op.dims, op.flops, op.dtype, ins, outs, cx.attention, cx.compute_share, cx.staging_bytes, cx.grid,
            cx.staged, cx.room_bytes, cx.stack.kernels)

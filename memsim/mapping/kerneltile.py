"""The output tile and the split of K that a GPU's GEMM library launches for a shape.

A GEMM kernel's thread blocks each compute one output tile, one per compute unit at a time, so
the tiles run in waves (``wave_factor``). A library such as cuBLAS carries kernels of many
tile sizes, some of which split the loop over K into parts whose partial sums a second pass adds,
and picks one per shape. On an H200 (``scripts/gpu_measure.py``, measured.csv) it picks tiles that
make about one wave or more: 64 x 64 for 128 rows by 4096 columns (128 tiles on 132 SMs), 256 x
128 from 1024 rows, and splits K where even small tiles leave units idle.

A smaller tile fills more units, but every tile reads its rows of A and its columns of B over
the whole of its K, through the L2, into the unit's shared memory: the operands' traffic from
the L2 is tiles x (tm x a + tn x b) x K bytes, so halving a tile's edges doubles it (a split's
partial sums, written and read back, count in that traffic, and its second kernel costs a
kernel's fixed cost, which ``families.gpu`` charges). The library's choice is modelled as the
candidate that finishes soonest: the slowest of its waves of tiles at the matrix rate, its operand
traffic at the L2's bandwidth, and its stream from memory at the share of the bandwidth its busy
units draw (few tiles leave units, and their bandwidth, idle: cuBLAS splits K for one row by 4096
columns). Tile edges run from ``MIN_EDGE`` to twice the chip's ``execution.unit_tile`` with at
most twice its area (cuBLAS's Hopper kernels go up to 256 x 128 and 320 x 128).

That is a stack's ``kernels.gemm_tiles: fill``. With ``fixed`` (the presets' default) every GEMM runs
``unit_tile``-edged tiles, as the kernels of the 2021-2024 stacks in calibration.csv fit; chips
without an L2 between memory and their units' SRAM also keep the hardware's tile (a systolic
array's edge): nothing there makes a smaller tile cost more or less.

A library may instead pick its tile by a rule of its own, which the time of the tile it picks
then follows: ``deepgemm`` is DeepGEMM's (``deepgemm_tile``), whose kernels are timed in
microbench.csv rows 7 and 24-27. A rule that counts waves, not time, can pick a slower tile for a
larger shape, as the library does; the bound that holds is the roofline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from memsim.core.units import PS_PER_S
from memsim.hardware import rates
from memsim.hardware.resource import Ref

if TYPE_CHECKING:
    from memsim.mapping.lower import Context
    from memsim.workload.graph import Op

MIN_EDGE = 16  # the narrowest tile edge a library's tensor-core kernels use beside a dimension larger than it
MAX_SPLIT = 16  # the most parts a library splits K into
MIN_SPLIT_K = 256  # elements of K: a part costs at least this much of its loop (a few pipeline stages' worth)
# DeepGEMM's tiles (deep_gemm/jit_kernels/gemm.py get_best_configs, first release, 2025-02): 64 rows
# for at most 64, else 128 (Hopper's wgmma computes 64 rows a warpgroup), 16 to 128 columns in steps of 8.
DEEPGEMM_ROWS = (64, 128)
DEEPGEMM_COLUMNS = tuple(range(16, 129, 8))


@dataclass(frozen=True, slots=True)
class KernelTile:
    tm: int  # output rows per tile
    tn: int  # output columns per tile
    split: int  # parts of K, each a tile of its own
    stretch: float  # compute time over the FLOPs at the matrix rate: the waves' idle and padded units
    l2_bytes: int  # operand (and partial-sum) bytes the tiles read from and write to the L2
    # Of the units the first wave keeps busy, and so of the memory bandwidth it draws; the units' own
    # tile (``fixed``) draws it all, as the stacks calibrated on it do.
    share: float = 1.0


def wave_factor(m: int, n: int, groups: int, units: int, unit_tile: int) -> float:
    """Compute stretch from running unit-sized output tiles on the compute units.

    A unit computes one tile of at most ``unit_tile`` x ``unit_tile`` outputs at a time, and a
    tile takes as long as the fullest one: the rows and columns left over make partial tiles
    that still take a whole tile's time on their unit. Fewer tiles than units leave units idle
    (one tile time in all); a last, partly filled wave costs its share of a wave. So the time is
    max(1, tiles / units) tile times, and it never falls when m, n or groups grow."""
    if unit_tile == 0:  # work spreads over the units finely (a wafer's cores): no waves
        return 1.0
    tiles = math.ceil(m / unit_tile) * math.ceil(n / unit_tile) * groups
    waves = max(1.0, tiles / units)
    return waves * units * min(m, unit_tile) * min(n, unit_tile) / (m * n * groups)


def edges(unit_tile: int) -> tuple[int, ...]:
    """The tile edges a library's kernels use on a chip whose unit works on ``unit_tile``."""
    out, edge = [], 2 * unit_tile
    while edge >= MIN_EDGE:
        out.append(edge)
        edge //= 2
    return tuple(sorted(out)) or (unit_tile,)


def candidate(m: int, n: int, k: int, groups: int, units: int, tm: int, tn: int, split: int,
              a_bits: int, b_bits: int, acc_bytes: int) -> KernelTile:
    """One kernel's tiles: their waves' stretch and their traffic through the L2."""
    # A part's loop costs at least MIN_SPLIT_K (or all of K): fill and drain are not shortened by a
    # split, so splitting a short K never pays, and no split makes a longer K cheaper.
    rows, cols, depth = min(m, tm), min(n, tn), max(math.ceil(k / split), min(k, MIN_SPLIT_K))
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * groups * split
    waves = max(1.0, tiles / units)
    stretch = waves * units * rows * cols * depth / (m * n * k * groups)
    operands = tiles * depth * (rows * a_bits + cols * b_bits) // 8
    partials = 2 * split * m * n * groups * acc_bytes if split > 1 else 0
    return KernelTile(tm, tn, split, stretch, operands + partials, min(1.0, tiles / units))


@lru_cache(maxsize=8192)
def choose(m: int, n: int, k: int, groups: int, units: int, unit_tile: int, a_bits: int, b_bits: int,
           acc_bytes: int, flops_ps: float, l2_bytes_ps: float, reduce_ps: int, stream_bytes: int = 0,
           stream_bytes_ps: float = 1.0) -> KernelTile:
    """The kernel that finishes soonest: ``flops_ps`` is the matrix rate (FLOPs a picosecond),
    ``l2_bytes_ps`` the L2's bandwidth (bytes a picosecond; 0: no choice, the unit's own tile),
    ``reduce_ps`` what the second kernel that adds a split's partial sums costs to start and drain,
    and ``stream_bytes`` what the GEMM moves from memory at ``stream_bytes_ps``, of which a kernel
    whose tiles keep only some units busy draws only their share."""
    if l2_bytes_ps <= 0 or unit_tile == 0:  # the units' own tile: no L2 to trade against, or no tiles
        return KernelTile(unit_tile, unit_tile, 1, wave_factor(m, n, groups, units, unit_tile), 0)
    flops = 2 * m * n * k * groups
    best: tuple[float, int, int, KernelTile] | None = None
    sizes = edges(unit_tile)
    for tm in sizes:
        for tn in sizes:
            if tm * tn > 2 * unit_tile * unit_tile:
                continue
            split = 1
            while split <= MAX_SPLIT:
                tile = candidate(m, n, k, groups, units, tm, tn, split, a_bits, b_bits, acc_bytes)
                ps = max(flops * tile.stretch / flops_ps, tile.l2_bytes / l2_bytes_ps,
                         stream_bytes / (stream_bytes_ps * tile.share)) + (reduce_ps if split > 1 else 0)
                key = (ps, -min(m, tm) * min(n, tn), split, tile)  # ties: the larger tile, the fewer parts
                if best is None or key[:3] < best[:3]:
                    best = key
                split *= 2
    assert best is not None
    return best[3]


@lru_cache(maxsize=8192)
def deepgemm_tile(m: int, n: int, k: int, groups: int, units: int, a_bits: int, b_bits: int,
                  acc_bytes: int) -> KernelTile:
    """DeepGEMM's tile for a shape, by its own rule: the fewest waves of tiles, then the fullest
    last wave, then the narrower tile; K is never split."""
    tm = DEEPGEMM_ROWS[0] if m <= DEEPGEMM_ROWS[0] else DEEPGEMM_ROWS[1]

    def rank(tn: int) -> tuple[int, int, int]:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * groups
        return math.ceil(tiles / units), -(tiles % units or units), tn

    tn = min(DEEPGEMM_COLUMNS, key=rank)
    return candidate(m, n, k, groups, units, tm, tn, 1, a_bits, b_bits, acc_bytes)


def l2_rate(cx: Context) -> int:
    """Bytes a second the op's share of the L2 delivers to the units' SRAM; 0 where the library
    keeps the units' own tile (the stack's ``kernels.gemm_tiles`` fixed) or no L2 sits between memory and a
    grid of units: nothing there makes a smaller tile cost more or less."""
    l2 = next((level for level in cx.chip.levels if level.kind_of.cache), None)
    if not cx.grid or l2 is None or cx.stack.kernels.gemm_tiles == "fixed":
        return 0
    return rates.shared(rates.effective_bandwidth(cx.chip, Ref.level(l2.name)), cx.compute_share)


def for_op(op: Op, cx: Context) -> KernelTile:
    """The output tile and K split the library launches for a GEMM (``kerneltile.choose``, or the
    library's own rule: ``deepgemm_tile``)."""
    ex = cx.chip.execution
    dtype = cx.chip.compute.matmul_dtype(op.dtype, cx.graph.tensors[op.inputs[1].tensor].dtype)
    units = max(1, math.floor(cx.chip.compute.units * cx.compute_share))
    l2 = l2_rate(cx)
    if l2 and cx.stack.kernels.gemm_tiles == "deepgemm":
        return deepgemm_tile(op.dim("m"), op.dim("n"), op.dim("k"), op.dim("groups", 1), units,
                             cx.bits(op.inputs[0].tensor), cx.bits(op.inputs[1].tensor), ex.accumulator_bytes)
    moved, memory = 0, 1.0
    if l2:  # the stream from memory only weighs in a choice
        weights = cx.home(op.inputs[1].tensor)
        memory = rates.shared(rates.effective_bandwidth(cx.chip, weights), cx.compute_share) / PS_PER_S
        moved = sum(r.bytes for r in op.inputs) + sum(cx.graph.tensors[t].bytes for t in op.outputs)
    return choose(op.dim("m"), op.dim("n"), op.dim("k"), op.dim("groups", 1), units, ex.unit_tile,
                  cx.bits(op.inputs[0].tensor), cx.bits(op.inputs[1].tensor), ex.accumulator_bytes,
                  cx.matrix_rate(dtype) / PS_PER_S, l2 / PS_PER_S, cx.dispatch.device_ps + cx.dispatch.host_ps, moved,
                  memory)

"""Attention's work items on a kernel's grid: how many units they keep busy, how FlashDecoding
splits their keys, and what each item's loop over its keys costs to fill and drain.

A unit works on one (sequence, KV head, query block) at a time. These are pure functions of the
chip and of whether the family launches a grid (``Context.grid``); ``lower`` uses them.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsim.mapping.lower import Context

KV_SPLIT_MIN = 64  # keys: a FlashDecoding split smaller than one K/V block is not worth its reduction


def attention_share(cx: Context, items: int, kv_len: int) -> float:
    """The fraction of the units an attention keeps busy, and so of the memory bandwidth it draws.

    A unit works on one (sequence, KV head, query block) at a time. A decode at small batch has
    fewer such items than units; FlashDecoding splits each item's keys into parts of at least
    ``KV_SPLIT_MIN`` keys (``execution.kv_split``: 0 as many as fill the units, 1 none). A unit
    draws its fair share of bandwidth, so idle units leave bandwidth unused. This is how a
    kernel's grid maps work to units (``Context.grid``, set by the family); a dataflow or wafer
    compiler spreads an op over its units (or region) whatever its shape: no idle units."""
    if _busy(cx, items):
        return 1.0
    return min(1.0, items * kv_split(cx, items, kv_len) / cx.chip.compute.units)


def _busy(cx: Context, items: int) -> bool:
    """Whether every unit has work without a split: the items fill the units, or the family
    spreads the op over them finely (no grid, or no unit tiles)."""
    return not cx.grid or cx.chip.execution.unit_tile == 0 or items >= cx.chip.compute.units


def kv_split(cx: Context, items: int, kv_len: int) -> float:
    """The parts FlashDecoding splits each attention work item's keys into (``attention_share``):
    1 where every unit has work without."""
    if _busy(cx, items):
        return 1.0
    split: float = cx.chip.execution.kv_split or math.ceil(cx.chip.compute.units / items)
    # Fractional at the limit: whole splits would let one more key add a split and speed the op up.
    return max(1.0, min(split, kv_len / KV_SPLIT_MIN))


def filled(busy_ps: Fraction, fill: int, keys: float) -> Fraction:
    """``busy_ps`` of attention whose work items each loop over ``keys`` keys (a query row's mean,
    over its splits), stretched by the loop's fill and drain: ``fill`` keys' worth of its main
    loop per item (``execution.attention_fill``), spent loading its queries and first keys before
    the loop runs at pace and finishing its output after. A FlashAttention kernel runs at a rate
    that rises with sequence length as keys / (keys + fill): microbench.csv rows 77-82 (FlashAttention-3
    on H100, head dim 128: 430 TFLOP/s at 512 keys to 621 at 16k) fit a fill of about two 128-key
    blocks. More keys per item never make the op faster: busy grows with them and the fill's share
    of it is fixed per item. Exact: ``lower`` rounds the op's time once, after the share of units
    it keeps busy divides it (a rounding before would let a bigger batch round to less)."""
    if not fill or keys <= 0:
        return Fraction(busy_ps)
    return busy_ps * (Fraction(keys) + fill) / Fraction(keys)

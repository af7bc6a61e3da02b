"""The rate a step gets from a level striped over channels: one exact fraction, shared by the
engine's transfers (``engine/resources.Server.duration``) and the prefetch grain
(``mapping/prefetch.grain``), so the two never disagree on rounding.

A step with ``share`` of a level of ``channels`` channels and ``bandwidth`` bytes/s in all
stripes its transfers over whole channels, rounded down (``width``), so regions never take more
channels between them than there are: it moves ``bandwidth x width / channels`` bytes/s. A step
with less than one channel's share gets its share of one, ``bandwidth x share``. The rate is a
fraction, never a truncated per-channel integer, and a transfer's bytes are never rounded up to
whole bytes per channel: at equal total bandwidth, a whole chip's step takes the same time
whatever the channel count (a billion channels of a few bytes/s each included).
"""
from __future__ import annotations

import math

from memsim.units import PS_PER_S


def width(channels: int, share: float) -> int:
    """The whole channels a step with ``share`` of a level stripes over (at least one)."""
    return max(1, min(channels, int(channels * share + 1e-9)))


def rate(bandwidth: int, channels: int, share: float = 1.0) -> tuple[int, int]:
    """Bytes per second a step with ``share`` of the level gets, as (numerator, denominator)."""
    if channels * share < 1 - 1e-9:  # less than a channel: its share of one
        return max(1, int(bandwidth * share)), 1
    return bandwidth * width(channels, share), channels


def duration_ps(nbytes: int, bandwidth: int, channels: int = 1, share: float = 1.0) -> int:
    """Time to move ``nbytes`` at that rate, rounded up to a whole picosecond (exact integers)."""
    num, den = rate(bandwidth, channels, share)
    return -(-nbytes * PS_PER_S * den // num)


def exact_unit(bandwidth: int, channels: int = 1, share: float = 1.0) -> int:
    """The fewest bytes that move in a whole number of picoseconds at that rate."""
    num, den = rate(bandwidth, channels, share)
    return num // math.gcd(num, PS_PER_S * den)

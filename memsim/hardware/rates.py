"""Rates and shares: the bandwidth a level or link gives, at its peak or as achieved, to the whole
chip or to a share of it, and a share of a capacity or a compute rate. The mapping, the roofline,
the prefetch grain and the engine all take them from here, so no two disagree on a rounding.

A ``Share`` is an exact fraction of a chip: a wafer region's (or one operator's part of a region)
share of its cores, SRAM and memory channels. Shares are made exact where they are made
(``mapping.regions``), so a region of a third of a chip of three channels has one channel, with
no tolerance.

A step with ``share`` of a level of ``channels`` channels and ``bandwidth`` bytes/s in all stripes
its transfers over whole channels, rounded down (``width``), so regions never take more channels
between them than there are: it moves ``bandwidth x width / channels`` bytes/s. A step with less
than one channel's share gets its share of one, ``bandwidth x share``. The rate is a fraction,
never a truncated per-channel integer, and a transfer's bytes are never rounded up to whole bytes
per channel: at equal total bandwidth, a whole chip's step takes the same time whatever the
channel count (a billion channels of a few bytes/s each included).
"""
from __future__ import annotations

import math
from fractions import Fraction

from memsim.core.units import PS_PER_S
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec


class Share(Fraction):
    """An exact fraction of a chip, a ``Fraction`` whose hash is worked out once: shares key the
    mapping's caches for every operator of every micro-batch, and a fraction's hash is costly.
    Arithmetic on shares gives plain fractions; ``share_of`` makes one a share again."""

    __slots__ = ("_hash",)

    def __hash__(self) -> int:  # type: ignore[override]  # Fraction's, kept
        try:
            return self._hash
        except AttributeError:
            self._hash: int = Fraction.__hash__(self)
            return self._hash


def share_of(value: Fraction | int) -> Share:
    """``value`` as a ``Share`` (itself where it is one)."""
    return value if type(value) is Share else Share(value)


WHOLE = Share(1)


def peak_bandwidth(chip: ChipSpec, where: Ref) -> int:
    """Peak bandwidth of a level (limited by the link it is reached over) or of a link."""
    if where.is_link:
        return chip.link(where.name).peak_bandwidth
    lvl = chip.level(where.name)
    bw = lvl.bandwidth_bytes_per_s * (chip.compute.units if lvl.scope == "unit" else 1)
    return min(bw, chip.link(lvl.via).peak_bandwidth) if lvl.via else bw


def effective_bandwidth(chip: ChipSpec, where: Ref) -> int:
    """Achievable bandwidth of a level (limited by the link it is reached over) or a link."""
    if where.is_link:
        return chip.link(where.name).effective_bandwidth
    level = chip.level(where.name)
    bw = level.effective_bandwidth(chip.compute.units)
    return min(bw, chip.link(level.via).effective_bandwidth) if level.via else bw


def shared(rate: int | float, share: Share | float) -> int:
    """A share of a rate (bytes/s, FLOP/s), rounded down, at least 1."""
    return max(1, math.floor(rate * share)) if share != 1 else max(1, int(rate))


def shared_capacity(capacity: int, share: Share) -> int:
    """A share of a capacity in bytes, rounded to the nearest byte."""
    return capacity if share == 1 else round(capacity * share)


def width(channels: int, share: Share) -> int:
    """The whole channels a step with ``share`` of a level stripes over (at least one)."""
    return channels if share == 1 else max(1, min(channels, math.floor(channels * share)))


def rate(bandwidth: int, channels: int, share: Share = WHOLE) -> tuple[int, int]:
    """Bytes per second a step with ``share`` of the level gets, as (numerator, denominator)."""
    if share != 1 and channels * share < 1:  # less than a channel: its share of one
        return shared(bandwidth, share), 1
    return bandwidth * width(channels, share), channels


def duration_ps(nbytes: int, bandwidth: int, channels: int = 1, share: Share = WHOLE) -> int:
    """Time to move ``nbytes`` at that rate, rounded up to a whole picosecond (exact integers)."""
    num, den = rate(bandwidth, channels, share)
    return -(-nbytes * PS_PER_S * den // num)


def exact_unit(bandwidth: int, channels: int = 1, share: Share = WHOLE) -> int:
    """The fewest bytes that move in a whole number of picoseconds at that rate."""
    num, den = rate(bandwidth, channels, share)
    return num // math.gcd(num, PS_PER_S * den)

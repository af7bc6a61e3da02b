"""The striped rate: exact at any channel count, whole channels for a share, a share of one below it."""
from __future__ import annotations

import pytest

from memsim.hardware import stripes
from memsim.units import PS_PER_S


@pytest.mark.parametrize("channels", [1, 3, 5, 16, 10**8, 2**31 - 1])
def test_whole_level_time_does_not_depend_on_channels(channels):
    bw = 3_350_000_000_000
    assert stripes.duration_ps(1234567, bw, channels) == -(-1234567 * PS_PER_S // bw)
    assert stripes.duration_ps(1, bw, channels) == 1  # one byte is not one byte per channel


def test_a_share_takes_whole_channels_rounded_down():
    assert stripes.width(4, 0.5) == 2 and stripes.width(3, 0.5) == 1 and stripes.width(4, 1.0) == 4
    assert stripes.rate(1000, 3, 0.5) == (1000, 3)  # one channel of three
    assert stripes.rate(1000, 4, 0.1) == (100, 1)  # under a channel: its share of one


@pytest.mark.parametrize("bw,channels,share", [(3_350_000_000_000, 5, 1.0), (1_000_003, 7, 0.5), (999, 1, 1.0),
                                               (2_039_000_000_000, 2**31 - 1, 0.25)])
def test_exact_unit_moves_in_whole_picoseconds(bw, channels, share):
    unit = stripes.exact_unit(bw, channels, share)
    num, den = stripes.rate(bw, channels, share)
    assert (unit * PS_PER_S * den) % num == 0
    if unit <= 10**6:  # and it is the fewest
        assert all((n * PS_PER_S * den) % num for n in range(1, unit))

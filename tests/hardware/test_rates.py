"""Rates and shares, and the striped rate: exact at any channel count, whole channels for a share, a share of one below it."""
from __future__ import annotations

from fractions import Fraction

import pytest

from memsim.core.units import PS_PER_S
from memsim.hardware import rates


@pytest.mark.parametrize("channels", [1, 3, 5, 16, 10**8, 2**31 - 1])
def test_whole_level_time_does_not_depend_on_channels(channels):
    bw = 3_350_000_000_000
    assert rates.duration_ps(1234567, bw, channels) == -(-1234567 * PS_PER_S // bw)
    assert rates.duration_ps(1, bw, channels) == 1  # one byte is not one byte per channel


def test_a_share_takes_whole_channels_rounded_down():
    assert rates.width(4, Fraction(1, 2)) == 2 and rates.width(3, Fraction(1, 2)) == 1 and rates.width(4, Fraction(1)) == 4
    assert rates.rate(1000, 3, Fraction(1, 2)) == (1000, 3)  # one channel of three
    assert rates.rate(1000, 4, Fraction(1, 10)) == (100, 1)  # under a channel: its share of one


@pytest.mark.parametrize("bw,channels,share", [(3_350_000_000_000, 5, Fraction(1)), (1_000_003, 7, Fraction(1, 2)),
                                               (999, 1, Fraction(1)), (2_039_000_000_000, 2**31 - 1, Fraction(1, 4))])
def test_exact_unit_moves_in_whole_picoseconds(bw, channels, share):
    unit = rates.exact_unit(bw, channels, share)
    num, den = rates.rate(bw, channels, share)
    assert (unit * PS_PER_S * den) % num == 0
    if unit <= 10**6:  # and it is the fewest
        assert all((n * PS_PER_S * den) % num for n in range(1, unit))


def test_a_share_is_a_fraction_that_keeps_its_hash():
    from fractions import Fraction

    from memsim.hardware.rates import WHOLE, Share, share_of

    third = Share(1, 3)
    assert third == Fraction(1, 3) and hash(third) == hash(Fraction(1, 3)) == hash(third)
    assert {third: "a"}[Fraction(1, 3)] == "a" and type(third * 2) is Fraction
    assert share_of(third) is third and type(share_of(Fraction(2, 3))) is Share and share_of(1) == WHOLE
    import pickle

    again = pickle.loads(pickle.dumps(third))
    assert type(again) is Share and again == third and hash(again) == hash(third)

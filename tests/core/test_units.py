"""Quantities: parsing to base units, refusing ambiguous input, exact formatting, rounded-up time."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim.core import units
from memsim.core.units import UnitError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50 MiB", 50 * 2**20),
        ("80 GB", 80 * 10**9),
        ("1.5 KB", 1500),
        ("1.5 KiB", 1536),
        ("17712 KiB", 17712 * 1024),
        ("4 B", 4),
        ("50MiB", 50 * 2**20),  # no space
        ("  2 TiB ", 2 * 2**40),
        ("8 Gb", 10**9),  # bits
        ("1 Kib", 128),
        ("3 b", 1),  # 3 bits round up to a whole byte
    ],
)
def test_parse_bytes(text, expected):
    assert units.parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.35 TB/s", 3_350_000_000_000),
        ("2039 GB/s", 2_039_000_000_000),
        ("19.5 TB/s", 19_500_000_000_000),
        ("100 Gb/s", 12_500_000_000),  # bits per second
        ("1 KiB/s", 1024),
        ("64 GB/s", 64 * 10**9),
    ],
)
def test_parse_bandwidth(text, expected):
    assert units.parse_bandwidth(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("600 ns", 600_000),
        ("1 us", 10**6),
        ("2 ms", 2 * 10**9),
        ("1 s", 10**12),
        ("30 ps", 30),
        ("1.5 ns", 1500),
        ("0.5 ps", 1),  # rounds up to a whole picosecond
    ],
)
def test_parse_time(text, expected):
    assert units.parse_time_ps(text) == expected


def test_parse_time_micro_sign():
    # The time table lists "µs", so a micro sign must parse like "us".
    assert units.parse_time_ps("3 µs") == units.parse_time_ps("3 us") == 3 * 10**6


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("989 TFLOP/s", 989 * 10**12),
        ("1979 TOPS", 1979 * 10**12),
        ("19.5 TFLOP/s", 19_500 * 10**9),
        ("67 TFLOPS", 67 * 10**12),
        ("2 POP/s", 2 * 10**15),
    ],
)
def test_parse_flops(text, expected):
    assert units.parse_flops(text) == expected


@pytest.mark.parametrize("parser", [units.parse_bytes, units.parse_bandwidth, units.parse_time_ps, units.parse_flops])
@pytest.mark.parametrize("value", [3.35, 3, "3.35", "42", True])
def test_unitless_numbers_are_refused(parser, value):
    with pytest.raises(UnitError):
        parser(value)


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (units.parse_bytes, "3 ns"),
        (units.parse_bytes, "3 TB/s"),
        (units.parse_bytes, "3 TFLOP/s"),
        (units.parse_bytes, "3 mB"),  # milli is not a size prefix
        (units.parse_bandwidth, "3 GB"),
        (units.parse_bandwidth, "3 ns"),
        (units.parse_bandwidth, "3 TFLOP/s"),
        (units.parse_time_ps, "3 B"),
        (units.parse_time_ps, "3 GB/s"),
        (units.parse_time_ps, "3 Ms"),
        (units.parse_flops, "3 TB/s"),
        (units.parse_flops, "3 ns"),
        (units.parse_bytes, "GB"),
        (units.parse_bytes, "1..2 GB"),
        (units.parse_bytes, "1 G B"),
    ],
)
def test_wrong_kind_or_garbage_is_refused(parser, text):
    with pytest.raises(UnitError):
        parser(text)


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (units.parse_bytes, "-1 GB"),
        (units.parse_bandwidth, "-1 TB/s"),
        (units.parse_time_ps, "-5 ns"),
        (units.parse_flops, "-1 TFLOP/s"),
        (units.parse_count, "-3"),
        (units.parse_count, -3),
    ],
)
def test_negative_values_are_refused(parser, text):
    with pytest.raises(UnitError, match="negative"):
        parser(text)


def test_unit_error_is_a_value_error_with_the_input():
    with pytest.raises(ValueError) as info:
        units.parse_bandwidth("3.35")
    assert "3.35" in str(info.value)


def test_parse_count_and_ratio():
    assert units.parse_count("132") == 132
    assert units.parse_count(7) == 7
    for bad in (1.5, "1.5", True, None):
        with pytest.raises(UnitError):
            units.parse_count(bad)
    assert units.parse_ratio(0.7) == 0.7
    assert units.parse_ratio("1") == 1.0
    for bad in (0, 1.01, -0.5, "x", True):
        with pytest.raises(UnitError):
            units.parse_ratio(bad)


@pytest.mark.parametrize(
    ("fmt", "value", "text"),
    [
        (units.format_bytes, 52_428_800, "50 MiB"),
        (units.format_bytes, 80_000_000_000, "80 GB"),  # the docstring's own example
        (units.format_bytes, 4, "4 B"),
        (units.format_bytes, 0, "0 B"),
        (units.format_bandwidth, 3_350_000_000_000, "3350 GB/s"),
        (units.format_time, 600_000, "600 ns"),
        (units.format_time, 2_000_000, "2 us"),
        (units.format_time, 0, "0 ps"),
        (units.format_flops, 989 * 10**12, "989 TFLOP/s"),
    ],
)
def test_format_examples(fmt, value, text):
    assert fmt(value) == text


_SIZES = st.one_of(
    st.integers(min_value=0, max_value=10**20),
    st.builds(lambda a, e: a * 2**e, st.integers(1, 10**6), st.integers(0, 50)),
    st.builds(lambda a, e: a * 10**e, st.integers(1, 10**6), st.integers(0, 18)),
)


@given(_SIZES)
def test_format_bytes_round_trips(value):
    assert units.parse_bytes(units.format_bytes(value)) == value


@given(_SIZES)
def test_format_bandwidth_round_trips(value):
    assert units.parse_bandwidth(units.format_bandwidth(value)) == value


@given(_SIZES)
def test_format_time_round_trips(value):
    assert units.parse_time_ps(units.format_time(value)) == value


@given(_SIZES)
def test_format_flops_round_trips(value):
    assert units.parse_flops(units.format_flops(value)) == value


@pytest.mark.parametrize("kind", ["bytes", "bandwidth", "time", "flops", "count", "power", "frequency"])
def test_formatters_and_parsers_agree_by_kind(kind):
    for value in (1, 1000, 1024, 3_350_000_000_000, 30096 * 1024):
        assert units.PARSERS[kind](units.FORMATTERS[kind](value)) == value


def test_transfer_ps_exact_and_rounded_up():
    assert units.transfer_ps(0, 10**9) == 0
    assert units.transfer_ps(10**9, 10**9) == 10**12  # 1 GB at 1 GB/s is one second
    assert units.transfer_ps(1, 10**12) == 1
    assert units.transfer_ps(1, 3) == 333_333_333_334  # 333333333333.33 rounds up
    assert units.transfer_ps(1, 2 * 10**12) == 1  # half a picosecond rounds up to one


def test_compute_ps_exact_and_rounded_up():
    assert units.compute_ps(0, 989 * 10**12) == 0
    assert units.compute_ps(989 * 10**12, 989 * 10**12) == 10**12
    assert units.compute_ps(1, 989 * 10**12) == 1
    assert units.compute_ps(10, 3 * 10**12) == 4  # 3.33 ps rounds up


@given(st.integers(0, 10**15), st.integers(1, 10**16))
def test_transfer_ps_is_the_ceiling(nbytes, rate):
    ps = units.transfer_ps(nbytes, rate)
    # ps is the least integer with ps * rate >= nbytes * 1e12
    assert ps * rate >= nbytes * units.PS_PER_S
    assert ps == 0 or (ps - 1) * rate < nbytes * units.PS_PER_S


def test_human_bytes_and_ps_to_s():
    assert units.human_bytes(14_294_237_188) == "14.29 GB"
    assert units.human_bytes(999) == "999 B"
    assert units.ps_to_s(1_500_000_000_000) == 1.5


@pytest.mark.parametrize(("parse", "text"), [
    (units.parse_bandwidth, "1e400 TB/s"),
    (units.parse_bandwidth, "1e999999999 TB/s"),  # refused before 10^999999999 is expanded
    (units.parse_flops, "1e400 TFLOP/s"),
    (units.parse_bytes, "1e31 B"),
    (units.parse_time_ps, "1e-999999999 s"),
    (units.parse_bytes, "1" * 90 + " B"),
])
def test_quantities_past_range_are_refused_with_a_short_message(parse, text):
    with pytest.raises(UnitError, match="out of range") as info:
        parse(text)
    assert len(str(info.value)) < 120


def test_largest_quantity_is_accepted():
    assert units.parse_bytes("1e30 B") == units.MAX_VALUE
    assert units.parse_flops("1e18 TFLOP/s") == units.MAX_VALUE


@pytest.mark.parametrize("value", [10**400, "1" * 5000, True, 2.5, None, [1]])
def test_parse_count_refuses_what_is_not_a_whole_number_in_range(value):
    with pytest.raises(UnitError):
        units.parse_count(value)


@pytest.mark.parametrize("value", [10**400, "inf", "nan", float("nan"), 0, 1.5, True, None, [0.5]])
def test_parse_ratio_refuses_what_is_not_a_finite_fraction(value):
    with pytest.raises(UnitError):
        units.parse_ratio(value)


@pytest.mark.parametrize(("value", "kwargs", "needle"), [
    (float("inf"), {"whole": False}, "finite"),
    (float("nan"), {"whole": False}, "finite"),
    (1.5, {}, "whole number"),
    (True, {}, "whole number"),
    ("3", {}, "whole number"),
    (-1, {}, "negative"),
    (0, {"least": 1}, "at least 1"),
    (10**31, {}, "out of range"),
])
def test_check_number(value, kwargs, needle):
    with pytest.raises(UnitError, match=needle):
        units.check_number(value, **kwargs)
    assert units.check_number(7) == 7 and units.check_number(0.5, whole=False) == 0.5


@pytest.mark.parametrize("text", ["1" + " " * 300_000 + "x", "9" * 300_000 + "B", " " * 101 + "1 B",
                                  "1" * 5000 + " B"])  # (past Python's int-from-text digit limit)
def test_a_quantity_longer_than_any_needs_is_refused_before_it_is_parsed(text):
    """A 300 kB quantity string backtracked quadratically in the unit parser (issue 20): one past
    ``MAX_QUANTITY`` characters is refused as such, its message showing a bounded prefix."""
    with pytest.raises(units.UnitError) as info:
        units.parse_bytes(text)
    message = str(info.value)
    assert f"{len(text)} characters, at most {units.MAX_QUANTITY}" in message and len(message) < 200
    assert units.parse_bytes(" " * 40 + "1.5 GiB" + " " * 40) == 3 * 2**29  # within the bound, blanks are fine


def test_shown_never_builds_the_repr_of_an_alias_bomb():
    """A list nesting one list ten billion items deep (as YAML aliases build it from a few hundred
    bytes) is shown by its first items only."""
    bomb: list = ["lol"] * 10
    for _ in range(10):
        bomb = [bomb] * 10
    text = units.shown(bomb)
    assert text.startswith("[[[") and len(text) <= 40
    assert units.shown([1, 2, 3]) == "[1, 2, 3]" and units.shown("abc") == "'abc'"

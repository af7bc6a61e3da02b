"""Quantities as people write them (``3.35 TB/s``, ``50 MiB``, ``600 ns``) and exact integer time.

Simulated time is an integer number of picoseconds. Parsing returns plain numbers in
base units (bytes, bytes/s, ps, FLOP/s); formatting writes a value back in a form that
parses to exactly the same number.
"""
from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

PS_PER_S = 10**12
# No quantity memsim models comes near 10^30 of its base unit (bytes, B/s, ps, FLOP/s) or as a
# count; past it, products in the engine would leave float range. A number written with an
# exponent beyond +-40 is refused before it is expanded (10^999999999 would take minutes).
MAX_VALUE = 10**30
_MAX_EXPONENT = 40
MAX_QUANTITY = 100  # characters: "1.5 TB/s" needs eight, a number written out to 1e30 with all its digits 40

_PREFIX_DEC = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_PREFIX_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[A-Za-zµμ/]*)\s*$")

_TIME = {"ps": 1, "ns": 10**3, "us": 10**6, "µs": 10**6, "μs": 10**6, "ms": 10**9, "s": 10**12}


class UnitError(ValueError):
    """A quantity string could not be parsed; the message says why."""


def ps_of(seconds: float) -> int:
    """Seconds as the nearest whole picosecond: where a time given in seconds enters an integer clock."""
    return round(seconds * PS_PER_S)


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)``, shortened for a one-line message. Containers and strings are shown by
    their first items and characters only (``reprlib``): the repr of a YAML alias bomb, a few
    kilobytes that nest one list a billion times, is never built."""
    if isinstance(value, int) and abs(value) >= 10**limit:
        bits = abs(value).bit_length()  # str() of an int past 4300 digits raises
        return f"a {len(str(abs(value)))}-digit number" if bits < 14_000 else f"a number of {bits} bits"
    text = _SHORT.repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


MAX_LABEL = 80  # characters of a name an error repeats; a longer name, or one not text, is shown otherwise


def label(item: object, otherwise: str) -> str:
    """How an error names a list entry (a mapping with a ``name``) as it is read: by its name
    where that is a short text, else ``otherwise`` (its position). A name may be anything, an
    alias bomb included: it is never formatted whole."""
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) and 0 < len(name) <= MAX_LABEL else otherwise


def entry(table: str, name: object) -> str:
    """How an error names an entry of a table by its name: ``levels[hbm]``; a name that is not a
    short text by a bounded repr of it."""
    return f"{table}[{name if isinstance(name, str) and len(name) <= MAX_LABEL else shown(name)}]"


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 80, 80, 80
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 4


def _split(text: str) -> tuple[Fraction, str]:
    if isinstance(text, bool):
        raise UnitError(f"expected a quantity, got {text!r}")
    if isinstance(text, (int, float)):
        raise UnitError(f"{shown(text)} has no unit")
    if not isinstance(text, str):
        raise UnitError(f"expected a quantity, got {shown(text)}")
    if len(text) > MAX_QUANTITY:  # refused before matching: a long run of blanks makes the match quadratic
        raise UnitError(f"{shown(text)} is too long for a quantity ({len(text)} characters, at most {MAX_QUANTITY})")
    m = _RE.match(text)
    if not m:
        raise UnitError(f"cannot parse {shown(text)} as a quantity")
    num = Decimal(m.group("num"))
    if num and not -_MAX_EXPONENT <= num.adjusted() <= _MAX_EXPONENT:
        raise UnitError(f"{shown(text)} is out of range (at most 1e30 in base units)")
    return Fraction(num), m.group("unit")


def _prefixed(unit: str, base: str) -> int | None:
    """Multiplier for ``unit`` = prefix + ``base`` (e.g. ``GiB`` for base ``B``), else None."""
    if not unit.endswith(base):
        return None
    prefix = unit[: len(unit) - len(base)]
    if prefix in _PREFIX_BIN:
        return _PREFIX_BIN[prefix]
    return _PREFIX_DEC.get(prefix)


def _nonneg_int(value: Fraction, text: str) -> int:
    if value < 0:
        raise UnitError(f"{shown(text)} is negative")
    if value > MAX_VALUE:
        raise UnitError(f"{shown(text)} is out of range (at most 1e30 in base units)")
    return math.ceil(value)


def check_number(value: object, least: float = 0, whole: bool = True) -> int | float:
    """``value`` when it is a finite number (a whole one if ``whole``, not a bool) from ``least``
    to ``MAX_VALUE``; otherwise a ``UnitError`` that says why. For numbers that carry no unit
    (counts, fractions, trace fields) wherever they come from: YAML, JSON or Python."""
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise UnitError(f"expected a {'whole number' if whole else 'number'}, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"expected a finite number, got {shown(value)}")
    if value < least:
        raise UnitError("must not be negative" if least == 0 else f"must be at least {least:g}, got {shown(value)}")
    if value > MAX_VALUE:
        raise UnitError(f"{shown(value)} is out of range (at most 1e30)")
    return value


def parse_bytes(text: str) -> int:
    """``"50 MiB"`` -> 52428800. Bits (``Gb``) are accepted and rounded up to whole bytes."""
    num, unit = _split(text)
    mult = _prefixed(unit, "B")
    if mult is not None:
        return _nonneg_int(num * mult, text)
    mult = _prefixed(unit, "b")
    if mult is not None:
        return _nonneg_int(num * mult / 8, text)
    raise UnitError(f"{text!r} is not a size (use B, KiB, MiB, GB, ...)")


def parse_bandwidth(text: str) -> int:
    """``"3.35 TB/s"`` -> 3350000000000 bytes per second (``Gb/s`` means bits)."""
    num, unit = _split(text)
    if "/" not in unit or not unit.endswith("/s"):
        raise UnitError(f"{text!r} is not a bandwidth (use B/s, GB/s, TB/s, Gb/s, ...)")
    size = unit[:-2]
    for base, div in (("B", 1), ("b", 8)):
        mult = _prefixed(size, base)
        if mult is not None:
            return _nonneg_int(num * mult / div, text)
    raise UnitError(f"{text!r} is not a bandwidth (use B/s, GB/s, TB/s, Gb/s, ...)")


def parse_time_ps(text: str) -> int:
    """``"600 ns"`` -> 600000 (integer picoseconds)."""
    num, unit = _split(text)
    if unit not in _TIME:
        raise UnitError(f"{text!r} is not a time (use ps, ns, us, ms, s)")
    return _nonneg_int(num * _TIME[unit], text)


def parse_flops(text: str) -> int:
    """``"989 TFLOP/s"`` or ``"1979 TOPS"`` -> operations per second."""
    num, unit = _split(text)
    for base in ("FLOP/s", "FLOPS", "OP/s", "OPS"):
        mult = _prefixed(unit, base)
        if mult is not None:
            return _nonneg_int(num * mult, text)
    raise UnitError(f"{text!r} is not a compute rate (use TFLOP/s, TOPS, ...)")


_ENERGY = {"fJ": 1, "pJ": 10**3, "nJ": 10**6}  # in femtojoules, the base unit of energy figures
_POWER = {"mW": 1, "W": 10**3, "kW": 10**6, "MW": 10**9}  # in milliwatts, the base unit of power
_FREQUENCY = {"Hz": 1, "kHz": 10**3, "MHz": 10**6, "GHz": 10**9}  # in hertz


def _per(text: str, table: dict[str, int], bases: tuple[str, ...], what: str, example: str) -> int:
    num, unit = _split(text)
    head, _, base = unit.partition("/")
    if head in table and base in bases:
        return _nonneg_int(num * table[head], text)
    raise UnitError(f"{text!r} is not {what} (use {example})")


def parse_bit_energy(text: str) -> int:
    """``"3.9 pJ/bit"`` -> 3900 femtojoules per bit moved."""
    return _per(text, _ENERGY, ("bit", "b"), "an energy per bit", "fJ/bit, pJ/bit, nJ/bit")


def parse_flop_energy(text: str) -> int:
    """``"0.5 pJ/FLOP"`` -> 500 femtojoules per operation."""
    return _per(text, _ENERGY, ("FLOP", "OP"), "an energy per operation", "fJ/FLOP, pJ/FLOP")


def parse_power(text: str) -> int:
    """``"400 W"`` -> 400000 milliwatts."""
    num, unit = _split(text)
    if unit not in _POWER:
        raise UnitError(f"{text!r} is not a power (use mW, W, kW, MW)")
    return _nonneg_int(num * _POWER[unit], text)


def parse_frequency(text: str) -> int:
    """``"1410 MHz"`` -> 1410000000 hertz."""
    num, unit = _split(text)
    if unit not in _FREQUENCY:
        raise UnitError(f"{text!r} is not a frequency (use Hz, kHz, MHz, GHz)")
    return _nonneg_int(num * _FREQUENCY[unit], text)


def parse_count(text: str | int) -> int:
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise UnitError(f"expected a whole number, got {shown(text)}")
    try:
        value = int(text.strip()) if isinstance(text, str) and len(text) < 100 else text
    except ValueError:
        value = None
    if not isinstance(value, int):
        raise UnitError(f"expected a whole number, got {shown(text)}")
    if value < 0:
        raise UnitError(f"{shown(text)} is negative")
    return int(check_number(value))


def _fraction(text: str | float) -> float:
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise UnitError(f"expected a number, got {shown(text)}")
    try:
        return float(text)
    except (OverflowError, ValueError):
        raise UnitError(f"expected a number, got {shown(text)}") from None


def parse_ratio(text: str | float) -> float:
    """A fraction in (0, 1]: a number, or text that reads as one."""
    value = _fraction(text)
    if not (0.0 < value <= 1.0):  # NaN fails this too
        raise UnitError(f"{shown(text)} must be in (0, 1]")
    return value


def parse_share(text: str | float) -> float:
    """A fraction in [0, 1): a number, or text that reads as one (a share that may be none, never all)."""
    value = _fraction(text)
    if not (0.0 <= value < 1.0):  # NaN fails this too
        raise UnitError(f"{shown(text)} must be in [0, 1)")
    return value


PARSERS = {
    "bytes": parse_bytes,
    "bandwidth": parse_bandwidth,
    "time": parse_time_ps,
    "flops": parse_flops,
    "count": parse_count,
    "ratio": parse_ratio,
    "share": parse_share,
    "bit_energy": parse_bit_energy,
    "flop_energy": parse_flop_energy,
    "power": parse_power,
    "frequency": parse_frequency,
}


_BIN_TABLE = [("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]
_DEC_TABLE = [("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)]


def format_bytes(value: int) -> str:
    """Exact, re-parseable, shortest: 52428800 -> ``"50 MiB"``, 80000000000 -> ``"80 GB"``."""
    exact = [(value // mult, name) for name, mult in _BIN_TABLE + _DEC_TABLE if value and value % mult == 0]
    if not exact:
        return f"{value} B"
    number, name = min(exact, key=lambda x: x[0])
    return f"{number} {name}B"


def format_bandwidth(value: int) -> str:
    for name, mult in _DEC_TABLE:
        if value and value % mult == 0:
            return f"{value // mult} {name}B/s"
    return f"{value} B/s"


def format_time(ps: int) -> str:
    for name, mult in (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3)):
        if ps and ps % mult == 0:
            return f"{ps // mult} {name}"
    return f"{ps} ps"


def format_flops(value: int) -> str:
    for name, mult in _DEC_TABLE:
        if value and value % mult == 0:
            return f"{value // mult} {name}FLOP/s"
    return f"{value} FLOP/s"


def _largest(value: int, table: dict[str, int], suffix: str) -> str:
    """``value`` in the largest unit of ``table`` that divides it exactly."""
    name = max((n for n, m in table.items() if value and value % m == 0), key=table.__getitem__,
               default=min(table, key=table.__getitem__))
    return f"{value // table[name]} {name}{suffix}"


def format_bit_energy(value: int) -> str:
    return _largest(value, _ENERGY, "/bit")


def format_flop_energy(value: int) -> str:
    return _largest(value, _ENERGY, "/FLOP")


def format_power(value: int) -> str:
    return _largest(value, _POWER, "")


def format_frequency(value: int) -> str:
    return _largest(value, _FREQUENCY, "")


# Each formatter takes what its unit stores: integers in base units, a ratio's float.
# A quantity's column in base units beside its label (a sweep's results.csv): the name's suffix and the scale
# from what its parser returns (bytes, B/s, ps, FLOP/s) to the base unit (bytes, B/s, s, FLOP/s).
BASE_COLUMNS = {"bytes": ("_bytes", 1), "bandwidth": ("_bytes_per_s", 1), "time": ("_s", 1e-12),
                "flops": ("_flop_per_s", 1)}

FORMATTERS: dict[str, Callable[[Any], str | float]] = {
    "bytes": format_bytes,
    "bandwidth": format_bandwidth,
    "time": format_time,
    "flops": format_flops,
    "count": int,
    "ratio": float,
    "share": float,
    "bit_energy": format_bit_energy,
    "flop_energy": format_flop_energy,
    "power": format_power,
    "frequency": format_frequency,
}


def human_bytes(value: float) -> str:
    """Rounded, for people: 14294237188 -> ``"14.29 GB"``."""
    for name, mult in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= mult:
            return f"{value / mult:.2f} {name}"
    return f"{int(value)} B"


def ps_to_s(ps: int) -> float:
    return ps / PS_PER_S


def transfer_ps(nbytes: int, bytes_per_s: int) -> int:
    """Time to move ``nbytes`` at ``bytes_per_s``, rounded up to a whole picosecond."""
    return -(-nbytes * PS_PER_S // bytes_per_s)


def compute_ps(flops: int, flops_per_s: int) -> int:
    return -(-flops * PS_PER_S // flops_per_s)

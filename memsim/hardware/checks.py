"""Checks of a spec's fields by the kind of quantity their metadata declares.

Each spec's constructor runs them, so a spec built in Python (or by ``dataclasses.replace``) is
checked as the loader checks YAML: types, ranges, finite numbers within ``units.MAX_VALUE``,
known choices and dtypes, unique names. An error is a ``ConfigError`` whose field is the dotted
YAML path (``levels[hbm].capacity``); the loader adds the file.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from memsim.core import units
from memsim.core.dtypes import DTYPES
from memsim.core.errors import ConfigError

# Kinds of whole numbers and their least value when the field declares none.
_WHOLE = {"count": 0, "bytes": 0, "time": 0, "bandwidth": 1, "flops": 1, "bit_energy": 0, "flop_energy": 0, "power": 0,
          "frequency": 0}
_TABLES = {"rates": "a compute rate", "ratios": "a fraction in (0, 1]", "ops": "a non-negative number",
           "energies": "an energy per FLOP"}


def check_fields(spec: Any, where: str, unset: frozenset[str] = frozenset()) -> None:
    """Every field of the dataclass ``spec``, whose fields sit under ``where`` in YAML, but those
    named in ``unset`` (left for another spec to fill in)."""
    for f in fields(spec):
        if f.name in unset:
            continue
        meta = f.metadata
        _check(meta, getattr(spec, f.name), f"{where}.{meta['key']}" if where else meta["key"])


def fail(message: str, field: str) -> None:
    raise ConfigError(message, field=field)


# Rates are whole numbers a second (FLOP/s, B/s): at or above this one, truncating to a whole
# number errs by under a millionth; below it (an efficiency of 1e-15), a step would come out faster
# than its own rate allows.
LEAST_RATE = 10**6


def least_rate(value: float, field: str, what: str) -> None:
    """Refuse a rate (after its efficiencies) under ``LEAST_RATE``."""
    if not value >= LEAST_RATE:
        fail(f"{what} comes to {value:.3g} a second, under memsim's least rate of {LEAST_RATE:.0e} a second "
             "(rates are whole numbers a second, exact to a millionth from there up)", field)


def number(value: Any, field: str, least: float = 0, whole: bool = True) -> Any:
    try:
        return units.check_number(value, least, whole)
    except units.UnitError as exc:
        raise ConfigError(str(exc), field=field) from None


def _check(meta: Any, value: Any, path: str) -> None:
    unit = meta["unit"]
    if unit in _WHOLE:
        least = meta.get("least")
        number(value, path, _WHOLE[unit] if least is None else least)
    elif unit == "ratio":
        _ratio(value, path)
    elif unit == "share":
        number(value, path, 0, whole=False)
        if not 0 <= value < 1:
            fail(f"{value!r} must be in [0, 1)", path)
    elif unit in _TABLES:
        _table(unit, value, path)
    elif unit in ("name", "choice", "text"):
        if not isinstance(value, str) or (unit != "text" and not value):
            fail(f"expected text, got {units.shown(value)}", path)
        _choose(meta, (value,), path)
    elif unit in ("names", "classes"):
        if unit == "classes" and value is None:
            return
        if not isinstance(value, tuple) or not all(isinstance(n, str) and n for n in value):
            fail(f"expected a list of names, got {units.shown(value)}", path)
        _choose(meta, value, path)
        if len(set(value)) != len(value):
            fail(f"names {next(n for n in value if value.count(n) > 1)!r} twice", path)
    elif unit == "section":
        if not isinstance(value, meta["of"]):
            fail(f"expected a {meta['of'].__name__}, got {units.shown(value)}", path)
    elif unit == "list":
        if not isinstance(value, tuple) or not all(isinstance(v, meta["of"]) for v in value):
            fail(f"expected a tuple of {meta['of'].__name__}, got {units.shown(value)}", path)
        names = [v.name for v in value]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            fail(f"duplicate name {dup[0]!r}", path)


def _choose(meta: Any, values: tuple[str, ...], path: str) -> None:
    choices = meta.get("choices")
    choices = choices() if callable(choices) else choices
    for value in values:
        if choices and value not in choices:
            fail(f"{value!r} is not one of {', '.join(choices)}", path)


def _ratio(value: Any, path: str) -> float:
    number(value, path, 0, whole=False)
    if not 0 < value <= 1:
        fail(f"{value!r} must be in (0, 1]", path)
    return value


def _table(unit: str, value: Any, path: str) -> None:
    """A mapping of dtype to a value, stored as sorted (dtype, value) pairs."""
    if not isinstance(value, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in value):
        fail(f"expected a mapping of dtype to {_TABLES[unit]}", path)
    seen: set[str] = set()
    for dtype, v in value:
        if dtype not in DTYPES:
            fail(f"{units.shown(dtype)} is not a dtype memsim knows ({', '.join(DTYPES)})", f"{path}.{dtype}")
        if dtype in seen:
            fail("given twice", f"{path}.{dtype}")
        seen.add(dtype)
        if unit == "rates":
            number(v, f"{path}.{dtype}", 1)
        elif unit == "energies":
            number(v, f"{path}.{dtype}", 0)
        elif unit == "ratios":
            _ratio(v, f"{path}.{dtype}")
        else:
            number(v, f"{path}.{dtype}", 0, whole=False)

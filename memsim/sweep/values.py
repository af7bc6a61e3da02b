"""A sweep's swept values: ``--set PATH=V1,V2`` and ranges ``A..B:x2``, or a sweep YAML's lists.

A value is a range only where both ends are quantities of one kind (``256KiB..4MiB:x2``,
``1..7:+3``); anything else holding ``..`` (``../hw/a.yaml``) is a value as written, and a field
that names a file is never a range. A sweep YAML's list holds its values as they are, so a comma
inside one does not split it. A value listed twice is one point: the repeat is dropped, and said.
"""
from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from memsim.core import units
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.core.files import load_yaml
from memsim.run import runspec
from memsim.run.inputs import FILE_FIELDS

# Sweepable fields that are arguments of the run (RunSpec's) rather than hardware fields.
RUN_FIELDS = runspec.sweepable()
ALIASES = {name.replace("_", "-"): name for name in RUN_FIELDS if "_" in name}
MAX_RANGE = 100_000  # values one range may expand to


def expand(spec: str) -> list[str]:
    """Comma-separated values, each a value or a range ``A..B:xF`` (geometric) or ``A..B:+S``
    (arithmetic), with units: ``256KiB..4MiB:x2,16MiB``."""
    values = _expand_all(spec.split(","))
    if not values:
        raise ConfigError(f"no values in {units.shown(spec)}", field=run_field("set"))
    return values


def _expand_all(parts: Iterable[str]) -> list[str]:
    """Each non-blank part as a value or a range, in order."""
    return [v for part in parts if part.strip() for v in _expand_one(part.strip())]


def _expand_one(spec: str) -> list[str]:
    lo, dots, rest = spec.partition("..")
    hi, sep, step = rest.partition(":")
    found = _kind(lo.strip()) if dots else None
    if found is None:  # a path, a name: a value as written
        return [spec]
    if not sep or not step or step[0] not in "x+":
        raise ConfigError(f"range {units.shown(spec)} needs a step: A..B:x2 or A..B:+S", field=run_field("set"))
    kind, parse = found
    try:
        a, b = parse(lo.strip()), parse(hi.strip())
        factor = float(step[1:]) if step[0] == "x" else parse(step[1:])
    except (ValueError, units.UnitError) as exc:
        raise ConfigError(f"range {units.shown(spec)}: {exc}", field=run_field("set")) from None
    if not all(math.isfinite(v) for v in (a, b, factor)):
        raise ConfigError(f"range {units.shown(spec)} is not finite", field=run_field("set"))
    if (step[0] == "x" and (factor <= 1 or a <= 0)) or (step[0] == "+" and factor <= 0) or b < a:
        raise ConfigError(f"range {units.shown(spec)} does not advance from {lo} to {hi}", field=run_field("set"))
    out, v = [], a
    while v <= b * (1 + 1e-12):
        out.append(_format(kind, v))
        v = v * factor if step[0] == "x" else v + factor
        if len(out) > MAX_RANGE:
            raise ConfigError(f"range {units.shown(spec)} has more than {MAX_RANGE} values", field=run_field("set"))
    return out


def _kind(text: str) -> tuple[str, Callable] | None:
    """The kind of quantity ``text`` is and its parser, or None where it is none."""
    for kind in ("bytes", "bandwidth", "time", "flops"):
        try:
            units.PARSERS[kind](text)
            return kind, units.PARSERS[kind]
        except units.UnitError:
            continue
    for kind, parse in (("count", int), ("number", float)):
        try:
            parse(text)
            return kind, parse
        except ValueError:
            continue
    return None


NUMERIC = units.BASE_COLUMNS  # a swept quantity's column in base units, beside its label (results.csv)


def with_numbers(point: dict[str, str]) -> dict[str, Any]:
    """The point's swept values, each quantity (a size, bandwidth, time or rate) followed by its value in base
    units (``sram.capacity`` ``256KiB``, then ``sram.capacity_bytes`` 262144), so a table sorts and plots by it."""
    out: dict[str, Any] = {}
    for name, value in point.items():
        out[name] = value
        kind = _kind(value) if isinstance(value, str) else None
        if kind is not None and kind[0] in NUMERIC:
            suffix, scale = NUMERIC[kind[0]]
            number = kind[1](value) * scale
            out[name + suffix] = int(number) if scale == 1 else number
    return out


def _format(kind: str, value: float) -> str:
    if kind in units.FORMATTERS and kind not in ("count", "ratio"):
        return cast(str, units.FORMATTERS[kind](round(value)))  # a quantity's formatter writes text
    return str(int(value)) if kind == "count" else f"{value:g}"


def read_sweep_file(path: Path, fields: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A sweep YAML: fixed fields at the top level (``fields``: the spec's, name -> field; default the
    run's, ``RUN_FIELDS``; a serving sweep's are ``ServeSpec``'s) and ``set: {PATH: [values] or
    "A..B:x2"}``; returns the fixed fields and the swept values of each field."""
    fields = RUN_FIELDS if fields is None else fields
    raw = load_yaml(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping", file=str(path))
    sets = raw.pop("set", {}) or {}
    if not isinstance(sets, dict):
        raise ConfigError("expected a mapping of PATH to values", file=str(path), field="set")
    for key in raw:
        if _field_name(key) not in fields:
            raise ConfigError(f"unknown field (known: set, {', '.join(sorted(fields))})", file=str(path),
                              field=str(key))
    swept: dict[str, list[str]] = {}
    for k, v in sets.items():
        where = f"set.{k}"
        if isinstance(v, list):
            if not v or any(isinstance(x, (dict, list)) or x is None for x in v):
                raise ConfigError("expected a list of values", file=str(path), field=where)
            values = [str(x) for x in v]
        elif isinstance(v, dict) or v is None:
            raise ConfigError("expected values: a list or \"A..B:x2\"", file=str(path), field=where)
        else:
            values = [str(v)]
        try:
            swept.update(parse_sweeps([], {str(k): values}, known=swept))
        except ConfigError as exc:
            raise ConfigError(exc.message, file=str(path), field=where) from None
    fixed = {_field_name(k): v for k, v in raw.items()}
    for name, value in fixed.items():
        try:
            runspec.check(fields[name], value)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=str(path), field=name) from None
    return fixed, swept


def parse_sweeps(items: Iterable[str], listed: dict[str, list[str]] | None = None,
                 known: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The swept fields of ``--set PATH=VALUES`` items, and of ``listed`` values (a sweep file's
    lists: each item a value or a range, never split at a comma), after those ``known`` already."""
    out: dict[str, list[str]] = dict(known or {})
    given = [(*item.partition("="), item) for item in items]
    for key, sep, _spec, item in given:
        if not sep or not key.strip():
            raise ConfigError(f"expected PATH=V1,V2 or PATH=A..B:xF, got {units.shown(item)}", field=run_field("set"))
    pairs = [(key.strip(), spec.strip().split(",")) for key, _, spec, _ in given] + list((listed or {}).items())
    for key, parts in pairs:
        name = _field_name(key)
        if name in out:
            raise ConfigError(f"{name} is swept twice", field=run_field("set"))
        if name in ("set", "fast_forward"):
            raise ConfigError(f"{name} cannot be swept", field=run_field("set"))
        for part in parts:
            try:
                part.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"{name}: a value that is not valid text (an undecodable byte)",
                                  field=run_field("set")) from None
        values = [p.strip() for p in parts if p.strip()] if name in FILE_FIELDS else _expand_all(parts)
        if not values:
            raise ConfigError(f"{name}: no values", field=run_field("set"))
        out[name] = _once(name, values)
    return out


def _field_name(key: str) -> str:
    """The run field a sweep names: ``weight-dtype`` is ``weight_dtype``; any other key as given."""
    return ALIASES.get(key, key)


def _once(name: str, values: list[str]) -> list[str]:
    """``values`` with each kept at its first place; a repeat is said, once a value."""
    counts = Counter(values)
    if len(counts) < len(values):
        repeated = [v for v, n in counts.items() if n > 1]
        warnings.warn(f"{name}: {', '.join(units.shown(v) for v in repeated[:4])} listed more than once: each is "
                      "one point", MemsimWarning, stacklevel=3)
    return list(counts)

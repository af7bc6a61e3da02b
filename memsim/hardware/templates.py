"""A family's template: the chip a file starts from with ``base: gpu`` (``base: rdu``, ...).

A template inherits no calibration. Its structure (levels, links, system, power) and each value
are those of the family's reference chip, the first preset its ``Family.template`` names; every
value that is a quantity is an estimate whose range spans that value across the family's presets
it names (and the reference's own range, where it gives one). Its efficiencies are left to the
family's estimates (``families.fill_efficiencies``), its stack to the family's default. So a chip
written as ``base: gpu`` plus what its designer knows runs, and lists every value it did not set
as an estimate with the family's spread (the families table in docs/hardware-fields.md). A
range's end that would make the chip invalid on its own (a clock above the reference's highest)
is brought back to the value, so any rerun at a range's end is a chip that loads.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

from memsim.core import units
from memsim.core.errors import ConfigError
from memsim.core.presets import resolve
from memsim.hardware import estimates, loader
from memsim.hardware.dumps import OWNERS, TABLES, dump_chip, spec_estimates
from memsim.hardware.families import BY_FAMILY, FAMILIES
from memsim.hardware.spec import ChipSpec

# What a template leaves out: calibrations (its family's estimates fill them in) and identity.
CALIBRATED = ("efficiency", "kernel_efficiency")
# Quantities a template turns into estimates (a 0 stays: it means none, not a value).
QUANTITIES = frozenset({*units.FORMATTERS} - {"share"})
_TABLE_FORMAT = {"rates": units.format_flops, "energies": units.format_flop_energy, "ops": float, "ratios": float}
assert set(_TABLE_FORMAT) == set(TABLES)


def names() -> tuple[str, ...]:
    """The families with a template: what ``base:`` names besides presets and paths."""
    return tuple(n for n in FAMILIES.names() if FAMILIES[n].template)


def template(family: str) -> dict[str, Any] | None:
    """The raw mapping ``base: FAMILY`` starts from (None: ``family`` names no family with a template)."""
    if family not in FAMILIES or not FAMILIES[family].template:
        return None
    return copy.deepcopy(_template(family))


@functools.cache
def _template(family: str) -> dict[str, Any]:
    presets = [loader.load_chip(resolve(n, "hardware", loader.SUFFIXES))[0] for n in FAMILIES[family].template]
    ref, others = presets[0], presets[1:]
    chip = dataclasses.replace(_spread(ref, others, ""), name=family, derived_from="", stack="",
                               description=f"the {family} family's template: {ref.name}'s values as estimates over "
                                           f"{', '.join(p.name for p in presets)}")
    raw = dump_chip(chip)
    del raw[loader.DERIVED]
    return _valid_ends(raw, chip)


def _spread(ref: Any, others: list[Any], where: str) -> Any:
    """``ref`` (a spec) with each quantity an estimate over the matching values of ``others``."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(ref):
        unit, key, value = f.metadata["unit"], f.metadata["key"], getattr(ref, f.name)
        theirs = [getattr(o, f.name) for o in others]
        if (f.name in CALIBRATED and where in ("compute", "levels")) or (where == "execution" and f.name in BY_FAMILY):
            changes[f.name] = None  # its family's
        elif key == "dtype_efficiency":
            changes[f.name] = ()
        elif unit == "section":
            changes[f.name] = _spread(value, theirs, key)
        elif unit == "list":
            changes[f.name] = tuple(_spread(item, [m for o in others if (m := _match(o, ref, key, item))], key)
                                    for item in value)
        elif unit in _TABLE_FORMAT:
            changes[f.name] = tuple((k, _estimate(v, [dict(t).get(k) for t in theirs], _TABLE_FORMAT[unit]))
                                    for k, v in value)
        elif unit in QUANTITIES and isinstance(value, (int, float)) and not isinstance(value, bool):
            changes[f.name] = _estimate(value, theirs, units.FORMATTERS[unit])
    return dataclasses.replace(ref, **changes)


def _match(other: ChipSpec, ref: ChipSpec, key: str, item: Any) -> Any:
    """The entry of ``other``'s list ``key`` that plays ``item``'s part in ``ref``: a level of the same
    kind; the link that joins chips (``interconnect``), else a link of the same name."""
    if key not in OWNERS:
        return next((e for e in getattr(other, key) if e.name == item.name), None)
    if key == "levels":
        return next((e for e in other.levels if e.kind == item.kind), None)
    if ref.interconnect is not None and item.name == ref.interconnect.name:
        return other.interconnect
    return next((e for e in other.links if e.name == item.name), None)


def _estimate(value: Any, theirs: list[Any], fmt: Any) -> Any:
    """``value`` as an estimate whose range holds it, its own range and ``theirs``."""
    plain = estimates.plain(value)
    if not plain:
        return plain
    ends = [plain, *(estimates.plain(t) for t in theirs if isinstance(t, (int, float)) and t)]
    if isinstance(value, estimates.Estimated):
        ends += [value.low, value.high]
    low, high = min(ends), max(ends)
    return estimates.estimated(plain, low, high, (str(fmt(plain)), str(fmt(low)), str(fmt(high))))


def _valid_ends(raw: dict[str, Any], chip: ChipSpec) -> dict[str, Any]:
    """``raw`` with each estimate's range brought back to its value on a side where that end alone
    makes an invalid chip."""
    for e in spec_estimates(chip):
        keep = list(e.written[1:])
        for i, end in enumerate(e.written[1:]):
            trial = copy.deepcopy(raw)
            loader.apply_override(trial, e.set_path, end)
            try:
                loader.build(ChipSpec, trial, "", "")
            except ConfigError:
                keep[i] = e.written[0]
        if keep != list(e.written[1:]):
            loader.apply_override(raw, e.set_path, {"estimate": e.written[0], "range": keep})
    return raw


loader.TEMPLATES.append((names, template))

"""Specs written out and read back: a spec as YAML-ready data that loads back to the same spec
with the same estimates (``dump``), and the estimates a spec holds, read from it however it was
built (``spec_estimates``)."""
from __future__ import annotations

import dataclasses
from typing import Any

from memsim.core import units
from memsim.hardware import estimates
from memsim.hardware.estimates import Estimate
from memsim.hardware.families import FamilyEstimate, unset
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec

# Tables of dtype to a value: the kind of quantity each entry is (None: a plain number).
TABLES = {"rates": "flops", "ratios": "ratio", "ops": None, "energies": "flop_energy"}
OWNERS = {"levels": Ref.level, "links": Ref.link}  # the lists whose entries are a chip's levels and links


def dump_chip(chip: ChipSpec) -> dict[str, Any]:
    """The resolved spec as YAML-ready data that loads back to an identical spec with the same
    estimates: its own written with their ranges, and what its family fills in left out (its
    family fills it in again)."""
    return dump(chip)


def spec_estimates(spec: Any, where: str = "", owner: Ref | None = None) -> tuple[Estimate, ...]:
    """Every estimate a spec holds (``estimates.Estimated``: its file's, its family's), with its range
    and YAML path, in field order: what a run rests on, however the spec was built."""
    found: list[Estimate] = []
    for f in dataclasses.fields(spec):
        unit, key, value = f.metadata["unit"], f.metadata["key"], getattr(spec, f.name)
        path = f"{where}.{key}" if where else key
        if unit == "section":
            found += spec_estimates(value, path, owner)
        elif unit == "list":
            for item in value:
                of = OWNERS[key](item.name) if isinstance(spec, ChipSpec) and key in OWNERS else owner
                found += spec_estimates(item, f"{path}[{item.name}]", of)
        elif unit in TABLES:
            found += [_estimate(v, str(TABLES[unit]), f"{path}.{k}", owner) for k, v in value
                      if isinstance(v, estimates.Estimated)]
        elif isinstance(value, estimates.Estimated):
            found.append(_estimate(value, unit, path, owner))
    return tuple(found)


def _estimate(value: Any, unit: str, path: str, owner: Ref | None) -> Estimate:
    return Estimate(path, unit, estimates.plain(value), value.low, value.high, value.written, owner,
                    by_family=isinstance(value, FamilyEstimate))


def dump(obj: Any) -> Any:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        unit = f.metadata["unit"]
        key = f.metadata["key"]
        if (value is None and unit not in ("classes", "section", "list")) or unset(value):
            continue  # not given: its default is derived (an efficiency: its family's)
        if unit == "section":
            out[key] = dump(value)
        elif unit == "list":
            out[key] = [dump(v) for v in value]
        elif unit in ("ops", "ratios"):
            out[key] = {k: _written(v, float) for k, v in value}
        elif unit == "names":
            out[key] = list(value)
        elif unit == "classes":
            if value is not None:
                out[key] = list(value)
        elif unit == "rates":
            out[key] = {k: _written(v, units.format_flops) for k, v in value}
        elif unit == "energies":
            out[key] = {k: _written(v, units.format_flop_energy) for k, v in value}
        elif unit in units.FORMATTERS:
            out[key] = _written(value, units.FORMATTERS[unit])
        else:
            out[key] = value
    return out


def _written(value: Any, fmt: Any) -> Any:
    """A value as YAML writes it: an estimate in its form, with its range."""
    if isinstance(value, estimates.Estimated):
        return {"estimate": fmt(estimates.plain(value)), "range": [fmt(value.low), fmt(value.high)]}
    return fmt(value)

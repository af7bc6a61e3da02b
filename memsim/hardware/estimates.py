"""Estimated preset values: a value nobody publishes, given with the range it could lie in.

In a hardware YAML an estimate is written in place of a plain value as
``{estimate: VALUE, range: [LOW, HIGH]}``, for any quantity field and for the entries of a
dtype table, e.g. ``latency: {estimate: 20 ns, range: [5 ns, 100 ns]}``. The loader takes VALUE
as the field's value and checks that LOW <= VALUE <= HIGH in the field's units. ``Estimate``
records one such value with its range and the YAML path it sits at, so a run can say which of
its inputs are estimates and how far its result moves across their ranges. A value set with
``--set`` is the user's own and no longer an estimate.

A spec holds an estimate as its value, marked (``Estimated``: a number equal to its value that
carries its range), so the estimates a run lists are read from the spec however it was built
(YAML, Python, ``dataclasses.replace``), and a spec written out loads back with the same ones.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from memsim.core import units
from memsim.core.errors import ConfigError
from memsim.hardware.resource import Ref

KEYS = frozenset({"estimate", "range"})


class Estimated:
    """A number a spec holds that is an estimate: ``low`` and ``high`` its range, in the same units,
    ``written`` its value and range as their source wrote them (``estimated`` makes one)."""
    low: Any
    high: Any
    written: tuple[str, str, str]


class EstimatedInt(int, Estimated):
    """A whole quantity (bytes, picoseconds, FLOP/s) that is an estimate."""


class EstimatedFloat(float, Estimated):
    """A fraction or a plain number that is an estimate."""


def estimated(value: Any, low: Any, high: Any, written: tuple[str, str, str],
              cls: type[EstimatedFloat] = EstimatedFloat) -> Any:
    """``value`` marked as an estimate in ``[low, high]`` (a whole number stays whole)."""
    out: Any = EstimatedInt(value) if isinstance(value, int) else cls(value)
    out.low, out.high, out.written = low, high, written
    return out


def plain(value: Any) -> Any:
    """``value`` as the number it is, without its mark."""
    if isinstance(value, EstimatedInt):
        return int(value)
    return float(value) if isinstance(value, EstimatedFloat) else value


@dataclass(frozen=True, slots=True)
class Estimate:
    path: str  # YAML path: ``levels[hbm].latency``, ``compute.peak.bf16``, ``execution.op_overhead``
    unit: str  # the kind of quantity (``units.PARSERS`` key)
    value: Any  # in base units, as the spec holds it
    low: Any
    high: Any
    written: tuple[str, str, str]  # value, low and high as the YAML writes them
    owner: Ref | None = None  # the level or link it is a figure of, if one
    by_family: bool = False  # filled in by the chip's family (its file left it out), not written as one

    @property
    def set_path(self) -> str:
        """The path ``--set`` takes for this field (``set_path``)."""
        return set_path(self.path)

    @property
    def section(self) -> str:
        """What the value belongs to: ``levels[hbm]``, ``links[c2c]``, ``compute``, ``system``, ..."""
        head = self.path.split(".")[0]
        return head

    @property
    def key(self) -> str:
        """The field's own key (``latency``; ``peak`` for a table entry)."""
        parts = self.path.split(".")
        return parts[2] if self.path.startswith("compute.") and len(parts) > 2 and parts[1] in TABLE_FIELDS \
            else parts[-1]


TABLE_FIELDS = ("peak", "energy", "dtype_efficiency", "dequant")


def set_path(path: str) -> str:
    """A YAML path (``levels[hbm].latency``) as ``--set`` takes it: list entries by name
    (``levels.hbm.latency``)."""
    return path.replace("[", ".").replace("]", "")


def is_estimate(raw: Any) -> bool:
    """Whether a raw YAML value is written in the estimate form (``parse`` checks it is complete)."""
    return isinstance(raw, dict) and "estimate" in raw


def parse(raw: dict, unit: str, parser: Callable[[Any], Any], file: str, path: str,
          owner: Ref | None = None) -> Estimate:
    """The estimate written at ``path``: its value and range parsed by ``parser``, and checked."""
    if set(raw) != KEYS:
        raise ConfigError("an estimate is written {estimate: VALUE, range: [LOW, HIGH]}", file=file, field=path)
    bounds = raw["range"]
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise ConfigError("an estimate's range is a list of two values: [LOW, HIGH]", file=file, field=f"{path}.range")
    parsed = []
    for text, where in ((raw["estimate"], path), (bounds[0], f"{path}.range"), (bounds[1], f"{path}.range")):
        try:
            parsed.append(parser(text))
        except units.UnitError as exc:
            raise ConfigError(str(exc), file=file, field=where) from None
    value, low, high = parsed
    if not low <= value <= high:
        raise ConfigError(f"the range [{bounds[0]}, {bounds[1]}] must hold the estimate {raw['estimate']}",
                          file=file, field=f"{path}.range")
    return Estimate(path, unit, value, low, high, (str(raw["estimate"]), str(bounds[0]), str(bounds[1])), owner)


class _Dumper(yaml.SafeDumper):
    """Writes an estimate on one line, as a file writes it: ``{estimate: 10 ns, range: [3 ns, 30 ns]}``."""


def _mapping(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True if set(data) == KEYS else None)


_Dumper.add_representer(dict, _mapping)


def yaml_text(data: Any) -> str:
    """A spec's dump (``dumps.dump``) as YAML text, its estimates in their written form."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)

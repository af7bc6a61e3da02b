"""Estimated preset values: a value nobody publishes, given with the range it could lie in.

In a hardware YAML an estimate is written in place of a plain value as
``{estimate: VALUE, range: [LOW, HIGH]}``, for any quantity field and for the entries of a
dtype table, e.g. ``latency: {estimate: 20 ns, range: [5 ns, 100 ns]}``. The loader takes VALUE
as the field's value and checks that LOW <= VALUE <= HIGH in the field's units. ``Estimate``
records one such value with its range and the YAML path it sits at, so a run can say which of
its inputs are estimates and how far its result moves across their ranges. A value set with
``--set`` is the user's own and no longer an estimate.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memsim.core import units
from memsim.core.errors import ConfigError
from memsim.hardware.resource import Ref

KEYS = frozenset({"estimate", "range"})


@dataclass(frozen=True, slots=True)
class Estimate:
    path: str  # YAML path: ``levels[hbm].latency``, ``compute.peak.bf16``, ``execution.op_overhead``
    unit: str  # the kind of quantity (``units.PARSERS`` key)
    value: Any  # in base units, as the spec holds it
    low: Any
    high: Any
    written: tuple[str, str, str]  # value, low and high as the YAML writes them
    owner: Ref | None = None  # the level or link it is a figure of, if one

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

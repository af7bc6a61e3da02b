"""Accelerator families, registered by the name a chip's ``family`` gives in YAML.

What a family *is* is declared once, as a ``Family``: the execution values a chip of it leaves
out (over what every family shares, ``BY_FAMILY``), the efficiencies its chips reach where their
files give none (estimates with a range and a source), whether its chips keep weights in their
scratchpad, the runtime stack its chips run by default and the mapping strategy that plans a
step on it (``memsim.mapping.strategy``, by name). Every place that asks about a chip's family
reads its ``Family`` (``ChipSpec.family_of``), never a list of names. Each family lives in one
module of this package and registers itself; adding a family means adding one file (and, for a
new way of mapping, registering a strategy under the name its ``strategy`` gives).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memsim.core.registry import Registry
from memsim.hardware.estimates import EstimatedFloat, estimated
from memsim.hardware.kinds import KINDS, MEMORY

# What every family shares, and each family's own values over it (``Family.execution``).
BY_FAMILY: dict[str, Any] = {"streams": ("compute", "copy", "comm"), "weight_prefetch": 0, "pipeline": "none",
                             "pipeline_chunks": 1, "comm_overlap": 1, "collective_launch": "kernel"}

# Whether a family's chips keep weights in their scratchpad from one operator to the next.
ALWAYS = "always"  # by design: a wafer's cores, an RDU's or LPU's on-chip memory
WITHOUT_DEVICE_MEMORY = "without device memory"  # where no level sits on the device: the SRAM is the memory
NEVER = "never"  # the scratchpad belongs to one kernel at a time and only stages tiles
WEIGHTS_ON_CHIP = (ALWAYS, WITHOUT_DEVICE_MEMORY, NEVER)


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """A family's estimate of an efficiency its chips' files leave out: ``value`` in ``[low, high]``
    and where it comes from."""
    value: float
    low: float
    high: float
    source: str

    def __post_init__(self) -> None:
        if not 0 < self.low <= self.value <= self.high <= 1 or len(self.source) < 10:
            raise ValueError(f"an efficiency estimate needs 0 < low <= value <= high <= 1 and a source: {self}")

    def as_tuple(self) -> tuple[float, float, float, str]:
        return self.value, self.low, self.high, self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """An execution model. ``execution``: its values of the ``ExecutionSpec`` fields in
    ``BY_FAMILY`` (the rest as ``BY_FAMILY`` gives them); ``compute_efficiency`` and
    ``memory_efficiency``: what a chip's compute and each of its levels whose kind streams at the
    family's estimate reach where its file gives none; ``weights_on_chip``: whether its
    scratchpad keeps weights (``always``, ``without device memory``, ``never``); ``stack``: the
    runtime stack its chips run when neither the run nor the chip names one; ``strategy``: the
    mapping strategy's name (empty: the family's own); ``kernel_efficiency``: the fraction of
    that GEMM rate its stacks' kernels sustain inside a model step where a chip's file gives none
    (None: 1, its compute efficiency is already a step's rate); ``template``: the presets its
    template (``base: FAMILY``, ``memsim.hardware.templates``) is drawn from, the first its
    reference chip (none: no template)."""
    name: str
    help: str
    execution: tuple[tuple[str, Any], ...]
    compute_efficiency: Efficiency
    memory_efficiency: Efficiency
    weights_on_chip: str
    stack: str
    strategy: str = ""
    kernel_efficiency: Efficiency | None = None
    template: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [k for k, _ in self.execution if k not in BY_FAMILY]
        if unknown or self.weights_on_chip not in WEIGHTS_ON_CHIP:
            raise ValueError(f"family {self.name!r}: execution names only {sorted(BY_FAMILY)}, weights_on_chip is "
                             f"one of {WEIGHTS_ON_CHIP}")
        if not self.strategy:
            object.__setattr__(self, "strategy", self.name)

    def values(self) -> dict[str, Any]:
        """Its execution values over what every family shares, lists as tuples."""
        values = {**BY_FAMILY, **dict(self.execution)}
        return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


# What a device memory streams at where a chip's file gives no efficiency, on the families whose
# chips have HBM beside an accelerator (gpu, rdu, wafer): one measurement, shared.
HBM_STREAMING = Efficiency(value=0.8, low=0.65, high=0.92, source=(
    "as tpu-v4 and sn40l; range: the HBM Triad rows' spread (microbench.csv rows 33, 35, 37, 39: 0.77 to 0.89) "
    "widened"))

FAMILIES: Registry[Family] = Registry("family", field="family", package=__name__)


def register(family: Family) -> Family:
    """Register ``family`` under its name (a family's module calls this as it is imported)."""
    return FAMILIES.add(family.name, family)


def names() -> tuple[str, ...]:
    """Every family's name, sorted: the choices of a chip's ``family``."""
    return FAMILIES.names()


def family_values(family: object) -> dict[str, Any]:
    """The execution values of ``family`` (one not known: what every family shares), lists as tuples."""
    if isinstance(family, str) and family in FAMILIES:
        return FAMILIES[family].values()
    return {k: tuple(v) if isinstance(v, list) else v for k, v in BY_FAMILY.items()}


class ByFamily(float):
    """A value a chip leaves out and its family fills in, not an estimate (a scratchpad's
    efficiency, 1): equal to the float it holds, and known for what it is, so a chip rebuilt with
    ``dataclasses.replace`` or moved to another family fills it in again."""
    __slots__ = ()


class FamilyEstimate(EstimatedFloat):
    """An efficiency a chip leaves out, as its family estimates it: an estimate with its range (a
    run lists it however the chip was built), filled in again as ``ByFamily`` is."""


def unset(value: object) -> bool:
    """Whether an efficiency is left to the family: not given, or filled in by one."""
    return value is None or isinstance(value, (ByFamily, FamilyEstimate))


def _streams_at_estimate(level: Any) -> bool:
    """Whether a level left without an efficiency takes its family's memory estimate: a kind that
    streams at it (``kinds``), reached directly rather than over a link."""
    kind = level.kind
    return isinstance(kind, str) and kind in KINDS and KINDS[kind].efficiency == MEMORY and not level.via


def efficiency_estimates(family: str, compute: Any, levels: tuple[Any, ...]) -> dict[str, Efficiency]:
    """The efficiencies a chip of ``family`` (its compute and levels as built) leaves to its family
    and that the family estimates, by YAML path (``compute.efficiency``, ``levels[hbm].efficiency``)."""
    if family not in FAMILIES:
        return {}
    record, out = FAMILIES[family], {}
    if unset(compute.efficiency):
        out["compute.efficiency"] = record.compute_efficiency
    if unset(compute.kernel_efficiency) and record.kernel_efficiency is not None:
        out["compute.kernel_efficiency"] = record.kernel_efficiency
    for lvl in levels:
        if unset(lvl.efficiency) and _streams_at_estimate(lvl):
            out[f"levels[{lvl.name}].efficiency"] = record.memory_efficiency
    return out


def fill_efficiencies(family: str, compute: Any, levels: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """``compute`` and ``levels`` with each efficiency they leave unset filled in by ``family``
    (``ByFamily``): its estimate, else 1 (a level of an ideal kind, or reached over a link; kernels
    where the family estimates none). A family not known leaves them as they are (the chip's check
    of its family fails)."""
    if family not in FAMILIES:
        return compute, levels
    found = efficiency_estimates(family, compute, levels)

    def filled(value: Any, path: str) -> Any:
        if not unset(value):
            return value
        if path not in found:
            return ByFamily(1.0)
        e = found[path]
        return estimated(e.value, e.low, e.high, (str(e.value), str(e.low), str(e.high)), FamilyEstimate)

    def same(value: Any, new: Any) -> bool:
        return type(value) is type(new) and value == new and getattr(value, "low", 0) == getattr(new, "low", 0) \
            and getattr(value, "high", 0) == getattr(new, "high", 0)

    eff, kernel = filled(compute.efficiency, "compute.efficiency"), \
        filled(compute.kernel_efficiency, "compute.kernel_efficiency")
    if not (same(compute.efficiency, eff) and same(compute.kernel_efficiency, kernel)):
        compute = dataclasses.replace(compute, efficiency=eff, kernel_efficiency=kernel)
    new_levels = []
    for lvl in levels:
        value = filled(lvl.efficiency, f"levels[{lvl.name}].efficiency")
        new_levels.append(lvl if same(lvl.efficiency, value) else dataclasses.replace(lvl, efficiency=value))
    return compute, tuple(new_levels)

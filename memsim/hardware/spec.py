"""Frozen specs of a chip: compute, ordered memory levels, links and execution settings.

Every numeric field carries its unit in its name and, in its metadata, the YAML key it
is read from, the kind of quantity it holds and a one-line description. The loader and
the field reference (docs/hardware-fields.md) are generated from this metadata, so a field cannot exist
without a unit and a description. The same metadata (a least value, the choices, the class
of a section or list) drives the checks every constructor runs (``memsim.hardware.checks``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from memsim.core import units
from memsim.core.dtypes import DTYPES
from memsim.hardware.checks import check_fields, fail, least_rate
from memsim.hardware.execution import ExecutionSpec
from memsim.hardware.families import (
    BY_FAMILY,
    FAMILIES,
    Efficiency,
    Family,
    efficiency_estimates,
    family_values,
    fill_efficiencies,
)
from memsim.hardware.families import names as family_names
from memsim.hardware.fields import spec_field
from memsim.hardware.kinds import KINDS, TENSOR_CLASSES, LevelKind
from memsim.hardware.kinds import names as kind_names
from memsim.hardware.links import LinkSpec, SystemSpec
from memsim.hardware.power import PowerSpec

SCOPES = ("unit", "chip")


# An operator whose dtype has no peak of its own (a weight-only format unpacked into the
# activation dtype, an fp32 op of an imported graph on a chip that lists no fp32 peak) computes at
# the first of these rates the chip declares; a chip must declare one of them.
PEAK_FALLBACK = ("bf16", "fp16", "fp32")


@dataclass(frozen=True, slots=True)
class ComputeSpec:
    units: int = spec_field("units", "count", "number of compute units (SMs, cores, PCUs)", least=1)
    peak_flops_per_s: tuple[tuple[str, int], ...] = spec_field(
        "peak", "rates", "dense peak per dtype for the whole chip, e.g. {bf16: 989 TFLOP/s}; an operator whose "
        f"dtype has none runs at the first of {', '.join(PEAK_FALLBACK)} given"
    )
    vector_flops_per_s: int = spec_field(
        "vector_peak", "flops", "peak of the vector/SIMT units used by elementwise, norm and softmax ops"
    )
    special_flops_per_s: int = spec_field(
        "special_peak", "flops", "results per second of the special-function units (exponentials): where given, a "
        "fused attention takes one exponential a score there, in series with its matrix work at the matrix `peak` "
        "(FlashAttention-3's accounting); 0: its softmax runs on the vector units", 0, least=0
    )
    efficiency: float = spec_field(
        "efficiency", "ratio", "achievable fraction of peak on large GEMMs for dtypes without a `dtype_efficiency` "
        "entry, and of `vector_peak` (default: its family's estimate)", None
    )
    dtype_efficiency: tuple[tuple[str, float], ...] = spec_field(
        "dtype_efficiency", "ratios", "achievable fraction of matrix peak per dtype on large GEMMs, from "
        "microbenchmarks, e.g. {bf16: 0.80, fp8: 0.71}", ()
    )
    kernel_efficiency: float = spec_field(
        "kernel_efficiency", "ratio", "fraction of that microbenchmark rate a serving stack's kernels sustain inside "
        "a model step (calibrated on calibration.csv; default: its family's estimate, else 1)", None
    )
    energy_fj_per_flop: tuple[tuple[str, int], ...] = spec_field(
        "energy", "energies", "dynamic energy per FLOP of the matrix units per dtype (operand delivery included), "
        "e.g. {bf16: 0.9 pJ/FLOP}; a dtype without one uses the entry of the dtype it computes at", ()
    )
    vector_energy_fj_per_flop: int = spec_field(
        "vector_energy", "flop_energy", "dynamic energy per FLOP of the vector units (elementwise ops, norms, "
        "softmax, unpacking weight formats)", 0
    )
    native: tuple[str, ...] = spec_field(
        "native", "names", "weight formats the matrix units consume directly, e.g. [fp8]: a GEMM whose weights are in "
        "one of them computes at that format's `peak` (activations quantised on the fly) and pays no `dequant`; "
        "other weight-only formats are unpacked into the activation dtype", (), choices=DTYPES
    )

    def __post_init__(self) -> None:
        unset = frozenset(n for n in ("efficiency", "kernel_efficiency") if getattr(self, n) is None)
        check_fields(self, "compute", unset)  # its chip fills them in (``families.fill_efficiencies``)
        peaks = dict(self.peak_flops_per_s)
        if not any(d in peaks for d in PEAK_FALLBACK):
            fail(f"needs a peak for one of {', '.join(PEAK_FALLBACK)}: operators in a dtype without a peak of "
                 "their own run at it", "compute.peak")
        for d in self.native:
            if d not in peaks:
                fail(f"{d} has no `peak`: a native format computes at its own rate", "compute.native")
        if unset:
            return
        for d in peaks:  # the error names the smaller of the two factors
            own = dict(self.dtype_efficiency)
            factors = {f"compute.dtype_efficiency.{d}" if d in own else "compute.efficiency": own.get(d, self.efficiency),
                       "compute.kernel_efficiency": self.kernel_efficiency}
            least_rate(self.peak(d) * self.matrix_efficiency(d), min(factors, key=factors.__getitem__),
                       f"the {d} peak x efficiency x kernel_efficiency")
        least_rate(self.vector_flops_per_s * self.efficiency, "compute.efficiency", "vector_peak x efficiency")
        if self.special_flops_per_s:  # 0: none declared
            least_rate(self.special_flops_per_s * self.kernel_efficiency, "compute.special_peak",
                       "special_peak x kernel_efficiency")

    def matrix_efficiency(self, dtype: str) -> float:
        """Achievable fraction of ``dtype``'s matrix peak inside a model step."""
        return dict(self.dtype_efficiency).get(dtype, self.efficiency) * self.kernel_efficiency

    def matmul_dtype(self, act_dtype: str, weight_dtype: str) -> str:
        """The dtype a GEMM computes in: its weights' format where the matrix units consume it directly
        (``native``), else its activations' (a weight-only format is unpacked into it)."""
        return weight_dtype if weight_dtype in self.native else act_dtype

    def peak(self, dtype: str) -> int:
        return dict(self.peak_flops_per_s)[self.peak_dtype(dtype)]

    def peak_dtype(self, dtype: str) -> str:
        """The dtype whose peak ``dtype`` runs at: its own, else the first of ``PEAK_FALLBACK`` given."""
        table = dict(self.peak_flops_per_s)
        return dtype if table.get(dtype) else next(d for d in PEAK_FALLBACK if d in table)

    def flop_energy(self, dtype: str) -> int:
        """Femtojoules per FLOP of ``dtype`` on the matrix units (0: not given)."""
        table = dict(self.energy_fj_per_flop)
        if dtype in table:
            return table[dtype]
        return next((table[d] for d in PEAK_FALLBACK if d in table), 0)


@dataclass(frozen=True, slots=True)
class MemoryLevel:
    name: str = spec_field("name", "name", "level name")
    kind: str = spec_field("kind", "choice", "its kind of memory (docs/hardware-fields.md, memory kinds): where it sits, "
                           "whether it is the scratchpad, what it holds by default", choices=kind_names)
    capacity_bytes: int = spec_field("capacity", "bytes", "capacity (per unit when scope is `unit`)", least=1)
    bandwidth_bytes_per_s: int = spec_field(
        "bandwidth", "bandwidth", "peak bandwidth (per unit when scope is `unit`), reads and writes share it"
    )
    latency_ps: int = spec_field("latency", "time", "time from issue to first byte of a transfer")
    channels: int = spec_field("channels", "count", "independent channels; transfers are striped over them", 1,
                               least=1)
    scope: str = spec_field("scope", "choice", "`unit` (one per compute unit) or `chip` (shared)", "chip",
                            choices=SCOPES)
    efficiency: float = spec_field(
        "efficiency", "ratio", "achievable fraction of peak bandwidth for streaming transfers (calibrated; default: "
        "its family's estimate for a kind that streams at it, else 1)", None
    )
    holds: tuple[str, ...] | None = spec_field(
        "holds", "classes", "tensor classes this level is a home for (weight, kv, activation); default by kind",
        None, choices=TENSOR_CLASSES,
    )
    via: str = spec_field("via", "text", "link this level is reached over (e.g. host DDR over `pcie`)", "")
    energy_fj_per_bit: int = spec_field(
        "energy", "bit_energy", "dynamic energy per bit read or written: the access, its interface and the on-chip "
        "path to the compute units' buffers", 0
    )

    def __post_init__(self) -> None:
        check_fields(self, units.entry("levels", self.name), frozenset({"efficiency"} if self.efficiency is None
                                                                      else ()))
        if self.efficiency is not None:  # else its chip fills it in
            least_rate(self.bandwidth_bytes_per_s * self.efficiency, units.entry("levels", self.name) + ".bandwidth",
                       "bandwidth x efficiency")

    @property
    def kind_of(self) -> LevelKind:
        """What its kind of memory is (``memsim.hardware.kinds``)."""
        return KINDS[self.kind]

    @property
    def is_scratchpad(self) -> bool:
        return self.kind_of.scratchpad

    def home_for(self, klass: str) -> bool:
        """Whether it is a home for tensors of ``klass``: as its ``holds`` says, else as its kind's default."""
        return klass in (self.holds if self.holds is not None else self.kind_of.holds)

    def effective_bandwidth(self, units: int) -> int:
        scale = units if self.scope == "unit" else 1
        return max(1, int(self.bandwidth_bytes_per_s * scale * self.efficiency))


@dataclass(frozen=True, slots=True)
class ChipSpec:
    name: str = spec_field("name", "name", "preset name")
    family: str = spec_field("family", "choice", "execution model (docs/hardware-fields.md, families): the mapping "
                             "strategy, the execution values and efficiencies it leaves out", choices=family_names)
    compute: ComputeSpec = spec_field("compute", "section", "compute units and peaks", of=ComputeSpec)
    levels: tuple[MemoryLevel, ...] = spec_field("levels", "list", "memory levels, fastest first", of=MemoryLevel)
    links: tuple[LinkSpec, ...] = spec_field("links", "list", "off-chip links", (), of=LinkSpec)
    execution: ExecutionSpec = spec_field("execution", "section", "execution settings", ExecutionSpec(),
                                          of=ExecutionSpec)
    system: SystemSpec = spec_field("system", "section", "default multi-chip system", SystemSpec(), of=SystemSpec)
    power: PowerSpec = spec_field("power", "section", "power figures of one chip", PowerSpec(), of=PowerSpec)
    stack: str = spec_field("stack", "text", "the runtime stack its vendor ships, a stack's name in configs/stacks (the "
                            "chip does not know its fields): what a run uses where it names none; empty: its "
                            "family's default (docs/stacks.md)", "")
    description: str = spec_field("description", "text", "free text", "")
    derived_from: str = spec_field(
        "derived_from", "text", "what a chip file with a `base:` starts from and how many values it changes "
        "(`h100-sxm + 3 changes`), which the run names beside the chip (the file's own name, or its stem); set by "
        "the loader", "")

    def __post_init__(self) -> None:
        """The family's execution values and efficiencies where the chip leaves them out, fields checked, then the
        names that execution, system and levels give of links and levels."""
        ex = self.execution
        if isinstance(ex, ExecutionSpec) and any(getattr(ex, name) is None for name in BY_FAMILY):
            unset = {name: value for name, value in family_values(self.family).items() if getattr(ex, name) is None}
            object.__setattr__(self, "execution", dataclasses.replace(ex, **unset))
        if isinstance(self.compute, ComputeSpec) and isinstance(self.levels, tuple):
            compute, filled = fill_efficiencies(self.family, self.compute, self.levels)
            object.__setattr__(self, "compute", compute)
            object.__setattr__(self, "levels", filled)
        check_fields(self, "")
        levels, links = [lvl.name for lvl in self.levels], [lk.name for lk in self.links]
        pads = [lvl.name for lvl in self.levels if lvl.is_scratchpad]
        if len(pads) != 1:
            kinds = ", ".join(k.name for k in KINDS.values() if k.scratchpad)
            fail(f"a chip has one scratchpad level (of kind {kinds}), not {len(pads)}"
                 + (f": {', '.join(pads)}" if pads else ""), "levels")
        _check_named(self.system.link, "link", links, "system.link")
        for lvl in self.levels:
            _check_named(lvl.via, "link", links, f"levels[{lvl.name}].via")
        ex = self.execution
        _check_named(ex.fabric, "link", links, "execution.fabric")
        for name in ex.stage_from:
            _check_named(name, "level", levels, "execution.stage_from")
        _check_named(ex.stage_into, "level", levels, "execution.stage_into")
        if self.power_cap_mw and self.power_cap_mw <= self.power.static_mw:
            fail(f"{self.power_cap_mw / 1000:g} W leaves no power for work above the chip's static "
                 f"{self.power.static_mw / 1000:g} W", "execution.power_cap" if ex.power_cap_mw else "power.tdp")

    def level(self, name: str) -> MemoryLevel:
        return _named(self.levels, name)

    def family_estimates(self) -> dict[str, Efficiency]:
        """The efficiencies it leaves to its family and the family estimates, by YAML path: what a run
        lists as estimates beside its file's, however the chip was built."""
        return efficiency_estimates(self.family, self.compute, self.levels)

    @property
    def family_of(self) -> Family:
        """What its family is (``memsim.hardware.families``)."""
        return FAMILIES[self.family]

    @property
    def scratchpad(self) -> MemoryLevel:
        """The compute units' scratchpad: the one level whose kind is one."""
        return next(lvl for lvl in self.levels if lvl.is_scratchpad)

    def link(self, name: str) -> LinkSpec:
        return _named(self.links, name)

    @property
    def interconnect(self) -> LinkSpec | None:
        """The link that joins chips in a system."""
        if self.system.link:
            return self.link(self.system.link)
        return self.links[0] if self.links else None

    @property
    def power_cap_mw(self) -> int:
        """The power one chip may draw: ``execution.power_cap``, else the TDP (0: no cap)."""
        return self.execution.power_cap_mw or self.power.tdp_mw

    def chip_capacity(self, level: MemoryLevel) -> int:
        return level.capacity_bytes * (self.compute.units if level.scope == "unit" else 1)


def _check_named(name: str, what: str, known: list[str], field: str) -> None:
    """An empty name names nothing; any other must be one of ``known``."""
    if name and name not in known:
        fail(f"no {what} named {name!r} ({what}s: {', '.join(known) or 'none'})", field)


def _named(items: tuple, name: str) -> Any:
    for item in items:
        if item.name == name:
            return item
    raise KeyError(name)


def yaml_fields(cls: type) -> dict[str, Any]:
    """YAML key -> dataclass field of ``cls``."""
    return {f.metadata["key"]: f for f in fields(cls)}

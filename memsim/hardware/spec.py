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
from memsim.hardware.families import BY_FAMILY, FAMILIES, Family, family_values
from memsim.hardware.families import names as family_names
from memsim.hardware.fields import spec_field
from memsim.hardware.kinds import KINDS, TENSOR_CLASSES, LevelKind
from memsim.hardware.kinds import names as kind_names
from memsim.hardware.links import LinkSpec, SystemSpec
from memsim.hardware.power import PowerSpec

SCOPES = ("unit", "chip")
# A chip's engines: compute units, a second compute stream for independent branches, the copy
# (DMA) engine, communication.
STREAMS = ("compute", "branch", "copy", "comm")
PIPELINES = ("none", "layers")
# Whether a collective is a kernel of its own, launched at ``op_overhead`` (NCCL on a GPU), or
# runs inside the compiled program (a fused dataflow kernel, a statically scheduled program).
COLLECTIVE_LAUNCH = ("kernel", "fused")
# What one fused kernel of the rdu family runs: a decoder layer, or every decoder layer as one
# call whose pipelined outer loop runs them (kernel looping).
FUSED_KERNEL = ("layer", "step")
EMBEDDING_DTYPES = ("activation", "weight")  # what an embedding table is stored as: bf16, or as the weights
# Beyond a few dozen chunks a collective's pieces are too small to hide anything and each
# pays the algorithm's latencies again.
MAX_COMM_OVERLAP = 64


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
        "entry, and of `vector_peak`", 1.0
    )
    dtype_efficiency: tuple[tuple[str, float], ...] = spec_field(
        "dtype_efficiency", "ratios", "achievable fraction of matrix peak per dtype on large GEMMs, from "
        "microbenchmarks, e.g. {bf16: 0.80, fp8: 0.71}", ()
    )
    kernel_efficiency: float = spec_field(
        "kernel_efficiency", "ratio", "fraction of that microbenchmark rate a serving stack's kernels sustain inside "
        "a model step (calibrated on calibration.csv)", 1.0
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
        check_fields(self, "compute")
        peaks = dict(self.peak_flops_per_s)
        if not any(d in peaks for d in PEAK_FALLBACK):
            fail(f"needs a peak for one of {', '.join(PEAK_FALLBACK)}: operators in a dtype without a peak of "
                 "their own run at it", "compute.peak")
        for d in self.native:
            if d not in peaks:
                fail(f"{d} has no `peak`: a native format computes at its own rate", "compute.native")
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
        table = dict(self.peak_flops_per_s)
        return table.get(dtype) or table[next(d for d in PEAK_FALLBACK if d in table)]

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
        "efficiency", "ratio", "achievable fraction of peak bandwidth for streaming transfers (calibrated)", 1.0
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
        check_fields(self, units.entry("levels", self.name))
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
class ExecutionSpec:
    op_overhead_ps: int = spec_field(
        "op_overhead", "time", "fixed cost per kernel on the device (a graph node's launch, the kernel's start and "
        "drain); every kernel pays it", 2_000_000
    )
    prefetch_depth: int = spec_field("prefetch_depth", "count", "tile buffers per operand stream (2 = double buffering)",
                                     2, least=1)
    accumulator_bytes: int = spec_field("accumulator", "bytes", "bytes per accumulator element in SRAM", 4, least=1)
    unit_tile: int = spec_field(
        "unit_tile", "count", "output tile edge one compute unit works on; GEMM tiles run in waves across units "
        "(0: work spreads finely over the units, no waves)", 128
    )
    dequant_ops: tuple[tuple[str, float], ...] = spec_field(
        "dequant", "ops", "vector ops per weight element to unpack a weight-only format (see dequant_kernel)",
        (("bfp4", 4.0), ("bfp8", 2.0), ("fp8", 2.0), ("int4", 4.0), ("int8", 3.0)),
    )
    kv_split: int = spec_field(
        "kv_split", "count", "attention work items per (sequence, KV head, query block of `unit_tile` rows) that the "
        "keys are split into, so that a decode at small batch keeps the units busy (FlashDecoding); 0: as many as "
        "fill the units, 1: no split, the other units idle", 0
    )
    attention_fill: int = spec_field(
        "attention_fill", "count", "keys' worth of its main loop that one fused-attention work item (a query block "
        "against its keys) spends filling and draining its pipeline: loading its queries and first keys, rescaling "
        "and writing its output. Short sequences pay it over fewer keys, so attention's rate rises with sequence "
        "length (0: none)", 0
    )
    # What a family does is declared here by name, never inferred from what a link or level is called.
    fabric: str = spec_field(
        "fabric", "text", "on-chip link over which a wafer broadcasts a matrix op's input and reduces its output "
        "across the layer's region (empty: none)", ""
    )
    fabric_rows: int = spec_field(
        "fabric_rows", "count", "rows of the 2D mesh of compute units that `fabric` joins; with `fabric_cols`, a "
        "traversal crosses its region's diameter at the link's latency per hop (memsim.mapping.mesh; 0: no mesh, a "
        "traversal pays the link's latency once)", 0)
    fabric_cols: int = spec_field("fabric_cols", "count", "columns of that mesh (see `fabric_rows`)", 0)
    fabric_width_bytes: int = spec_field(
        "fabric_width", "bytes", "bytes one link of that mesh carries per hop time (the link's latency): a traversal "
        "streams its vector's slice per row of the region over one", 0)
    fabric_sync_ps: int = spec_field(
        "fabric_sync", "time", "synchronisation every traversal of that mesh pays once: the receivers learn that the "
        "whole vector has arrived", 0)
    stage_from: tuple[str, ...] = spec_field(
        "stage_from", "names", "levels whose tensors a dataflow chip copies into `stage_into` before use", ()
    )
    stage_into: str = spec_field("stage_into", "text", "level that `stage_from` tensors are staged into", "")
    # Concurrency: the engines a chip has and how it overlaps work (defaults per family).
    streams: tuple[str, ...] = spec_field(
        "streams", "names", "the chip's streams, from compute, branch (a second compute stream for independent branches), "
        "copy, comm; `[compute]` runs every operator in one stream, one at a time (default: by family)", None, choices=STREAMS
    )
    weight_prefetch: int = spec_field(
        "weight_prefetch", "count", "operators ahead whose weights the copy stream stages into SRAM (or L2) while "
        "the current one computes; a GEMM stages the part of its weights that fits its share of the staging area "
        "(the area over `prefetch_depth`) (0: off; default: by family)", None
    )
    pipeline: str = spec_field(
        "pipeline", "choice", "`layers`: each layer runs in its own region of the chip (its share of compute and "
        "SRAM) and regions run concurrently as a pipeline; `none`: operators use the whole chip (default: by family)",
        None, choices=PIPELINES
    )
    pipeline_chunks: int = spec_field(
        "pipeline_chunks", "count", "with `pipeline: layers`, the token chunks a prefill flows through the regions "
        "in (unless --microbatches says otherwise; default: by family)", None, least=1
    )
    power_cap_mw: int = spec_field(
        "power_cap", "power", "the power one chip may draw (0: its `power.tdp`), as its mean over `power.window`; a "
        "chip that would draw more runs at a lower clock and voltage, and the compute time that adds is stall cause "
        "`power`", 0
    )
    collective_launch: str = spec_field(
        "collective_launch", "choice", "`kernel`: a collective is a kernel of its own: it pays the launch "
        "(`op_overhead`, and the stack's launch call) and its direct all-reduces end with a barrier, as NCCL's and vLLM's on a "
        "GPU; `fused`: it runs inside the compiled program (a fused dataflow kernel, a statically scheduled program) "
        "and pays neither (default: by family)", None, choices=COLLECTIVE_LAUNCH
    )
    fused_kernel: str = spec_field(
        "fused_kernel", "choice", "rdu family: what one fused kernel, launched once at `op_overhead`, runs: `layer` "
        "a decoder layer (a launch per layer); `step` every decoder layer, as one call whose pipelined outer loop "
        "runs them (kernel looping); operators outside the layers are kernels of their own", "layer",
        choices=FUSED_KERNEL
    )
    embedding_dtype: str = spec_field(
        "embedding_dtype", "choice", "the format the input embedding table (and an LM head tied to it) is stored in: "
        "`activation` (the activation dtype, bf16) or `weight` (quantised with the projections, --weight-dtype); "
        "an untied LM head is a projection, stored as they are", "activation", choices=EMBEDDING_DTYPES
    )
    comm_overlap: int = spec_field(
        "comm_overlap", "count", "at most this many chunks a tensor-parallel all-reduce and the GEMM before it are "
        "cut into, so that chunk i goes over the links while the GEMM computes chunk i+1 (1: off; the count that "
        f"the textbook costs say is fastest is used, up to {MAX_COMM_OVERLAP}; default: by family)", None
    )

    def __post_init__(self) -> None:
        unset = frozenset(name for name in BY_FAMILY if getattr(self, name) is None)  # its chip fills them in
        check_fields(self, "execution", unset)
        if self.streams is not None and "compute" not in self.streams:
            fail("must name `compute` once, and each stream once", "execution.streams")
        if self.stage_from and not self.stage_into:
            fail("required when execution.stage_from is set", "execution.stage_into")
        if self.stage_into and self.stage_into in self.stage_from:
            fail(f"{self.stage_into!r} cannot be staged into itself", "execution.stage_from")
        if self.comm_overlap is not None and not 1 <= self.comm_overlap <= MAX_COMM_OVERLAP:
            fail(f"must be from 1 (off) to {MAX_COMM_OVERLAP}", "execution.comm_overlap")
        if bool(self.fabric_rows) != bool(self.fabric_cols) or (self.fabric_rows and not self.fabric_width_bytes):
            missing = "width" if self.fabric_rows and self.fabric_cols else "cols" if self.fabric_rows else "rows"
            fail("a mesh needs rows, columns and a link width (at least 1 B)", f"execution.fabric_{missing}")

    def dequant(self, dtype: str) -> float:
        return dict(self.dequant_ops).get(dtype, 0.0)

    @property
    def collective_launch_ps(self) -> int:
        """What a collective pays on the device at its start: a kernel's cost, or nothing inside a
        fused program (the host's launch call, where a stack makes one, is the stack's)."""
        return self.op_overhead_ps if self.collective_launch == "kernel" else 0


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
        """The family's execution values where the chip leaves them out, fields checked, then the
        names that execution, system and levels give of links and levels."""
        ex = self.execution
        if isinstance(ex, ExecutionSpec) and any(getattr(ex, name) is None for name in BY_FAMILY):
            unset = {name: value for name, value in family_values(self.family).items() if getattr(ex, name) is None}
            object.__setattr__(self, "execution", dataclasses.replace(ex, **unset))
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

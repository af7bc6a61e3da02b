"""A chip's execution settings: how its engines run a step (its streams, its pipeline, its
kernels' costs), with the values its family fills in where it leaves them out (``families``)."""
from __future__ import annotations

from dataclasses import dataclass

from memsim.hardware.checks import check_fields, fail
from memsim.hardware.families import BY_FAMILY
from memsim.hardware.fields import spec_field

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

"""Frozen specs of a runtime stack: what the software that drives a chip adds to its work.

A chip file says what the silicon does; a stack file says what the software adds: which kernels
it runs (``kernels``), how it dispatches them (``dispatch``), the collective library it calls and
how that library chooses its algorithm by message size (``collectives``), the host's work every
step (``step``) and the serving loop's policies (``serving``). Every field carries its YAML key,
unit and help in its metadata, as a chip's do (``memsim.hardware.fields``), and the same checks
and loader build it; neither spec knows the other's fields. ``ideal`` is the stack that adds
nothing: the hardware bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from memsim.hardware.checks import check_fields
from memsim.hardware.fields import spec_field
from memsim.workload.graph import COLLECTIVE_KINDS

LAUNCH = ("graph", "eager")
HOST = ("ahead", "serial")
CHANNELS = ("blocks", "routes")
ATTENTION = ("fused", "unfused", "context_unfused")
GEMM_TILES = ("fixed", "fill", "deepgemm")
# How a weight-only format is unpacked: one pass after each chunk lands (gpt-fast's kernels), or
# inside the GEMM while the next weights stream in (Marlin-style fused kernels).
DEQUANT_KERNELS = ("serial", "fused")
OVERLAP = ("none", "output", "full")
KV_OF = ("total", "free")
SYSTEM_ALGORITHM = "system"  # a collective implementation that runs the chip's own ``system.collective``


@dataclass(frozen=True, slots=True)
class KernelSpec:
    launch: str = spec_field(
        "launch", "choice", "how a decode step's kernels reach the device: `graph` (captured once and replayed: CUDA "
        "graphs, a tt-metal trace) or `eager` (the host launches each)", "graph", choices=LAUNCH)
    graph_max_batch: int = spec_field(
        "graph_max_batch", "count", "the largest decode batch the stack has captured a graph for; a larger one runs "
        "eager (0: no limit)", 0)
    prefill_launch: str = spec_field(
        "prefill_launch", "choice", "how a prefill step's (and a mixed step's) kernels reach the device", "graph",
        choices=LAUNCH)
    attention: str = spec_field(
        "attention", "choice", "`fused` (FlashAttention), `unfused`, or `context_unfused` (a prefill's unfused, its "
        "QK^T scores in fp32; a decode's fused: FasterTransformer v5)", "fused", choices=ATTENTION)
    gemm_tiles: str = spec_field(
        "gemm_tiles", "choice", "`fixed`: every GEMM runs the chip's `unit_tile`-edged tiles in waves (the 2021-2024 "
        "stacks of calibration.csv); `fill`: the library picks per shape the tile and split of K that finish "
        "soonest (today's cuBLAS, measured.csv); `deepgemm`: DeepGEMM's rule (64 or 128 rows, 16 to 128 columns: "
        "the fewest waves, then the fullest last wave; K unsplit)", "fixed", choices=GEMM_TILES)
    decode_group_heads: int = spec_field(
        "decode_group_heads", "count", "query heads of a grouped-query (GQA) group that one decode-attention work "
        "item serves: each item reads its KV head once, so a group of more heads reads it group / this many times "
        "(0: the whole group from one read, as FlashAttention and FlashDecoding pack it)", 0)
    layer_programs: int = spec_field(
        "layer_programs", "count", "programs (kernels) the stack runs a decoder layer where that is more than the "
        "layer's operators in memsim's graph (its layout conversions, reshapes and typecasts): each one beyond them "
        "an empty program that pays a kernel's dispatch, the chip's `op_overhead` and the stack's host cost "
        "(0: one program an operator)", 0)
    dequant_kernel: str = spec_field(
        "dequant_kernel", "choice", "`serial`: a weight chunk is unpacked after it lands, before the next load "
        "(gpt-fast); `fused`: unpacking overlaps the weight stream and the multiply, and the slower of the three "
        "sets the pace (Marlin-style kernels)", "serial", choices=DEQUANT_KERNELS)

    def __post_init__(self) -> None:
        check_fields(self, "kernels")

    def launch_of(self, phase: str, batch: int) -> str:
        """How a step of ``phase`` (decode, prefill) and ``batch`` sequences launches its kernels."""
        if phase != "decode":
            return self.prefill_launch
        if self.launch == "graph" and self.graph_max_batch and batch > self.graph_max_batch:
            return "eager"
        return self.launch


@dataclass(frozen=True, slots=True)
class DispatchSpec:
    host: str = spec_field(
        "host", "choice", "`ahead`: the host issues launches as fast as it can and the device runs them as they "
        "arrive (a kernel starts once its launch is issued and the one before it has ended); `serial`: the host "
        "waits for each kernel before it launches the next, so every launch is paid in full", "ahead", choices=HOST)
    launch_ps: int = spec_field(
        "launch", "time", "the host's launch call per kernel with eager launches (cudaLaunchKernel, a program's "
        "enqueue)", 0)
    op_ps: int = spec_field(
        "op", "time", "the framework's own host work per operator with eager launches, beside the launch call "
        "(PyTorch's dispatcher, a Python op's wrapper)", 0)
    graph_ps: int = spec_field(
        "graph", "time", "the host's call that replays a captured graph, once a step", 0)
    node_ps: int = spec_field(
        "node", "time", "the device's cost per node of a replayed graph, beyond the chip's `op_overhead` (0: none)", 0)

    def __post_init__(self) -> None:
        check_fields(self, "dispatch")


@dataclass(frozen=True, slots=True)
class CollectiveImpl:
    name: str = spec_field("name", "name", "the implementation's name, e.g. `nccl-ring-ll` or `custom-one-shot`")
    kinds: tuple[str, ...] = spec_field(
        "kinds", "names", "the collectives it runs (allreduce, allgather, reduce_scatter, alltoall)", ("allreduce",),
        choices=COLLECTIVE_KINDS)
    algorithm: str = spec_field(
        "algorithm", "text", "an all-reduce's algorithm: one registered in memsim.mapping.collectives (ring, tree, "
        f"one_shot, two_shot, ...), or `{SYSTEM_ALGORITHM}` (the chip's `system.collective`)", SYSTEM_ALGORITHM)
    tier: int = spec_field(
        "tier", "count", "the library's order of preference: of the implementations that admit a message, those of "
        "the lowest tier are tried, and the one that finishes soonest there runs (a custom kernel first, NCCL "
        "after it; NCCL's protocols in one tier, as its tuner picks the cheapest)", 0)
    max_bytes: int = spec_field("max_bytes", "bytes", "the largest message it takes (0: any)", 0)
    min_bytes: int = spec_field("min_bytes", "bytes", "the smallest message it takes", 0)
    max_ranks: int = spec_field("max_ranks", "count", "the most ranks it runs on (0: any)", 0)
    call_ps: int = spec_field(
        "call", "time", "the device's fixed cost per call beyond the kernel's launch: the library's setup, its "
        "proxy's start, the first flag's wait", 0)
    step_ps: int | None = spec_field(
        "step", "time", "the protocol's latency every round of transfers pays beside its route's link latencies, in "
        "place of the chip's `system.step_latency` (its handshake: a flag written and seen); not given: the chip's",
        None)
    efficiency: float = spec_field(
        "efficiency", "ratio", "the payload's share of what the protocol puts on the wire (NCCL's LL protocol sends "
        "a flag with every 8 bytes: 0.5; LL128: 120/128): a round's transfers carry payload / efficiency bytes", 1.0)
    channel_bandwidth: int = spec_field(
        "channel_bandwidth", "bandwidth", "what one of the library's channels (a block of threads copying and "
        "reducing) carries a second: a transfer is no faster than its bytes over its channels' bandwidth, whatever "
        "the link (0: no limit)", 0, least=0)
    channel_bytes: int = spec_field(
        "channel_bytes", "bytes", "the message's bytes on the wire that one channel takes before the library opens "
        "another (NCCL gives a small message fewer channels); with `channel_bandwidth` (0: every channel from the "
        "first byte)", 0)
    max_channels: int = spec_field("max_channels", "count", "the most channels it opens (0: no limit)", 0)
    channel: str = spec_field(
        "channel", "choice", "what a channel is: `blocks` (a block of threads; several share a route to a peer, as "
        "NCCL's do) or `routes` (one route to a peer, a direction of a ring, as a Tenstorrent worker on an Ethernet "
        "link): a sender then has no more channels than the peers it sends to in a round", "blocks", choices=CHANNELS)
    host_ps: int = spec_field(
        "host", "time", "the host's work per call with eager launches, beside the kernel's launch call: the "
        "library's enqueue and the framework's wrapper (torch.distributed)", 0)

    def __post_init__(self) -> None:
        where = f"collectives[{self.name}]" if isinstance(self.name, str) else "collectives"
        check_fields(self, where, frozenset({"step_ps"}) if self.step_ps is None else frozenset())

    def admits(self, kind: str, nbytes: int, ranks: int) -> bool:
        """Whether it runs a ``kind`` collective of ``nbytes`` over ``ranks``."""
        return kind in self.kinds and self.min_bytes <= nbytes and (not self.max_bytes or nbytes <= self.max_bytes) \
            and (not self.max_ranks or ranks <= self.max_ranks)

    def channel_rate(self, nbytes: int, routes: int = 0) -> int:
        """What its channels carry a second for a message of ``nbytes`` (0: no limit): a channel for
        every ``channel_bytes`` of it, at least one, at most ``max_channels`` and, where a channel is a
        route, at most the ``routes`` a sender's round takes (0: not counted). Counted as a fraction
        (a message of 1.5 channels' bytes has 1.5 of their rate), so more bytes never take less time:
        while the library opens channels, a message's time stays flat."""
        if not self.channel_bandwidth:
            return 0
        channels = Fraction(max(nbytes, self.channel_bytes), self.channel_bytes) if self.channel_bytes \
            else Fraction(max(1, self.max_channels))
        if self.max_channels:
            channels = min(channels, Fraction(self.max_channels))
        if self.channel == "routes" and routes:
            channels = min(channels, Fraction(routes))
        # exact, and rounded up: where a message's bytes and its channels grow together, its time stays flat
        # to the picosecond (a rate rounded down would add one whenever the time is a whole number of them)
        return max(1, math.ceil(channels * self.channel_bandwidth))


@dataclass(frozen=True, slots=True)
class StepHostSpec:
    fixed_ps: int = spec_field(
        "fixed", "time", "the host's work every step before its first launch, whatever the batch: scheduling, input "
        "preparation, the step's call into the model", 0)
    per_sequence_ps: int = spec_field(
        "per_sequence", "time", "the host's work before the launches, per sequence in the step (its block table, "
        "its scheduling, its sampling parameters)", 0)
    per_token_ps: int = spec_field(
        "per_token", "time", "the host's work before the launches, per new token (input ids, positions, slot "
        "mapping)", 0)
    output_ps: int = spec_field(
        "output", "time", "the host's work after the step, per sequence: the sampled token brought back, "
        "detokenised and handed to its request", 0)
    output_fixed_ps: int = spec_field(
        "output_fixed", "time", "the host's work after the step, whatever the batch (the device-to-host copy "
        "and synchronisation)", 0)
    per_rank_ps: int = spec_field(
        "per_rank", "time", "with tensor parallelism, the host's work per rank beyond the first every step: the "
        "step's inputs broadcast to the workers", 0)
    overlap: str = spec_field(
        "overlap", "choice", "what of the host's work runs while the device computes: `none` (all of it in "
        "series with the device), `output` (the output work overlaps the next step: asynchronous output "
        "processing), `full` (the next step is scheduled and prepared while this one runs: an overlap scheduler; "
        "a step then takes the longer of the device's and the host's work)", "none", choices=OVERLAP)

    def __post_init__(self) -> None:
        check_fields(self, "step")

    def before_ps(self, sequences: int, tokens: int, ranks: int) -> int:
        """The host's work before a step's first launch."""
        return (self.fixed_ps + sequences * self.per_sequence_ps + tokens * self.per_token_ps
                + max(0, ranks - 1) * self.per_rank_ps)

    def after_ps(self, sequences: int) -> int:
        """The host's work after a step's last kernel."""
        return self.output_fixed_ps + sequences * self.output_ps


@dataclass(frozen=True, slots=True)
class ServingSpec:
    scheduler: str = spec_field(
        "scheduler", "text", "how its scheduler forms a step's batch: a scheduler registered in "
        "memsim.engine.schedulers (prefill_first, chunked, static)", "prefill_first")
    max_seqs: int = spec_field("max_seqs", "count", "sequences in one step at most (vLLM's max_num_seqs)", 256,
                               least=1)
    max_tokens: int = spec_field(
        "max_tokens", "count", "tokens computed in one step at most (vLLM's max_num_batched_tokens: with chunked "
        "prefill, a step's token budget)", 8192, least=1)
    multi_step: int = spec_field(
        "multi_step", "count", "decode steps run per scheduling round: the host's step work is paid once a round, "
        "and a new request waits for the round to end (vLLM's --num-scheduler-steps)", 1, least=1)
    kv_fraction: float = spec_field(
        "kv_fraction", "ratio", "the share of device memory the stack lets the weights, activations and KV cache "
        "use (vLLM's gpu_memory_utilization, TensorRT-LLM's kv_cache_free_gpu_mem_fraction, SGLang's "
        "mem_fraction_static)", 1.0)
    kv_of: str = spec_field(
        "kv_of", "choice", "what `kv_fraction` is a share of: `total` device memory (vLLM, SGLang: the weights come "
        "out of it) or the memory `free` once the weights are loaded (TensorRT-LLM)", "total", choices=KV_OF)
    watermark: float = spec_field(
        "watermark", "share", "the share of the KV cache's blocks a new request must leave free to be "
        "admitted (vLLM V0's 1%), so running sequences can grow", 0.0)
    frontend_ps: int = spec_field(
        "frontend", "time", "a request's time in the front end before it reaches the scheduler, and its last "
        "token's after: the HTTP server, tokenising and detokenising", 0)

    def __post_init__(self) -> None:
        check_fields(self, "serving")


@dataclass(frozen=True, slots=True)
class StackSpec:
    name: str = spec_field("name", "name", "the stack's name")
    description: str = spec_field("description", "text", "free text: the stack, its version, what it rests on", "")
    kernels: KernelSpec = spec_field("kernels", "section", "the kernels it runs", KernelSpec(), of=KernelSpec)
    dispatch: DispatchSpec = spec_field("dispatch", "section", "how its host dispatches them", DispatchSpec(),
                                        of=DispatchSpec)
    collectives: tuple[CollectiveImpl, ...] = spec_field(
        "collectives", "list", "the collective library's implementations (none: the chip's own algorithm at the "
        "hardware's cost)", (), of=CollectiveImpl)
    step: StepHostSpec = spec_field("step", "section", "the host's work every step", StepHostSpec(), of=StepHostSpec)
    serving: ServingSpec = spec_field("serving", "section", "the serving loop's policies", ServingSpec(),
                                      of=ServingSpec)

    def __post_init__(self) -> None:
        check_fields(self, "")

    def collective(self, kind: str, nbytes: int, ranks: int) -> tuple[CollectiveImpl, ...]:
        """The implementations that may run a ``kind`` collective of ``nbytes`` over ``ranks``: those of
        the lowest tier that has any, in file order."""
        admitted = [c for c in self.collectives if c.admits(kind, nbytes, ranks)]
        tier = min((c.tier for c in admitted), default=0)
        return tuple(c for c in admitted if c.tier == tier)


IDEAL = StackSpec(name="ideal", description="the hardware bound: no host work, graph launches, the chip's own "
                  "collectives at the hardware's cost")

"""What ``summary.json`` holds, declared once: every key of a run's summary is a field of
``Summary``, with its unit, what it means and how it combines over the steps of a generation.

``summarize`` builds a ``Summary`` by keyword; its nested parts are records too
(``memsim.report.summary_records``: ``Workload``, ``Traffic``, ``Energy``, ``Estimates``, ...) or
lists and mappings of them by level, link or chip. It stays an object until a writer asks for ``Summary.as_dict``, the keys in
the declared order (``plain``). The generation's combine rules (``COMBINE``), the console table
(``memsim.run.table``) and the outputs reference (``docs/summary.md``, ``reference``) are
read from these fields, so a key is added in one place. A key that only some runs have (a
generation's ``ttft_s``, a speculative run's ``speculative``, a grid search's ``grid_search``,
the estimates ``memsim.run.api.run`` adds) is ``ABSENT`` elsewhere and left out of the dict.

How a key combines over a generation (``memsim/run/generation.py``): SUMMED over the prefill and
every decode step (interpolated between the simulated ones), taken ONCE from the prefill (it is
the same for every step, or describes the system), or RECOMPUTED from the combined values.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from memsim.report.summary_records import (
    ABSENT,
    DecodeSample,
    Energy,
    EngineCounts,
    Estimates,
    Grid,
    GridTried,
    Speculated,
    StackUsed,
    Traffic,
    Workload,
    plain,
)

SUMMED, ONCE, RECOMPUTED = "summed", "once", "recomputed"

# Whose a key's figure is in a run of several chips (``scope``; the console tags its lines with it):
# the step's (empty), the chips simulated (one per pipeline stage: a stage's tensor-parallel ranks run
# as its first, so one chip's figures, summed over the stages), one tensor-parallel rank's share (its
# stages together), one chip's, or every chip's.
STEP, SIMULATED, RANK, CHIP, SYSTEM = "", "simulated", "rank", "chip", "system"
SCOPES = {STEP: "", SIMULATED: "a chip (per stage, summed)", RANK: "a rank's share", CHIP: "a chip",
          SYSTEM: "all chips"}


def scope_tag(scope: str, chips: int, stages: int) -> str:
    """How the console tags a key of ``scope`` in a run of ``chips`` in ``stages`` pipeline stages."""
    if chips <= 1 or scope == STEP:
        return ""
    if scope in (SIMULATED, RANK):
        return "a chip" if stages == 1 else f"a chip of each of the {stages} stages, summed"
    return "a chip" if scope == CHIP else f"all {chips} chips"


def summary_field(unit: str, combine: str, help: str, *, optional: bool = False, scope: str = STEP) -> Any:
    """A summary key in ``unit`` (``s``, ``B``, ``J``, ``W``, ``FLOP``, ``MHz``, ``1`` for a ratio or a
    count, ``text``, or ``object`` for a nested one) that combines by ``combine``, meaning ``help``;
    ``optional``: only some runs have it; ``scope``: whose figure it is with several chips (``SCOPES``)."""
    assert scope in SCOPES, scope
    meta = {"unit": unit, "help": help, "combine": combine, "scope": scope}
    return field(default=ABSENT, metadata=meta) if optional else field(metadata=meta)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    hardware: str = summary_field(
        "text", ONCE,
        "the chip's name: a preset's, or a chip file's (its `name:`, else the file's stem)")
    derived_from: str = summary_field(
        "text", ONCE,
        "only for a chip file with a `base:`: what it starts from and how many values it changes "
        "(`h100-sxm + 3 changes`)", optional=True)
    family: str = summary_field(
        "text", ONCE,
        "execution model: gpu, wafer, rdu or cpu")
    stack: StackUsed = summary_field(
        "object", ONCE,
        "the runtime stack the run is on: its `name`, `description` and `launch` (how the step's kernels reached "
        "the device: graph or eager), and `default` (true where the run named none and got the one its chip's "
        "vendor ships or its family's, docs/stacks.md). Its host's launches and work a step are the stall `host`, "
        "its collective library's fixed cost a call the stall `collective_library`")
    workload: Workload = summary_field(
        "object", RECOMPUTED,
        "model, arch, phase, batch, tokens (per sequence in this step), context, weight and KV dtypes; with "
        "micro-batches, `microbatches` and the whole step's batch (or prompt)")
    step_time_s: float = summary_field(
        "s", SUMMED,
        "simulated time of the step")
    roofline_s: float = summary_field(
        "s", SUMMED,
        "lower bound: the largest of, for each chip (or region), its FLOPs at peak (matrix peak for GEMMs and "
        "attention, vector peak for the rest), each level's compulsory bytes at peak bandwidth and its "
        "collectives' least time; each link direction's bytes at its bandwidth; and the least time of the path "
        "through the pipeline stages (docs/how-it-works.md, execution model)")
    roofline_bound: str = summary_field(
        "text", RECOMPUTED,
        "what bounds the roofline: `compute`, a level name, a link direction (`link:nvlink[0>sw]`, `link:c2c`) or"
        " `pipeline hops`")
    step_over_roofline: float | None = summary_field(
        "1", RECOMPUTED,
        "`step_time_s / roofline_s` (never below 1)")
    flops_total: int = summary_field(
        "FLOP", SUMMED,
        "FLOPs of the step (2·m·n·k per GEMM; attention QK^T and PV)", scope=SIMULATED)
    compute_utilization: float = summary_field(
        "1", RECOMPUTED,
        "`flops_total / (step_time_s × matrix peak)`")
    bytes_per_level: dict[str, Traffic] = summary_field(
        "object", SUMMED,
        "per level: `read`, `written` and `total` bytes moved and `busy_s`, the time its channels were held, over"
        " every chip. `total` splits into `compulsory` bytes (what each operator moves with unlimited SRAM: each "
        "operand once) and `capacity` bytes (the re-fetches its tiles add because SRAM is finite, as a cache's "
        "capacity misses)", scope=SIMULATED)
    placement: dict[str, dict[str, int]] = summary_field(
        "object", ONCE,
        "where the weights and the KV cache live: for `weight` and `kv`, the bytes of one tensor-parallel rank's "
        "share (its pipeline stages together) in each memory level that holds some", scope=RANK)
    compute_busy_s: float = summary_field(
        "s", SUMMED,
        "time the compute units were busy computing, summed over the chips simulated (one per pipeline stage). "
        "Unpacking a weight-only format is not compute: it is the `dequant` interval beside it", scope=SIMULATED)
    bytes_per_link: dict[str, Traffic] = summary_field(
        "object", SUMMED,
        "per link (and per direction of each inter-chip link, e.g. `nvlink[0>sw]`): `read`, `written` and `total`"
        " bytes carried and `busy_s`, the time it was held, replayed and fast-forwarded work included (e.g. PCIe "
        "traffic of an offloaded model, a wafer's fabric and I/O, tensor-parallel all-reduces)", scope=SIMULATED)
    per_chip: dict[str, dict[str, Traffic]] = summary_field(
        "object", SUMMED,
        "per chip simulated (`chip0`, ...; a stage's other tensor-parallel ranks run as its first; "
        "`chip0.region1` for a region's own SRAM and fabric on a layer-pipelined chip) and `system` for the link "
        "directions between chips: per level and link, named as in `stall_s` (`hbm`, `link:pcie`, "
        "`link:nvlink[0>sw]`), `read`, `written`, `total` bytes and `busy_s`. They add up to `bytes_per_level` "
        "and `bytes_per_link`")
    utilization: dict[str, dict[str, float]] = summary_field(
        "object", RECOMPUTED,
        "the same resources: the share of the step each was held (`busy_s` over the step time)")
    compulsory_bytes: dict[str, int] = summary_field(
        "object", SUMMED,
        "per level: bytes any schedule must move there (persistent tensors read or written, plus the step's "
        "external inputs and outputs)", scope=SIMULATED)
    weight_bytes: int = summary_field(
        "B", SUMMED,
        "weight bytes the step must read. Embedding tables are gathered, so only the rows used count", scope=SIMULATED)
    weight_bytes_stored: int = summary_field(
        "B", ONCE,
        "bytes of all weights held in memory: one tensor-parallel rank's, summed over its pipeline stages", scope=RANK)
    kv_cache_bytes: int = summary_field(
        "B", SUMMED,
        "KV-cache bytes the step reads", scope=SIMULATED)
    kv_cache_bytes_written: int = summary_field(
        "B", SUMMED,
        "KV-cache bytes the step appends", scope=SIMULATED)
    chips: int = summary_field(
        "1", ONCE,
        "chips in the system (`tp × pp`)")
    grid: Grid = summary_field(
        "object", ONCE,
        "`tp` and `pp`: the tensor-parallel ranks and pipeline stages the chips form")
    exposed_comm_s: float = summary_field(
        "s", SUMMED,
        "seconds compute waits for inter-chip communication (stalls on `system.link`), summed over the chips "
        "simulated", scope=SIMULATED)
    grid_search: list[GridTried] = summary_field(
        "object", ONCE,
        "--chips N: every tp x pp grid tried, its roofline and, where simulated, its time", optional=True)
    embedding_placement: dict[str, str] = summary_field(
        "object", ONCE,
        "where the `embedding` table and the `lm_head` live: `with layers` (on a pipeline stage or region that "
        "runs layers too), `own stage` (on stages that run no layer) or `host` (in a level reached over a link: "
        "host DDR, MemoryX), each split by vocabulary over its stage's `tp` ranks")
    ops: int = summary_field(
        "1", ONCE,
        "number of operators")
    engine: EngineCounts = summary_field(
        "object", RECOMPUTED,
        "`events` (SimPy events scheduled), `simulated_ops`, `replayed_ops`, `records`, `transfers` (distinct "
        "point-to-point transfers of the collectives and sends)")
    ttft_s: float = summary_field(
        "s", RECOMPUTED,
        "a generation's time to its first token: the prefill's step time", optional=True)
    tpot_s: float = summary_field(
        "s", RECOMPUTED,
        "a generation's time per output token: its decode steps' over their count", optional=True)
    total_s: float = summary_field(
        "s", RECOMPUTED,
        "a generation's whole time", optional=True)
    tokens_per_s: float = summary_field(
        "1", RECOMPUTED,
        "a generation's tokens (the prefill's first included) per second", optional=True)
    decode_samples: list[DecodeSample] = summary_field(
        "object", RECOMPUTED,
        "a generation's decode steps simulated: context and step time", optional=True)
    speculative: Speculated = summary_field(
        "object", RECOMPUTED,
        "with `--draft` only: `draft`, `draft_k`, `accept`, `draft_cost`, `tokens_per_step` (E), `draft_step_s`, "
        "`verify_step_s`, `step_s`, `time_per_token_s`, `tokens_per_s_per_sequence`, `tokens_per_s` (see "
        "Speculative decoding); over a generation, the step times are averaged over its tokens", optional=True)
    stall_s: dict[str, float] = summary_field(
        "object", SUMMED,
        "seconds of compute idle time per cause, summed over the chips simulated: the rows of the `compute` "
        "stream (a `branch` stream's waits are not idle compute, the compute stream runs beside them)", scope=SIMULATED)
    capacity_stall_s: dict[str, float] = summary_field(
        "object", SUMMED,
        "per level the compute streams waited for: the part of that wait SRAM capacity caused. Each wait is split "
        "as the traffic it waited for: the operator holding the level (or else the waiting one's own), its capacity"
        " bytes at the level over all it moves there", scope=SIMULATED)
    stall_total_s: float = summary_field(
        "s", SUMMED,
        "sum of `stall_s`. A chip's compute and stall time add up to the step, whatever the weight format: on one"
        " chip `compute_busy_s + stall_total_s = step_time_s`; with `pp` stages (or a wafer's regions) each chip "
        "simulated adds its own step time. With a `branch` stream the sum exceeds that by the branch's compute "
        "time, which ran while the compute stream waited", scope=SIMULATED)
    dominant_stall: str = summary_field(
        "text", RECOMPUTED,
        "the largest stall cause, or `compute` when compute is busy at least half the time")
    energy_j: Energy = summary_field(
        "object", SUMMED,
        "joules spent by all chips: `total` = `dynamic` + `static`; `dynamic` split into `compute` (FLOPs and "
        "unpacking), `levels` (per level: its bytes × 8 × its `energy`, for each of a stage's `tp` ranks: the "
        "bytes are one rank's) and `links` (per link, inter-chip directions summed under the link's name); "
        "`static` = `power.static` × chips × `step_time_s`", scope=SYSTEM)
    avg_power_w: float = summary_field(
        "W", RECOMPUTED,
        "`energy_j.total / step_time_s`, all chips together (the cap holds each chip's windowed power, "
        "`chip_power_w`)", scope=SYSTEM)
    peak_power_w: float = summary_field(
        "W", RECOMPUTED,
        "the highest mean power of all chips over any window of `power_window_s`, static included; each "
        "interval's energy spread evenly over it (a step's compute over its compute and stall rows, a transfer "
        "over its own)", scope=SYSTEM)
    chip_power_w: float = summary_field(
        "W", RECOMPUTED,
        "the highest mean power of any one chip (a wafer's regions together) over any window of `power_window_s`,"
        " static included: what its power cap holds (docs/energy.md)", scope=CHIP)
    power_window_s: float = summary_field(
        "s", RECOMPUTED,
        "the window of the power cap and of `peak_power_w`: `power.window`, or the whole step if it is shorter")
    power_cap_w: float | None = summary_field(
        "W", ONCE,
        "the power cap of one chip (`execution.power_cap`, else `power.tdp`); `null` when there is none", scope=CHIP)
    clock: float = summary_field(
        "1", RECOMPUTED,
        "the fraction of `power.max_clock` the chips ran at: 1, or the highest clock at which `chip_power_w` fits"
        " the cap (a generation: the lowest of its steps')")
    clock_mhz: float | None = summary_field(
        "MHz", RECOMPUTED,
        "`clock` × `power.max_clock` in MHz; `null` when the preset gives no `max_clock`")
    power_limited: bool = summary_field(
        "1", RECOMPUTED,
        "whether the cap lowered the clock (a generation: any step)")
    power_cap_unmet_w: float = summary_field(
        "W", RECOMPUTED,
        "only where no clock the limiter can set holds the cap (what memory, links and static power draw alone "
        "exceed it): how far `chip_power_w` stays above `power_cap_w` at the lowest clock, which the step runs at "
        "(a generation: the most of any step's); the run warns", optional=True)
    energy_per_token_j: float | None = summary_field(
        "J", RECOMPUTED,
        "`energy_j.total` per token: a decode step's batch (one token per sequence; a speculative step's batch × "
        "E), a prefill's batch × prompt tokens, a generation's generated tokens (batch × (generate + 1), as "
        "`tokens_per_s` counts them)", scope=SYSTEM)
    estimates: Estimates = summary_field(
        "object", ONCE,
        "the estimated preset values the result rests on (`used`: their YAML paths; `count`: how many the chip "
        "has) and, with `--sensitivity N`, the N it is most sensitive to (`sensitive`: each `field`, `value`, "
        "`range`, `step_time_s` and `energy_j` at the low and high ends, and the relative swings) with `band_s`, the "
        "least and greatest step time over every estimate used, each alone at the ends of its range (the console "
        "names it when it is wider than 10% of the step); `defaults`: the efficiencies the chip's file left out, "
        "which its family filled in as estimates; added to the whole run, not per step", optional=True)

    def as_dict(self) -> dict[str, Any]:
        """The summary as ``summary.json`` holds it: its keys in the declared order, absent ones left out."""
        return plain(self)

    @property
    def metric_s(self) -> float:
        """The time a run is judged by: a generation's whole time, else the step's."""
        return self.step_time_s if self.total_s is ABSENT else self.total_s


FIELDS = {f.name: f for f in fields(Summary)}
COMBINE: dict[str, str] = {name: f.metadata["combine"] for name, f in FIELDS.items()}


def reference() -> str:
    """The outputs reference of ``summary.json`` (``docs/summary.md``), from the declaration."""
    rows = ["# summary.json", "",
            "Generated from `memsim/report/summary_fields.py` by `python scripts/reference.py --write`; "
            "`tests/report/test_summary_fields.py` keeps it current.", "",
            "How a key combines over the steps of a generation: *summed* over the prefill and every decode step, "
            "taken *once* from the prefill, or *recomputed* from the combined values.", "",
            "Whose figure a key is in a run of several chips (*of*): the step's (blank), *a chip (per stage, "
            "summed)* (the chips simulated: one per pipeline stage, whose tensor-parallel ranks run as its first), "
            "*a rank's share* (one tensor-parallel rank's, its stages together), *a chip*, or *all chips*; the "
            "console tags its lines the same way.", "",
            "| key | unit | combines | in | of | meaning |", "|---|---|---|---|---|---|"]
    for name, f in FIELDS.items():
        m = f.metadata
        rows.append(f"| `{name}` | {m['unit']} | {m['combine']} | "
                    f"{'some runs' if f.default is ABSENT else 'every run'} | {SCOPES[m['scope']]} | {m['help']} |")
    return "\n".join(rows) + "\n"

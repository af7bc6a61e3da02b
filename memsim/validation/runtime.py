"""The rows of ``runtime.csv`` (published micro-measurements of the software runtime) as memsim runs.

A collective row becomes one collective of its message on its platform's preset (its ranks as
tensor-parallel chips), run by the stack its source ran: the library's implementations and the
harness that timed it (``HARNESSES``): a loop that launches calls back to back (the host runs
ahead: a call takes the longer of its kernel and the host's call), one that waits for each
(the host's call and the kernel in series), or a captured graph (the device alone). A loop's
calls are simulated as ``CALLS`` calls back to back and their time divided, so what a call costs
in the steady state of the loop is what is compared (a row that states its loop's calls, as
``-n 50`` or ``over 100 back-to-back calls``, runs that many: the first call's start is in its
average as it was in the source's). A dispatch row becomes ``CALLS`` empty
programs back to back on its chip, traced or launched by the host. Rows that need what memsim
does not model are kept with the reason (``Case.why``).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from memsim.run import api
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta

DATA = Path(__file__).resolve().parent / "data" / "runtime.csv"
STACKS = Path(__file__).resolve().parent / "data" / "stacks"  # the harnesses' stacks
# The calls a loop is simulated for where its row does not say; its first call's host time is the only
# one not in steady state.
CALLS = 16
# How a row states the calls its loop timed: nccl-tests' ``-n 50``, or in words.
STATED_CALLS = (re.compile(r"\s-n (\d+)\b"), re.compile(r"over (\d+) back-to-back calls"))
UNITS = {"us": 1e-6, "ms": 1e-3}
KINDS = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
         "alltoall": "alltoall", "allreduce_rmsnorm_fused": "allreduce"}
# A platform's words -> the preset that models it. A GB200's GPU is a B200's.
PLATFORMS = (("A100", "a100-80gb-sxm"), ("H200", "h200-sxm"), ("GB200", "b200"), ("B200", "b200"),
             ("H100", "h100-sxm"), ("MI300X", "mi300x"), ("Wormhole", "wormhole-n150"))
# The machines memsim has no preset or system for, and what else a row needs that memsim lacks.
UNMODELLED = (("A800 PCIe", "two PCIe islands of four A800s: no preset models a PCIe-only node"),
              ("V100", "no V100 preset"), ("Trainium", "no Trainium preset"), ("Blackhole", "no Blackhole preset"),
              ("4 nodes", "four nodes over EFA: no preset models the network between nodes"),
              ("Galaxy", "a 32-chip Galaxy mesh: no preset models it (issue 43)"))


@dataclass(frozen=True)
class Harness:
    """How a row's source timed its calls: the stack its calls ran on and whether a loop of them
    is what one call's time is taken from."""
    stack: str
    loop: bool = True
    sets: tuple[tuple[str, str], ...] = ()  # more fields of the stack or the chip it ran with


# The harness of a row, by the first name its software and conditions contain (docs/stacks.md says
# what each profile rests on).
HARNESSES = (
    ("nccl-tests", Harness("nccl-tests")),
    ("rccl-tests", Harness("rccl-tests")),
    ("all_reduce_bench", Harness("torch-nccl-blocking")),
    ("PyNCCL allreduce captured in CUDA graph", Harness("nccl-graph")),
    ("MSCCL++ allreduce captured in CUDA graph", Harness("mscclpp-graph")),
    ("torch.distributed (NCCL) allreduce, eager", Harness("torch-nccl-eager")),
    ("torch.distributed all_reduce", Harness("torch-nccl-eager")),
    ("sgl-kernel custom allreduce", Harness("sgl-custom-ar-eager")),
    ("vLLM custom_all_reduce kernel", Harness("vllm-custom-ar-eager")),
    ("vLLM 0.28.0, FlashInfer", Harness("flashinfer-ar-graph", loop=False)),
    ("ttnn CCL", Harness("tt-ccl-traced", sets=(
        # a TT-LoudBox: Wormhole chips in a ring over 100 Gb/s Ethernet links (12.5 GB/s a direction,
        # runtime.csv rows 445-469), one link between neighbours, a hop's latency 0.711 us (row 473); a
        # kernel's duration holds no dispatch of its program
        ("links.ethernet.bandwidth", "12.5 GB/s"), ("links.ethernet.count", "2"), ("system.links_per_peer", "1"),
        ("links.ethernet.latency", "0.711 us"), ("execution.op_overhead", "0 us")))),
)


@dataclass(frozen=True)
class Case:
    """One row, ready to simulate (``hw`` None: not expressed, ``why`` says why)."""
    id: str
    mechanism: str
    label: str
    measured_s: float
    hw: str | None
    why: str
    ranks: int = 1
    kind: str = ""
    nbytes: int = 0
    harness: Harness | None = None
    confidence: str = ""
    calls: int = CALLS  # the calls its loop timed (``STATED_CALLS``)


def size_bytes(text: str) -> int | None:
    """A message's bytes as the row writes them: ``(32768 B)``, ``= 73728 B``, ``8KB``, ``128B``."""
    exact = re.search(r"(\d+)\s*B\)|=\s*(\d+)\s*B\b", text)
    if exact:
        return int(exact.group(1) or exact.group(2))
    given = re.search(r"(\d+(?:\.\d+)?)\s*(KiB|MiB|KB|MB|B)\b", text)
    if given is None:
        return None
    scale = {"B": 1, "KB": 1000, "MB": 1000**2, "KiB": 2**10, "MiB": 2**20}[given.group(2)]
    return int(float(given.group(1)) * scale)


def ranks_of(platform: str) -> int | None:
    """The chips a row ran on: ``8x``, ``x8``, ``TP=6``, ``2x``."""
    found = re.search(r"(\d+)\s*x\b|\bx\s*(\d+)|TP=(\d+)|(\d+) ranks", platform)
    return int(next(g for g in found.groups() if g)) if found else None


def calls_of(row: dict) -> int:
    """The calls a row's loop timed, where its software or conditions state them (else ``CALLS``)."""
    text = f"{row['software']} {row['conditions']}"
    found = next((m for pattern in STATED_CALLS if (m := pattern.search(text))), None)
    return int(found.group(1)) if found else CALLS


def measured_s(row: dict) -> float:
    unit = UNITS.get(row["unit"])
    if unit is None:
        raise ValueError(f"row {row['id']}: unit {row['unit']!r} is not a time")
    return float(row["value"]) * unit


def case(row: dict) -> Case:
    kind = KINDS.get(row["mechanism"])
    label = f"{row['mechanism']} {row['size_or_shape'].split(' (')[0]}"
    base = dict(id=row["id"], mechanism=row["mechanism"], label=label, confidence=row["confidence"])
    if row["unit"] not in UNITS:
        return Case(**base, measured_s=0.0, hw=None, why="a share of a step, not a time: it sets the stacks' host "
                    "work per step (docs/stacks.md), it is not a run")
    value = measured_s(row)
    if "ops per step" in row["notes"] and row["metric"].startswith("sum of op-to-op"):
        return Case(**base, measured_s=value, hw=None, why="the op count its notes give (about 3200 a decode step of "
                    "80 layers) sets the tt-metal profiles' layer_programs (docs/stacks.md); a 32-chip Galaxy mesh: "
                    "no preset models it (issue 43)")
    where = f"{row['platform']} {row['software']}"
    missing = next((why for words, why in UNMODELLED if words in where), None)
    if missing is not None:
        return Case(**base, measured_s=value, hw=None, why=missing)
    if "fitted model" in row["size_or_shape"]:
        return Case(**base, measured_s=value, hw=None, why="the source's own fitted constant, not a measurement: it "
                    "sets the tt-ccl profile's call (docs/stacks.md)")
    if "staging" in row["notes"]:
        return Case(**base, measured_s=value, hw=None, why="its time holds the harness's staging and synchronisation "
                    "(about 13 us by the source's own raw kernel), which the source does not separate")
    if "CUDA-graph use of the benchmark not stated" in row["conditions"]:
        return Case(**base, measured_s=value, hw=None, why="whether its calls ran in a CUDA graph is not stated, and "
                    "its platform is presumed")
    if row["mechanism"] in DISPATCH:
        return _dispatch(row, base, value)
    if "xla" in row["mechanism"]:
        return Case(**base, measured_s=value, hw=None, why="JAX's dispatch and host sync around one psum a call: "
                    "almost all of its 0.6 ms is runtime, not the collective (the source says so)")
    if kind is None:
        return Case(**base, measured_s=value, hw=None, why=_not_a_collective(row))
    hw = next((preset for words, preset in PLATFORMS if words in row["platform"]), None)
    ranks, nbytes = ranks_of(row["platform"]), size_bytes(row["size_or_shape"])
    described = f"{row['software']} {row['metric']} {row['conditions']}"
    harness = next((h for words, h in HARNESSES if words in described), None)
    if hw is None or ranks is None or nbytes is None:
        return Case(**base, measured_s=value, hw=None, why="the platform, its chips or the message are not stated")
    if harness is None:
        return Case(**base, measured_s=value, hw=None, why="its harness is not described well enough to rebuild: "
                    "whether the host waits for each call, and what its call costs")
    return Case(**base, measured_s=value, hw=hw, why="collective", ranks=ranks, kind=kind, nbytes=nbytes,
                harness=harness, calls=calls_of(row))


# An empty program touches no memory: its one-element tensors live in the chip's SRAM, not behind GDDR's latency.
EMPTY = (("levels.sram.holds", "activation"),)
DISPATCH = {"trace_replay": Harness("tt-trace", sets=EMPTY), "host_dispatch": Harness("tt-no-trace", sets=EMPTY)}
# Programs whose dispatch grows with what they carry (kernel groups, runtime arguments on every core, shadow
# kernels): memsim charges a program one ``op_overhead`` of its chip, whatever it carries.
HEAVY = ("rta", "kernel_groups", "shadow")


def _dispatch(row: dict, base: dict, value: float) -> Case:
    """A dispatch row: empty programs back to back on one Wormhole, traced or enqueued by the host."""
    if any(words in row["size_or_shape"] for words in HEAVY):
        return Case(**base, measured_s=value, hw=None, why="a program with many kernel groups or runtime arguments: "
                    "memsim charges every program its chip's one op_overhead, whatever it carries")
    return Case(**base, measured_s=value, hw="wormhole-n150", why="dispatch", ranks=1, kind="program",
                harness=DISPATCH[row["mechanism"]])


def program_graph(calls: int) -> OpGraph:
    """``calls`` empty programs (no work, one tiny tensor each), each after the last."""
    g = OpGraph(meta=StepMeta(benchmark="dispatch"))
    g.add_tensor(Tensor("x0", (1,), "bf16", "activation", 2))
    for i in range(calls):
        g.add_tensor(Tensor(f"x{i + 1}", (1,), "bf16", "activation", 2))
        g.add_op(Op(f"p{i}", "elementwise", 0, "bf16", 0, (Read(f"x{i}", 2),), (f"x{i + 1}",), (("elements", 1),)))
    return g


def _not_a_collective(row: dict) -> str:
    """Why a row that is not a collective's time is not run (the dispatch rows are: ``dispatch.py``)."""
    if row["mechanism"] in ("step_host", "scheduler", "sampler", "detokenize", "api_server", "gpu_execution"):
        return "a part of a serving stack's host work a step: it sets the stacks' step work (docs/stacks.md)"
    if row["mechanism"] == "fabric_hop_latency":
        return "a hop's latency of the fabric: it sets the Wormhole link's latency in the tt-ccl profile's system"
    if row["mechanism"] in ("host_dispatch", "trace_replay"):
        return "dispatch"
    if row["mechanism"] == "op_dispatch_gap":
        return "op-to-op gaps inside a model's traced step, a range or a sum over a model this row does not state"
    if row["mechanism"] == "eager_op":
        return "a one-element op on a CPU tensor: memsim's CPU model charges every operator a parallel region, " \
               "which such an op does not open"
    if row["mechanism"] == "launch":
        return "an old Triton Python launcher (2023) of an unstated machine, low confidence"
    return f"mechanism {row['mechanism']} is not a collective"


def load(path: Path = DATA) -> list[Case]:
    with path.open(newline="") as fh:
        return [case(row) for row in csv.DictReader(fh)]


def collective_graph(kind: str, nbytes: int, ranks: int, calls: int = 1) -> OpGraph:
    """``calls`` collectives of ``nbytes`` over ``ranks`` tensor-parallel chips, each after the last."""
    g = OpGraph(meta=StepMeta(tp=ranks, benchmark="collective"))
    g.add_tensor(Tensor("x0", (1, max(1, nbytes // 2)), "bf16", "activation", nbytes))
    for i in range(calls):
        g.add_tensor(Tensor(f"x{i + 1}", (1, max(1, nbytes // 2)), "bf16", "activation", nbytes))
        g.add_op(Op(f"c{i}", kind, 0, "bf16", 0, (Read(f"x{i}", nbytes),), (f"x{i + 1}",),
                    dims=(("bytes", nbytes), ("ranks", ranks))))
    return g


def simulate_s(c: Case, calls: int | None = None, overrides: dict[str, str] | None = None) -> float:
    """The row's time per call as memsim runs it, over ``calls`` calls (default: its loop's,
    ``Case.calls``) (``overrides``: more fields of the chip or, as ``stack.PATH``, of its
    harness's stack)."""
    if c.hw is None or c.harness is None:
        raise ValueError(f"row {c.id} is not run: {c.why}")
    n = (calls or c.calls) if c.harness.loop else 1
    graph = program_graph(n) if c.kind == "program" else collective_graph(c.kind, c.nbytes, c.ranks, n)
    result = api.simulate_graph(c.hw, graph, set={**dict(c.harness.sets), **(overrides or {})},
                                stack=str(STACKS / f"{c.harness.stack}.yaml"))
    return result.summary.step_time_s / n


# The rows a profile's value was read from (docs/stacks.md says which value each sets): reported beside
# the others, but not as predictions. Every other row that runs is predicted.
SETS = frozenset({
    "500", "503", "505",  # nccl: the LL protocol's call and channel rate (H200, CUDA graph)
    "501",  # torch-nccl-eager: torch.distributed's host work a call
    "420", "421", "422",  # nccl: the Simple protocol's call
    "439", "440", "441", "442", "443", "444",  # rccl: every value, in sample (its one curve)
    *(str(i) for i in range(475, 499)),  # vllm-custom-ar, trtllm-custom-ar and their wrappers, in sample
    "499", "502", "504", "506",  # mscclpp, in sample
    "541", "542",  # wormhole's op_overhead, tt-metal's enqueue a program
    "448", "462",  # tt-ccl: where its all-reduce and reduce-scatter open their second channel
    "520",  # flashinfer-ar-graph: the fused kernel's own call
    "424",  # b200: its NVLink hop's latency (configs/hardware/b200.yaml)
})


@dataclass(frozen=True)
class Outcome:
    case: Case
    simulated_s: float

    @property
    def error(self) -> float:
        return self.simulated_s / self.case.measured_s - 1

    @property
    def role(self) -> str:
        return "sets" if self.case.id in SETS else "predicts"


def outcomes(path: Path = DATA) -> tuple[list[Outcome], list[Case]]:
    """Every row memsim runs, simulated, and every row it does not, with the reason."""
    cases = load(path)
    return [Outcome(c, simulate_s(c)) for c in cases if c.hw is not None], [c for c in cases if c.hw is None]


def markdown(done: list[Outcome], skipped: list[Case]) -> str:
    """docs/validation.md's runtime table: each row run, its error and whether it set a value; the
    medians; and the rows not run, grouped by the reason."""
    lines = ["| id | row | preset, ranks | harness | measured | memsim | error | |", "|---|---|---|---|---|---|---|---|"]
    for o in done:
        c = o.case
        lines.append(f"| {c.id} | {c.label} | `{c.hw}` x{c.ranks} | `{c.harness.stack if c.harness else ''}` | "
                     f"{c.measured_s * 1e6:.3g} us | {o.simulated_s * 1e6:.3g} us | {o.error * 100:+.1f}% | "
                     f"{'sets' if o.role == 'sets' else ''} |")
    lines.append("")
    for name, chosen in (("every row run", done), ("rows predicted (no value read from them)",
                                                   [o for o in done if o.role == "predicts"])):
        errors = sorted(abs(o.error) for o in chosen)
        median = errors[len(errors) // 2] if len(errors) % 2 else sum(errors[len(errors) // 2 - 1:][:2]) / 2
        lines.append(f"- {name}: {len(errors)}, median |error| {median * 100:.1f}%, max {errors[-1] * 100:.1f}%, "
                     f"{sum(e <= 0.25 for e in errors)} within 25%")
    reasons: dict[str, list[str]] = {}
    for c in skipped:
        reasons.setdefault(c.why, []).append(c.id)
    lines += ["", "Rows not run, and why:", ""]
    lines += [f"- {', '.join(ids)}: {why}" for why, ids in sorted(reasons.items(), key=lambda kv: int(kv[1][0]))]
    return "\n".join(lines)

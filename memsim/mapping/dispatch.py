"""What the host adds to a step: kernel launches, and its work before and after the step.

A stack (``memsim.stack``) says how kernels reach the device. With a captured graph the host makes
one call a step and the device replays the graph's nodes, each at the chip's per-kernel cost
(``execution.op_overhead``) and the stack's per-node cost; eager, the host launches every kernel
(its launch call and the framework's own work per operator). A host that runs ahead issues its
launches as fast as it can, so a kernel starts once its launch is issued and the kernel before it
has ended: ``releases`` are when each task's launch is issued, a pure function of the tasks' host
costs in program order. A serial host waits for each kernel before it launches the next, so the
launch is paid in full before the kernel (``OpTask.host_ps``).

Before a step's first launch the host schedules it and prepares its inputs; after the last kernel
it brings the sampled tokens back and hands them out (``StepHostSpec``). What of that overlaps the
device is the stack's ``step.overlap``: none, the output work, or everything (the next step is
prepared while this one runs), and a step then takes the longer of the device's work and the
host's (``HostPlan.busy_ps``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memsim.hardware.spec import ChipSpec
from memsim.stack.spec import StackSpec
from memsim.workload.graph import COLLECTIVE_KINDS, OpGraph
from memsim.workload.meta import StepMeta

# Phases whose step the host schedules and whose tokens it samples: a model's step. A graph imported
# or built for a microbenchmark is one call of its kernels, with no step around it.
STEP_PHASES = ("decode", "prefill")


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    """What one kernel of a step costs to dispatch: on the device (every kernel pays it) and on the
    host (``host_ps``, with eager launches), and whether the host runs ahead."""
    launch: str  # graph | eager
    device_ps: int
    host_ps: int
    ahead: bool


NO_DISPATCH = Dispatch(launch="graph", device_ps=0, host_ps=0, ahead=True)  # a context built by hand


def launch_of(stack: StackSpec, meta: StepMeta) -> str:
    """How the step's kernels reach the device: a decode step's by ``kernels.launch`` (eager past the
    largest batch captured), a prefill's or a mixed step's by ``kernels.prefill_launch``."""
    phase = meta.phase if meta.phase in ("prefill", "mixed") else "decode"
    return stack.kernels.launch_of("decode" if phase == "decode" else "prefill", meta.batch or 1)


def dispatch_of(chip: ChipSpec, stack: StackSpec, meta: StepMeta) -> Dispatch:
    """A step's per-kernel dispatch on ``chip`` under ``stack``."""
    launch = launch_of(stack, meta)
    d = stack.dispatch
    device = chip.execution.op_overhead_ps + (d.node_ps if launch == "graph" else 0)
    host = d.launch_ps + d.op_ps if launch == "eager" else 0
    return Dispatch(launch=launch, device_ps=device, host_ps=host, ahead=d.host == "ahead")


def extra_programs(graph: OpGraph, stack: StackSpec) -> dict[str, int]:
    """The empty programs a stack runs in each decoder layer of a model's step beyond the layer's
    operators (``kernels.layer_programs``), charged to the layer's first operator that is not a
    collective (a collective's dispatch is its library's): its name -> their count. A graph that is
    not a model's step (a benchmark's, an imported one) has no decoder layers to add to."""
    want = stack.kernels.layer_programs
    if not want or graph.meta.phase not in (*STEP_PHASES, "mixed"):
        return {}
    first: dict[int, str] = {}
    ops: dict[int, int] = {}
    for op in graph.order():
        if op.layer >= 0:
            if op.kind not in COLLECTIVE_KINDS:
                first.setdefault(op.layer, op.name)
            ops[op.layer] = ops.get(op.layer, 0) + 1
    return {first[layer]: want - n for layer, n in ops.items() if want > n and layer in first}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPlan:
    """The host's part of a step. ``releases``: per task of the plan (in plan order), when the host
    of its unit has issued its launch, from the step's start (a host that runs ahead; empty for a
    serial one, whose tasks wait their own ``host_ps``). ``before_ps`` is in the releases (and a
    serial host pays it before the first task); ``after_ps`` follows the device's last kernel unless
    the stack overlaps it. ``busy_ps``: the longest any unit's host works in the step."""
    ahead: bool
    overlap: str
    before_ps: int
    after_ps: int
    releases: tuple[int, ...]
    busy_ps: int

    @property
    def empty(self) -> bool:
        return not (self.before_ps or self.after_ps or self.busy_ps)


def step_work(stack: StackSpec, meta: StepMeta) -> tuple[int, int]:
    """The host's work before a step's first launch (with a captured graph, its one call that replays
    it) and after its last kernel (picoseconds), for a model's decode or prefill step; none for any
    other graph."""
    if meta.phase not in STEP_PHASES:
        return 0, 0
    batch = meta.batch or 1
    tokens = batch * (meta.tokens or 1)
    replay = stack.dispatch.graph_ps if launch_of(stack, meta) == "graph" else 0
    return stack.step.before_ps(batch, tokens, meta.tp) + replay, stack.step.after_ps(batch)


def host_plan(units: Sequence[int], hosts: Sequence[int], ahead: bool, stack: StackSpec,
              meta: StepMeta, with_step: bool = True) -> HostPlan | None:
    """The host's plan for tasks on ``units`` (a task's chip or region) with host costs ``hosts``, in
    plan order; None where the host adds nothing. ``with_step``: the host's work before and after
    the step counts (a serving run adds it per step itself)."""
    before, after = step_work(stack, meta) if with_step else (0, 0)
    if not (before or after or any(hosts)):
        return None
    overlap = stack.step.overlap
    start = 0 if overlap == "full" else before  # an overlap scheduler prepared this step during the last
    issued: dict[int, int] = {}
    releases = []
    for unit, h in zip(units, hosts):
        issued[unit] = issued.get(unit, start) + h
        releases.append(issued[unit])
    launches = max(issued.values(), default=start) - start
    return HostPlan(ahead=ahead, overlap=overlap, before_ps=before, after_ps=after,
                    releases=tuple(releases) if ahead else (), busy_ps=before + launches + after)

"""What can change a run's step time (``memsim explain``'s quantities): each memory level's bandwidth,
latency and capacity, each link's bandwidth and latency, the peak FLOP/s of the dtypes its operators
compute in (the vector peak, where vector operators run, and the special-function units' peak, where
attention's exponentials run on them), the launch overhead, the power cap and, on a grid of chips, its
tensor-parallel ranks; and the runtime stack's own (its host's launch costs, its step work, its
collective library's calls). A quantity that provably cannot matter is left out: a level or link the
run moved no byte through (except the scratchpad's capacity, which its tiles fill, and its bandwidth
where the matrix units read their operands from it), a peak no operator runs at, the system's figures
on one chip. Pure functions of the run's chip, spec, summary and the resources it moved bytes through.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memsim.core import units
from memsim.hardware.estimates import set_path
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import feeds_from_sram
from memsim.mapping.roofline import MATRIX_KINDS, op_dtype
from memsim.report.summary_fields import Summary
from memsim.run.runspec import RunSpec
from memsim.stack.spec import StackSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantity:
    """A hardware quantity of a run: its name, how ``--set`` reaches it, its unit and value."""
    name: str  # ``levels[hbm].bandwidth``
    kind: str  # ``bandwidth``, ``latency``, ``capacity``, ``peak``, ``overhead``, ``power``, ``chips``
    unit: str  # a ``units.FORMATTERS`` key (``count`` for the grid)
    value: int  # in base units, as the spec holds it

    @property
    def path(self) -> str:
        """The ``--set`` path (list entries by name: ``levels.hbm.bandwidth``)."""
        return set_path(self.name)

    def scaled(self, factor: float) -> int | None:
        """The value scaled by ``factor``, in whole base units; None where that is no change or no
        value at all (a count below 1)."""
        new = round(self.value * factor)
        if new == self.value or new < (1 if self.kind in ("chips", "capacity") else 0):
            return None
        return new

    def written(self, value: int) -> str:
        return str(units.FORMATTERS[self.unit](value))


def runtime_quantities(stack: StackSpec, summary: Summary) -> list[Quantity]:
    """The runtime stack's quantities the run's step time can depend on (kind ``runtime``): its host's
    launch costs where it launches eagerly (or a collective's, on several chips), the graph's replay
    call where it replays one, its step work on a model's step, and the fixed call and protocol latency
    of each of its collective implementations on several chips."""
    out: list[Quantity] = []
    d, step = stack.dispatch, stack.step
    launch, chips = summary.stack.launch, summary.chips
    eager = launch == "eager" or chips > 1
    pairs = [("dispatch.launch", d.launch_ps, eager), ("dispatch.op", d.op_ps, eager),
             ("dispatch.graph", d.graph_ps, launch == "graph"), ("dispatch.node", d.node_ps, launch == "graph")]
    if summary.workload.phase in ("decode", "prefill", "generate"):
        pairs += [("step.fixed", step.fixed_ps, True), ("step.per_sequence", step.per_sequence_ps, True),
                  ("step.output", step.output_ps, True), ("step.per_rank", step.per_rank_ps, chips > 1)]
    if chips > 1:
        for c in stack.collectives:
            pairs += [(f"collectives[{c.name}].call", c.call_ps, True)]
    return out + [Quantity(name=f"stack.{path}", kind="runtime", unit="time", value=value)
                  for path, value, used in pairs if used and value]


def quantities(chip: ChipSpec, spec: RunSpec, summary: Summary, moved: frozenset[Ref],
               graph_dtypes: tuple[set[str], bool, bool]) -> list[Quantity]:
    """What can change the run's step time (see the module's docstring). ``moved``: the levels
    and links it moved bytes through; ``graph_dtypes``: the dtypes its matrix operators compute in,
    whether vector operators run, and whether attention's exponentials run on special-function units."""
    out: list[Quantity] = []
    matrix, vector, special = graph_dtypes
    for lvl in chip.levels:
        used = Ref.level(lvl.name) in moved
        where = f"levels[{lvl.name}]"
        # The matrix units read their operands from a scratchpad that stages tiles (``lower.feed_ps``).
        if used or (lvl.is_scratchpad and matrix and feeds_from_sram(chip)):
            out.append(Quantity(name=f"{where}.bandwidth", kind="bandwidth", unit="bandwidth",
                                value=lvl.bandwidth_bytes_per_s))
        if used:
            out.append(Quantity(name=f"{where}.latency", kind="latency", unit="time", value=lvl.latency_ps))
        if used or lvl.is_scratchpad:  # a scratchpad's tiles fill it whether or not bytes land there
            out.append(Quantity(name=f"{where}.capacity", kind="capacity", unit="bytes", value=lvl.capacity_bytes))
    for link in chip.links:
        if Ref.link(link.name) in moved:
            out += [Quantity(name=f"links[{link.name}].bandwidth", kind="bandwidth", unit="bandwidth",
                             value=link.bandwidth_bytes_per_s),
                    Quantity(name=f"links[{link.name}].latency", kind="latency", unit="time", value=link.latency_ps)]
    if summary.chips > 1:
        out.append(Quantity(name="system.step_latency", kind="latency", unit="time", value=chip.system.step_latency_ps))
    peaks = dict(chip.compute.peak_flops_per_s)
    out += [Quantity(name=f"compute.peak.{d}", kind="peak", unit="flops", value=peaks[d]) for d in sorted(matrix)
            if d in peaks]
    if vector:
        out.append(Quantity(name="compute.vector_peak", kind="peak", unit="flops", value=chip.compute.vector_flops_per_s))
    if special:
        out.append(Quantity(name="compute.special_peak", kind="peak", unit="flops", value=chip.compute.special_flops_per_s))
    ex = chip.execution
    out.append(Quantity(name="execution.op_overhead", kind="overhead", unit="time", value=ex.op_overhead_ps))
    if chip.power_cap_mw:
        out.append(Quantity(name="execution.power_cap", kind="power", unit="power", value=chip.power_cap_mw))
    if spec.tp > 1 or spec.pp > 1:
        out.append(Quantity(name="tp", kind="chips", unit="count", value=spec.tp))
    return out


def dtypes_of(chip: ChipSpec, graph) -> tuple[set[str], bool, bool]:
    """The dtypes a graph's matrix operators compute in on ``chip``, whether it has vector operators,
    and whether attention's exponentials run on the chip's special-function units (``special_peak``)."""
    matrix = {op_dtype(chip, op, graph) for op in graph if op.kind in MATRIX_KINDS}
    special = bool(chip.compute.special_flops_per_s) and any(op.kind == "attention" for op in graph)
    return matrix, any(op.kind not in MATRIX_KINDS for op in graph), special


def changed(spec: Any, q: Quantity, value: int) -> Any:
    """``spec`` (a ``RunSpec``, or any spec with ``set`` overrides, as a serving run's) with ``q`` at ``value``;
    a quantity the spec already sets is set anew, not given twice."""
    if q.kind == "chips":
        return dataclasses.replace(spec, tp=value, chips=None)
    kept = tuple(kv for kv in spec.set if kv[0] != q.path)
    return dataclasses.replace(spec, set=(*kept, (q.path, q.written(value))))

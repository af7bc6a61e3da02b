"""Tidy tables of a run: the timeline (one row per interval) and per-operator rows, as plain rows
(``memsim.report.rows``: written as CSV without pandas, a DataFrame when one is asked for)."""
from __future__ import annotations

from operator import itemgetter
from typing import Any

from memsim.core.units import PS_PER_S, transfer_ps
from memsim.engine import EngineResult
from memsim.hardware.rates import peak_bandwidth
from memsim.hardware.resource import Ref
from memsim.mapping import Plan
from memsim.mapping.roofline import peak_rate
from memsim.report.columns import TIMELINE_COLUMNS
from memsim.report.energy import FJ_PER_J, per_op
from memsim.report.rows import Rows
from memsim.workload import OpGraph


class _Names(dict):
    """A resource's or a cause's name as the tables write it, worked out the first time it is looked up
    (a lookup after that is the dictionary's own, with no call)."""

    def __missing__(self, key: Any) -> str:
        self[key] = name = str(key) if key is not None else ""
        return name


def timeline(result: EngineResult) -> Rows:
    """One row per interval, in order of start (then resource), columns as ``TIMELINE_COLUMNS``."""
    name = _Names()  # each resource, cause and chip is named once
    chips = {c: f"chip{c}" for c in {r.chip for r in result.records}}
    rows = [(r.start_ps / PS_PER_S, r.end_ps / PS_PER_S, chips[r.chip], r.stream, name[r.resource], r.kind, r.op,
             r.op_kind, r.layer, r.bytes, r.flops, r.src, r.dst, name[r.cause], r.cause.holder if r.cause else "",
             r.count, r.busy_ps / PS_PER_S, r.energy_fj / FJ_PER_J)
            for r in result.records]
    rows.sort(key=itemgetter(0, 4))  # by start, then resource; stable: records that start together keep their order
    return Rows(tuple(TIMELINE_COLUMNS), tuple(rows))


def ops(graph: OpGraph, plan: Plan, result: EngineResult) -> Rows:
    """One row per task of the plan, in the plan's order (docs/columns.md)."""
    chip = plan.chip
    spans = {op: (s, e) for op, s, e in result.spans}
    by_steps: dict[tuple, dict[Ref, tuple[int, int]]] = {}  # tasks of equal steps (every layer's) move alike
    for t in plan.tasks:
        if t.steps not in by_steps:
            by_steps[t.steps] = t.bytes_by_level()
    moves = [by_steps[t.steps] for t in plan.tasks]
    used = {ref for moved in by_steps.values() for ref in moved}
    # a level whose kind is a home for nothing (a scratchpad, an L1) has columns only where it moved bytes
    levels = [Ref.level(lvl.name) for lvl in chip.levels if Ref.level(lvl.name) in used or lvl.kind_of.holds]
    levels += sorted((ref for ref in used if ref.is_link), key=str)
    names = ["op", "op_kind", "layer", "chip", "start_s", "end_s", "duration_s", "flops"]
    for ref in levels:
        names += [f"{ref}_read_bytes", f"{ref}_written_bytes", f"{ref}_compulsory_bytes", f"{ref}_capacity_bytes"]
    names += ["arithmetic_intensity", "roofline_s", "bound", "tile", "dynamic_energy_j", "energy_j"]
    peak: dict[Ref, int] = {}  # each level's or link's peak bandwidth, looked up once
    rows = []
    joules = per_op(plan, result)
    for task, moved in zip(plan.tasks, moves):
        op = graph.ops.get(task.graph_op)  # sends between pipeline stages exist only in the plan
        start, end = spans[task.op]
        traffic = task.traffic()
        off_chip = sum(r + w for r, w in moved.values())
        row: list[Any] = [task.op, task.kind, task.layer, f"chip{task.chip}", start / PS_PER_S, end / PS_PER_S,
                          (end - start) / PS_PER_S, task.flops]
        for ref in levels:
            row += (*moved.get(ref, (0, 0)), *traffic.get(ref, (0, 0)))
        bounds: dict[str | Ref, float] = {
            "compute": task.flops / peak_rate(chip, op, graph) if op is not None and not task.rounds else 0.0}
        for lvl, (r, w) in moved.items():
            if lvl not in peak:
                peak[lvl] = peak_bandwidth(chip, lvl)
            bounds[lvl] = transfer_ps(r + w, peak[lvl]) / PS_PER_S
        # One model for both columns: the op's roofline and the term that sets it (a collective,
        # whose bytes are its links', is bound by its link).
        limit = max(bounds, key=bounds.__getitem__)
        dynamic, static = joules[task.op]
        row += (task.flops / off_chip if off_chip else float("inf"), bounds[limit],
                str(limit) if bounds[limit] > 0 else task.bound_name,
                " ".join(f"{k}={v}" for s in task.steps for k, v in s.tile), dynamic, dynamic + static)
        rows.append(tuple(row))
    return Rows(tuple(names) if rows else (), tuple(rows))


def flatten(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A summary as one row: nested keys joined with dots (a sweep's results.csv, ``Result.summary_frame``)."""
    row: dict[str, Any] = {}
    for k, v in summary.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            row.update(flatten(v, f"{name}."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            row[name] = v
    return row

"""Tidy tables of a run: the timeline (one row per interval) and per-operator rows, as plain rows
(``memsim.report.rows``: written as CSV without pandas, a DataFrame when one is asked for)."""
from __future__ import annotations

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


def timeline(result: EngineResult) -> Rows:
    """One row per interval, in order of start (then resource), columns as ``TIMELINE_COLUMNS``."""
    names: dict = {}  # each resource, cause and chip is named once

    def name(x) -> str:
        n = names.get(x)
        if n is None:
            n = names[x] = str(x) if x is not None else ""
        return n

    chips = {c: f"chip{c}" for c in {r.chip for r in result.records}}
    rows = [(r.start_ps / PS_PER_S, r.end_ps / PS_PER_S, chips[r.chip], r.stream, name(r.resource), r.kind, r.op,
             r.op_kind, r.layer, r.bytes, r.flops, r.src, r.dst, name(r.cause), r.cause.holder if r.cause else "",
             r.count, r.busy_ps / PS_PER_S, r.energy_fj / FJ_PER_J)
            for r in result.records]
    rows.sort(key=lambda row: (row[0], row[4]))  # stable: records that start together keep their order
    return Rows(tuple(TIMELINE_COLUMNS), tuple(rows))


def ops(graph: OpGraph, plan: Plan, result: EngineResult) -> Rows:
    """One row per task of the plan, in the plan's order (docs/columns.md)."""
    chip = plan.chip
    spans = {op: (s, e) for op, s, e in result.spans}
    used = {ref for t in plan.tasks for ref in t.bytes_by_level()}
    # a level whose kind is a home for nothing (a scratchpad, an L1) has columns only where it moved bytes
    levels = [Ref.level(lvl.name) for lvl in chip.levels if Ref.level(lvl.name) in used or lvl.kind_of.holds]
    levels += sorted((ref for ref in used if ref.is_link), key=str)
    columns = [(ref, f"{ref}_read_bytes", f"{ref}_written_bytes", f"{ref}_compulsory_bytes", f"{ref}_capacity_bytes")
               for ref in levels]
    peak: dict[Ref, int] = {}  # each level's or link's peak bandwidth, looked up once
    rows = []
    joules = per_op(plan, result)
    for task in plan.tasks:
        op = graph.ops.get(task.graph_op)  # sends between pipeline stages exist only in the plan
        start, end = spans[task.op]
        moved, traffic = task.bytes_by_level(), task.traffic()
        off_chip = sum(r + w for r, w in moved.values())
        row: dict[str, Any] = {"op": task.op, "op_kind": task.kind, "layer": task.layer, "chip": f"chip{task.chip}",
               "start_s": start / PS_PER_S,
               "end_s": end / PS_PER_S, "duration_s": (end - start) / PS_PER_S, "flops": task.flops}
        for ref, read, written, compulsory, capacity in columns:
            row[read], row[written] = moved.get(ref, (0, 0))
            row[compulsory], row[capacity] = traffic.get(ref, (0, 0))
        row["arithmetic_intensity"] = task.flops / off_chip if off_chip else float("inf")
        bounds: dict[str | Ref, float] = {
            "compute": task.flops / peak_rate(chip, op, graph) if op is not None and not task.rounds else 0.0}
        for lvl, (r, w) in moved.items():
            if lvl not in peak:
                peak[lvl] = peak_bandwidth(chip, lvl)
            bounds[lvl] = transfer_ps(r + w, peak[lvl]) / PS_PER_S
        # One model for both columns: the op's roofline and the term that sets it (a collective,
        # whose bytes are its links', is bound by its link).
        limit = max(bounds, key=bounds.__getitem__)
        row["roofline_s"] = bounds[limit]
        row["bound"] = str(limit) if bounds[limit] > 0 else task.bound_name
        row["tile"] = " ".join(f"{k}={v}" for s in task.steps for k, v in s.tile)
        dynamic, static = joules[task.op]
        row["dynamic_energy_j"] = dynamic
        row["energy_j"] = dynamic + static
        rows.append(row)
    return Rows.of_dicts(rows)


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

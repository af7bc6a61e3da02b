"""Tidy tables of a run: the timeline (one row per interval) and per-operator rows."""
from __future__ import annotations

import pandas as pd

from memsim.engine import EngineResult
from memsim.mapping import Plan
from memsim.mapping.roofline import peak_bandwidth, peak_rate
from memsim.units import PS_PER_S, transfer_ps
from memsim.workload import OpGraph

TIMELINE_COLUMNS = ["start_s", "end_s", "chip", "resource", "kind", "op", "op_kind", "layer", "bytes", "flops",
                    "src", "dst", "cause", "count"]


def timeline(result: EngineResult) -> pd.DataFrame:
    df = pd.DataFrame.from_records(result.records, columns=[
        "start_ps", "end_ps", "chip", "resource", "kind", "op", "op_kind", "layer", "bytes", "flops", "src", "dst",
        "cause", "count"])
    df.insert(0, "start_s", df.pop("start_ps") / PS_PER_S)
    df.insert(1, "end_s", df.pop("end_ps") / PS_PER_S)
    return df.sort_values(["start_s", "resource"], kind="stable").reset_index(drop=True)[TIMELINE_COLUMNS]


def ops(graph: OpGraph, plan: Plan, result: EngineResult) -> pd.DataFrame:
    chip = plan.chip
    spans = {op: (s, e) for op, s, e in result.spans}
    used = {name for t in plan.tasks for name in t.bytes_by_level()}
    levels = [lvl.name for lvl in chip.levels if lvl.name in used or not lvl.is_scratchpad]
    levels += sorted(name for name in used if name.startswith("link:"))
    rows = []
    for task in plan.tasks:
        op = graph.ops.get(task.op)  # sends between pipeline stages exist only in the plan
        start, end = spans[task.op]
        moved = task.bytes_by_level()
        off_chip = sum(r + w for r, w in moved.values())
        row = {"op": task.op, "op_kind": task.kind, "layer": task.layer, "chip": f"chip{task.chip}",
               "start_s": start / PS_PER_S,
               "end_s": end / PS_PER_S, "duration_s": (end - start) / PS_PER_S, "flops": task.flops}
        for lvl in levels:
            row[f"{lvl}_read_bytes"] = moved.get(lvl, (0, 0))[0]
            row[f"{lvl}_written_bytes"] = moved.get(lvl, (0, 0))[1]
        row["arithmetic_intensity"] = task.flops / off_chip if off_chip else float("inf")
        bounds = {"compute": task.flops / peak_rate(chip, op) if op is not None and not task.rounds else 0.0}
        for lvl, (r, w) in moved.items():
            bounds[lvl] = transfer_ps(r + w, peak_bandwidth(chip, lvl)) / PS_PER_S
        row["roofline_s"] = max(bounds.values())
        row["bound"] = task.bound
        row["tile"] = " ".join(f"{k}={v}" for s in task.steps for k, v in s.tile)
        rows.append(row)
    return pd.DataFrame(rows)

"""Perfetto / Chrome trace JSON: one track per resource, plus counter tracks.

Each chip is a process; compute, every memory level and every link is a thread (track) of
complete ("X") events. Counter ("C") tracks show each level's bandwidth in use, the chip's power
(dynamic and static) and the SRAM held by the running operator's tiles. Past ``limit`` intervals the trace is aggregated to one
interval per operator and resource, and its metadata says so.
"""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from typing import Any

from memsim.core.units import PS_PER_S
from memsim.engine import EngineResult
from memsim.hardware.resource import LEVEL
from memsim.mapping import Plan
from memsim.report.energy import profile, static_w

DEFAULT_LIMIT = 200_000
_US = PS_PER_S // 10**6  # picoseconds per microsecond (trace timestamps are in µs)


def _us(ps: int) -> float:
    return ps / _US


def _aggregate(records) -> list:
    """One interval per (chip, resource, op, kind, cause): first start to last end, totals summed."""
    groups: dict[tuple, list] = {}
    for r in records:
        key = (r.chip, r.resource, r.op, r.kind, r.cause)
        g = groups.get(key)
        if g is None:
            groups[key] = [r.start_ps, r.end_ps, r.bytes, r.flops, r.count, r.busy_ps, r]
        else:
            g[0], g[1] = min(g[0], r.start_ps), max(g[1], r.end_ps)
            g[2] += r.bytes
            g[3] += r.flops
            g[4] += r.count
            g[5] += r.busy_ps
    return [dataclasses.replace(g[6], start_ps=g[0], end_ps=g[1], bytes=g[2], flops=g[3], count=g[4], busy_ps=g[5])
            for g in groups.values()]


def _occupancy(plan: Plan, spans: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    """(time, SRAM bytes held by the running op's tile buffers and accumulators)."""
    acc = plan.chip.execution.accumulator_bytes
    out = []
    for task in plan.tasks:
        if task.op not in spans or not task.steps:
            continue
        start, end = spans[task.op]
        held = 0
        for step in task.steps:
            tile = dict(step.tile)
            buffers = step.depth * sum(b for _, b in step.loads)
            held = max(held, min(step.sram_bytes, buffers + tile.get("tm", 0) * tile.get("tn", 0) * acc))
        out += [(start, held), (end, 0)]
    return out


def _power(plan: Plan, records: list, end_ps: int, pids: dict[str, int]) -> list[dict[str, Any]]:
    """A power counter per chip (per unit of a chip cut into regions): its records' dynamic power,
    spread as ``report.energy.profile`` spreads it, plus its share of the static power."""
    by_chip: dict[int, list] = defaultdict(list)
    for r in records:
        by_chip[r.chip].append(r)
    units = [c for c in by_chip if c >= 0] or [0]
    out = []
    for chip, rows in sorted(by_chip.items()):
        static = static_w(plan) / len(units) if chip >= 0 else 0.0
        times, watts = profile(rows, end_ps)
        pid = pids[f"chip{chip}"]
        out += [{"ph": "C", "name": "power", "pid": pid, "ts": _us(int(t)), "args": {"W": round(w + static, 3)}}
                for t, w in zip(times, watts)]
    return out


def perfetto(plan: Plan, result: EngineResult, meta: dict[str, Any], limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    records = list(result.records)
    aggregated = len(records) > limit
    if aggregated:
        records = _aggregate(records)
    pids: dict[str, int] = {}
    tids: dict[tuple[int, str], int] = {}
    events: list[dict[str, Any]] = []

    def track(chip: str, resource: str) -> tuple[int, int]:
        pid = pids.setdefault(chip, len(pids))
        key = (pid, resource)
        if key not in tids:
            tids[key] = 0 if resource == "compute" else len([k for k in tids if k[0] == pid]) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key], "args": {"name": resource}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tids[key],
                           "args": {"sort_index": tids[key]}})
        return pid, tids[key]

    track("chip0", "compute")
    body = []
    rates: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        resource = str(r.resource)
        # Another stream's transfers on the same level get a track of their own (they overlap).
        pid, tid = track(f"chip{r.chip}", resource if r.stream == "compute" else f"{resource} ({r.stream})")
        name = str(r.cause) if r.kind == "stall" else r.op
        args = {"op": r.op, "op_kind": r.op_kind, "layer": r.layer}
        if r.kind == "transfer":
            args.update(bytes=r.bytes, src=r.src, dst=r.dst)
            if r.end_ps > r.start_ps and r.resource.kind is LEVEL:
                rate = r.bytes / ((r.end_ps - r.start_ps) / PS_PER_S) / 1e9
                rates[(pid, resource)] += [(r.start_ps, rate), (r.end_ps, -rate)]
        if r.kind == "compute":
            args["flops"] = r.flops
        if r.count > 1:
            args["count"] = r.count
        if r.cause is not None and r.cause.holder:
            args["holder"] = r.cause.holder
        body.append({"ph": "X", "name": name, "cat": r.kind, "pid": pid, "tid": tid, "ts": _us(r.start_ps),
                     "dur": _us(r.end_ps - r.start_ps), "args": args})
    for (pid, resource), deltas in rates.items():
        level = 0.0
        for ts, delta in sorted(deltas):
            level = max(0.0, level + delta)
            body.append({"ph": "C", "name": f"{resource} bandwidth", "pid": pid, "ts": _us(ts),
                         "args": {"GB/s": round(level, 3)}})
    body += _power(plan, records, result.end_ps, pids)
    spans = {op: (s, e) for op, s, e in result.spans}
    for ts, held in _occupancy(plan, spans):
        body.append({"ph": "C", "name": "sram occupancy", "pid": 0, "ts": _us(ts), "args": {"bytes": held}})
    body.sort(key=lambda e: (e["pid"], e.get("tid", -1), e["ts"]))
    events.extend({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": chip}} for chip, pid in pids.items())
    return {
        "traceEvents": events + body,
        "displayTimeUnit": "ns",
        "metadata": {**meta, "aggregated": aggregated,
                     "note": (f"{len(result.records)} intervals exceeded the limit of {limit}: aggregated to one "
                              "interval per operator and resource" if aggregated else "every interval")},
    }


def perfetto_json(plan: Plan, result: EngineResult, meta: dict[str, Any], limit: int = DEFAULT_LIMIT) -> str:
    return json.dumps(perfetto(plan, result, meta, limit), separators=(",", ":"))

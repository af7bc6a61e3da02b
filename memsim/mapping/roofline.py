"""Roofline bounds: the least time any schedule could take, as pure functions.

A step must execute its FLOPs at no more than peak rate and must move, at each memory
level, at least the bytes of the persistent tensors it reads or writes there plus the
step's external inputs and outputs, at no more than peak bandwidth.
"""
from __future__ import annotations

from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.workload.graph import Op, OpGraph


MATRIX_KINDS = ("matmul", "attention", "compute")


def peak_rate(chip: ChipSpec, op: Op) -> int:
    """The fastest rate the op's FLOPs can run at: matrix units for GEMMs, vector units otherwise."""
    if op.kind in MATRIX_KINDS:
        return chip.compute.peak(op.dtype)
    return chip.compute.vector_flops_per_s


def peak_bandwidth(chip: ChipSpec, where: Ref) -> int:
    """Peak bandwidth of a level (limited by the link it is reached over) or of a link."""
    if where.is_link:
        return chip.link(where.name).bandwidth_bytes_per_s
    lvl = chip.level(where.name)
    bw = lvl.bandwidth_bytes_per_s * (chip.compute.units if lvl.scope == "unit" else 1)
    return min(bw, chip.link(lvl.via).bandwidth_bytes_per_s) if lvl.via else bw


def compute_seconds(graph: OpGraph, chip: ChipSpec) -> float:
    return sum(op.flops / peak_rate(chip, op) for op in graph)


def compulsory_bytes(graph: OpGraph, homes: dict[str, str]) -> dict[str, int]:
    """Bytes per home level that every schedule must move."""
    produced = set(graph.producers())
    consumed = {r.tensor for op in graph for r in op.inputs}
    out: dict[str, int] = {}
    for op in graph:
        for r in op.inputs:
            t = graph.tensors[r.tensor]
            if t.klass != "activation" or r.tensor not in produced:
                out[homes[t.name]] = out.get(homes[t.name], 0) + r.bytes
        for name in op.outputs:
            t = graph.tensors[name]
            if t.klass != "activation" or name not in consumed:
                out[homes[name]] = out.get(homes[name], 0) + t.bytes
    return out


def roofline(graph: OpGraph, chip: ChipSpec, homes: dict[str, str]) -> tuple[float, str, dict[str, int]]:
    """(seconds, what bounds it, compulsory bytes per level)."""
    need = compulsory_bytes(graph, homes)
    best, bound = compute_seconds(graph, chip), "compute"
    for lvl in chip.levels:
        if lvl.name in need:
            t = need[lvl.name] / peak_bandwidth(chip, Ref.level(lvl.name))
            if t > best:
                best, bound = t, lvl.name
    return best, bound, need


def staged_roofline(stage_graphs: list[list[OpGraph]], chip: ChipSpec, homes: dict[str, str],
                    link_bytes: dict[str, tuple[int, int]]) -> tuple[float, str, dict[str, int]]:
    """The least time of a step laid out over pipeline stages (each its own chip, running its
    micro-batches' shares of the step: ``stage_graphs[s]``) and links (``link_bytes``: name ->
    (bytes, bandwidth) of every link direction's compulsory traffic). Every resource works at
    peak at best, and the busiest bounds the step: (seconds, bound, compulsory bytes per level)."""
    best, bound = 0.0, "compute"
    total: dict[str, int] = {}
    for graphs in stage_graphs:
        need: dict[str, int] = {}
        compute = 0.0
        for g in graphs:
            compute += compute_seconds(g, chip)
            for lvl, b in compulsory_bytes(g, homes).items():
                need[lvl] = need.get(lvl, 0) + b
        if compute > best:
            best, bound = compute, "compute"
        for lvl in chip.levels:
            if lvl.name in need:
                total[lvl.name] = total.get(lvl.name, 0) + need[lvl.name]
                t = need[lvl.name] / peak_bandwidth(chip, Ref.level(lvl.name))
                if t > best:
                    best, bound = t, lvl.name
    for name, (nbytes, bandwidth) in link_bytes.items():
        if nbytes / bandwidth > best:
            best, bound = nbytes / bandwidth, name
    return best, bound, total

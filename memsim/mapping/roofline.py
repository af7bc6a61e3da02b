"""Roofline bounds: the least time any schedule could take, as pure functions.

A step must execute its FLOPs at no more than peak rate and must move, at each memory
level, at least the bytes of the persistent tensors it reads or writes there plus the
step's external inputs and outputs, at no more than peak bandwidth.
"""
from __future__ import annotations

from memsim.hardware.rates import Share, peak_bandwidth
from memsim.hardware.resource import Ref, ResourceId
from memsim.hardware.spec import ChipSpec
from memsim.workload.graph import Op, OpGraph

MATRIX_KINDS = ("matmul", "attention", "compute")
COMPUTE, HOPS = "compute", "pipeline hops"
# What bounds a roofline: compute, a level or link of a chip (``Ref``), a direction of a link
# between chips or regions (``ResourceId``), or the hops between pipeline stages; outputs write
# it with ``str``.
Bound = Ref | ResourceId | str


def op_dtype(chip: ChipSpec, op: Op, graph: OpGraph) -> str:
    """The dtype an op's FLOPs run in: a GEMM's weight format where the chip's matrix units take it
    natively (``compute.native``), else the op's own."""
    if op.kind == "matmul" and len(op.inputs) > 1:
        return chip.compute.matmul_dtype(op.dtype, graph.tensors[op.inputs[1].tensor].dtype)
    return op.dtype


def peak_rate(chip: ChipSpec, op: Op, graph: OpGraph) -> int:
    """The fastest rate the op's FLOPs can run at: matrix units for GEMMs, vector units otherwise."""
    if op.kind in MATRIX_KINDS:
        return chip.compute.peak(op_dtype(chip, op, graph))
    return chip.compute.vector_flops_per_s


def compute_seconds(graph: OpGraph, chip: ChipSpec) -> float:
    return sum(op.flops / peak_rate(chip, op, graph) for op in graph)


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


def roofline(graph: OpGraph, chip: ChipSpec, homes: dict[str, str]) -> tuple[float, Bound, dict[str, int]]:
    """(seconds, what bounds it, compulsory bytes per level)."""
    need = compulsory_bytes(graph, homes)
    best = compute_seconds(graph, chip)
    bound: Bound = COMPUTE
    for lvl in chip.levels:
        if lvl.name in need:
            t = need[lvl.name] / peak_bandwidth(chip, Ref.level(lvl.name))
            if t > best:
                best, bound = t, Ref.level(lvl.name)
    return best, bound, need


def staged_roofline(stage_graphs: list[list[OpGraph]], chip: ChipSpec, homes: dict[str, str],
                    link_bytes: dict[Bound, tuple[int, int]], regions: int = 1,
                    hops: dict[int, float] | None = None,
                    collectives: dict[tuple[int, int], float] | None = None,
                    shares: list[Share] | None = None) -> tuple[float, Bound, dict[str, int]]:
    """The least time of a step laid out over pipeline stages (each a chip, or a region of one
    with ``shares[s]`` of its compute and SRAM; default ``1 / regions``) that its micro-batches pass through in order
    (``stage_graphs[s][m]``: micro-batch m's share of stage s), over links (``link_bytes``:
    link or direction -> (bytes, bandwidth) of its compulsory traffic; ``hops[s]``: the
    least time from stage s to the next; ``collectives[(s, m)]``: the least time of the stage's
    collectives for micro-batch m, which run one after another). No resource works faster than its peak, a stage does
    one micro-batch after another, and a micro-batch reaches a stage only after it left the one
    before. Returns (seconds, what bounds it, compulsory bytes per level). A chip's levels other
    than its scratchpad (a wafer's external memory) serve all its regions."""
    hops, collectives = hops or {}, collectives or {}
    share = shares or [Share(1, regions)] * len(stage_graphs)
    link = Ref.link(chip.interconnect.name) if chip.interconnect is not None else None
    best = 0.0
    bound: Bound = COMPUTE
    total: dict[str, int] = {}
    shared: dict[tuple[int, str], int] = {}  # (chip, level) -> bytes of levels its regions share
    busy: dict[tuple[int, Bound], float] = {}  # (stage, resource) -> seconds
    work: list[list[tuple[float, float, Bound]]] = []  # per stage, per micro-batch: (compute, least span, its bound)
    # A micro-batch's span on a stage, from its arrival to its departure, is at least its
    # compute, its collectives and (unless weights are prefetched before it arrives) its bytes.
    prefetched = chip.execution.weight_prefetch > 0
    for s, graphs in enumerate(stage_graphs):
        work.append([])
        for m, g in enumerate(graphs):
            terms: dict[Bound, float] = {COMPUTE: compute_seconds(g, chip) / float(share[s])}
            if link is not None:  # one chip has no collectives
                terms[link] = collectives.get((s, m), 0.0)
            span = dict(terms)
            for home, b in compulsory_bytes(g, homes).items():
                total[home] = total.get(home, 0) + b
                level = chip.level(home)
                if regions > 1 and not level.is_scratchpad:
                    shared[(s // regions, home)] = shared.get((s // regions, home), 0) + b
                    continue
                ref = Ref.level(home)
                terms[ref] = b / (float(share[s]) if level.is_scratchpad else 1.0) / peak_bandwidth(chip, ref)
                if not prefetched or level.is_scratchpad:  # a prefetch copies from the other levels early
                    span[ref] = terms[ref]
            for term, t in terms.items():
                busy[(s, term)] = busy.get((s, term), 0.0) + t
            longest = max(span, key=span.__getitem__)
            work[-1].append((terms[COMPUTE], span[longest], longest))
    for (_, term), t in busy.items():
        if t > best:
            best, bound = t, term
    for (_, home), nbytes in shared.items():
        t = nbytes / peak_bandwidth(chip, Ref.level(home))
        if t > best:
            best, bound = t, Ref.level(home)
    for where, (nbytes, bandwidth) in link_bytes.items():
        if nbytes / bandwidth > best:
            best, bound = nbytes / bandwidth, where
    path, along = _flow_shop(work, hops)
    if path > best:
        best, bound = path, along
    return best, bound, total


def _flow_shop(work: list[list[tuple[float, float, Bound]]], hops: dict[int, float]) -> tuple[float, Bound]:
    """When the last micro-batch can leave the last stage. Per stage and micro-batch, ``work``
    holds (compute, least span, what bounds the span): a stage computes one micro-batch after
    another, and a micro-batch leaves a stage no sooner than its span after it arrived, and
    reaches the next a hop later. Also names what most of the first micro-batch's path is."""
    if len(work) < 2 and all(len(w) < 2 for w in work):
        return 0.0, COMPUTE
    computed = [0.0] * len(work)
    left = 0.0
    for m in range(max(len(w) for w in work)):
        arrived = 0.0
        for s, stage in enumerate(work):
            compute, span, _ = stage[m] if m < len(stage) else (0.0, 0.0, "")
            computed[s] = max(computed[s], arrived) + compute
            left = max(computed[s], arrived + span)
            arrived = left + hops.get(s, 0.0)
    along: dict[Bound, float] = {}
    for s, stage in enumerate(work):
        if stage:
            along[stage[0][2]] = along.get(stage[0][2], 0.0) + stage[0][1]
        along[HOPS] = along.get(HOPS, 0.0) + hops.get(s, 0.0)
    return left, max(along, key=along.__getitem__)

"""Pipeline stages cut by bytes and time: a contiguous partition of a step's blocks.

A step's operators form blocks in order: the ops before the first layer (the embedding), one
block per layer, and the ops after the last layer (final norm, LM head). A pipeline stage is a
run of consecutive blocks, none empty. What a stage must hold is its footprint: the weights and
KV cache its ops read or write (the cache once per micro-batch that keeps one) plus the largest
working set of activations one of its ops reads and writes at once. How long it takes is at
least its roofline on one chip: its FLOPs at peak, or the bytes it must move (weights and KV
cache read, KV cache written: an embedding lookup moves a row per token, not its table) at the
bandwidth of the chip's first level that holds weights.

The cut keeps every stage's footprint within that level (as placed: the levels a class may live
in) and, among such cuts, makes the largest stage time least, then the largest stage's FLOPs
(the time proxy where bytes tie). When no cut fits that level, it makes the largest footprint
least instead (the stages then spill to slower levels, or do not fit: placement says which).
Each least value is found by binary search over the costs of runs of blocks with a greedy check,
exact because a run's costs never fall as it grows; the cut then ends each stage as near as the
bounds allow to an equal share of the time.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.core.errors import ConfigError, run_field
from memsim.hardware.rates import peak_bandwidth
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.roofline import peak_rate
from memsim.workload.graph import Op, OpGraph

PERSISTENT = ("weight", "kv")
FAST, ALL, TIME, FLOPS = range(4)  # a run's costs: footprint in the fast level and in all, least time, FLOPs


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # "pre" (before the first layer), "layer", "post" (after the last)
    ops: tuple[str, ...]
    weight_bytes: int  # the weights its ops read
    kv_bytes: int  # the KV cache its ops read or write, once per micro-batch that keeps one
    working: int  # the most activation bytes one of its ops reads and writes
    flops: int
    compute_s: float  # its FLOPs at peak rate
    moved: int  # bytes it must move: weights and KV cache read, KV cache written


def working_set(graph: OpGraph, ops=None) -> int:
    """The most activation bytes one op reads and writes at once (``ops``: those of the graph)."""
    tensors = graph.tensors
    best = 0
    for op in (graph if ops is None else ops):
        names = {r.tensor for r in op.inputs} | set(op.outputs)
        best = max(best, sum(tensors[n].bytes for n in names if tensors[n].klass == "activation"))
    return best


def _block(kind: str, ops: list[Op], graph: OpGraph, chip: ChipSpec, kv_copies: int) -> Block:
    tensors = graph.tensors
    names: set[str] = set()
    moved = 0
    for op in ops:
        names |= {r.tensor for r in op.inputs} | set(op.outputs)
        moved += sum(r.bytes for r in op.inputs if tensors[r.tensor].klass in PERSISTENT)
        moved += sum(tensors[t].bytes for t in op.outputs if tensors[t].klass == "kv")
    held = lambda klass: sum(tensors[n].bytes for n in names if tensors[n].klass == klass)
    return Block(kind, tuple(op.name for op in ops), held("weight"), held("kv") * kv_copies, working_set(graph, ops),
                 sum(op.flops for op in ops), sum(op.flops / peak_rate(chip, op, graph) for op in ops), moved)


def blocks(order: list[Op], graph: OpGraph, chip: ChipSpec, kv_copies: int = 1) -> list[Block]:
    """The step's blocks in pipeline order: pre-layer ops (one block per shard of a table split
    over stages: ``embed.shard0`` ... and the ops after it), each layer, post-layer ops."""
    groups: dict[tuple[int, int], list[Op]] = {}
    seen_layer, shard = False, 0
    for op in order:
        seen_layer = seen_layer or op.layer >= 0
        shard = op.dim("shard", shard) if op.layer < 0 else shard
        key = (1, op.layer) if op.layer >= 0 else ((2, 0) if seen_layer else (0, shard))
        groups.setdefault(key, []).append(op)
    kinds = {0: "pre", 1: "layer", 2: "post"}
    return [_block(kinds[key[0]], ops, graph, chip, kv_copies) for key, ops in sorted(groups.items())]


def cut(items: list[Block], parts: int, chip: ChipSpec) -> list[int]:
    """The stage (0 .. parts-1) of each block (see the module's docstring)."""
    n = len(items)
    if parts > max(1, n):
        raise ConfigError(f"{parts} pipeline stages for {n} blocks (the layers, and the ops before and after "
                          "them)", field=run_field("pp"))
    if parts <= 1:
        return [0] * n
    fast = next((lvl for lvl in chip.levels if lvl.home_for("weight")), chip.levels[-1])
    bandwidth = peak_bandwidth(chip, Ref.level(fast.name))
    holds = (fast.home_for("weight"), fast.home_for("kv"), fast.home_for("activation"))
    runs = [_runs(items[i:], holds, bandwidth) for i in range(n)]  # runs[i][j - i - 1]: blocks i..j-1
    bounds: dict[int, float] = {FAST: chip.chip_capacity(fast)}
    if _count(runs, bounds) > parts:  # no cut fits that level: the least largest footprint instead
        bounds = {ALL: _least(runs, parts, {}, ALL)}
    else:
        bounds[TIME] = _least(runs, parts, bounds, TIME)
    bounds[FLOPS] = _least(runs, parts, bounds, FLOPS)
    return _spread(runs, parts, bounds)


def _runs(items: list[Block], holds: tuple[bool, bool, bool], bandwidth: int) -> list[tuple[float, ...]]:
    """The costs of every run of ``items`` from the first (``holds``: whether the fast level
    holds weights, KV cache, activations)."""
    out: list[tuple[float, ...]] = []
    weights = kv = working = flops = moved = 0
    compute = 0.0
    for b in items:
        weights, kv, working = weights + b.weight_bytes, kv + b.kv_bytes, max(working, b.working)
        flops, moved, compute = flops + b.flops, moved + b.moved, compute + b.compute_s
        fast = weights * holds[0] + kv * holds[1] + working * holds[2]
        out.append((fast, weights + kv + working, max(compute, moved / bandwidth), flops))
    return out


def _fits(runs, i: int, j: int, bounds: dict[int, float]) -> bool:
    cost = runs[i][j - i - 1]
    return all(cost[k] <= bound for k, bound in bounds.items())


def _count(runs, bounds: dict[int, float], start: int = 0) -> float:
    """The fewest runs within ``bounds`` that cover the blocks from ``start`` (inf: a block alone
    is over them). Taking the longest run that fits each time is optimal."""
    n, i, count = len(runs), start, 0
    while i < n:
        j = i
        while j < n and _fits(runs, i, j + 1, bounds):
            j += 1
        if j == i:
            return float("inf")
        i, count = j, count + 1
    return count


def _least(runs, parts: int, bounds: dict[int, float], key: int) -> float:
    """The least bound on cost ``key`` (with ``bounds`` on the others) that ``parts`` runs can keep."""
    values = sorted({cost[key] for row in runs for cost in row})
    lo, hi = 0, len(values) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _count(runs, {**bounds, key: values[mid]}) <= parts:
            hi = mid
        else:
            lo = mid + 1
    return values[lo]


def _spread(runs, parts: int, bounds: dict[int, float]) -> list[int]:
    """A cut within ``bounds`` whose stages end as near as they can to equal shares of the time
    (a greedy cut would fill the first stages and leave the last ones light)."""
    n = len(runs)
    need = [_count(runs, bounds, j) for j in range(n)] + [0]  # runs needed from block j on
    prefix = [0.0] + [runs[i][0][TIME] for i in range(n)]
    for i in range(n):
        prefix[i + 1] += prefix[i]
    out: list[int] = []
    start = 0
    for k in range(parts):
        left = parts - k - 1  # stages after this one
        # Ends that keep this stage within the bounds and leave the rest coverable, a block a stage at least.
        ends = [e for e in range(start + 1, n - left + 1) if _fits(runs, start, e, bounds) and need[e] <= left]
        target = prefix[n] * (k + 1) / parts
        end = min(ends, key=lambda e: (abs(prefix[e] - target), e))
        out += [k] * (end - start)
        start = end
    return out


def lookup_shards(graph: OpGraph, chip: ChipSpec, pp: int) -> int:
    """The shards the input embedding's table is split into by vocabulary, each on a pipeline stage
    of its own (``StepSpec.embedding_shards``): 1 when the ops before the first layer fit the
    chip's first weight level, or a level reached over a link (host memory) can hold the table,
    or an LM head reads it (tied); else as many as make each shard fit beside the rest of those
    ops, if that leaves the layers a stage."""
    op = graph.ops.get("embed")
    if op is None or pp < 2 or any(lvl.via and lvl.home_for("weight") for lvl in chip.levels):
        return 1
    table = max((r.tensor for r in op.inputs if graph.tensors[r.tensor].klass == "weight"),
                key=lambda t: graph.tensors[t].bytes, default=None)
    if table is None or any(table in {r.tensor for r in o.inputs} for o in graph if o is not op):
        return 1
    fast = next((lvl for lvl in chip.levels if lvl.home_for("weight")), chip.levels[-1])
    holds = (fast.home_for("weight"), fast.home_for("kv"), fast.home_for("activation"))
    pre = blocks(graph.order(), graph, chip)[0]
    held = int(_runs([pre], holds, 1)[0][FAST])  # bytes, a whole number
    room = chip.chip_capacity(fast) - (held - graph.tensors[table].bytes)
    if held <= chip.chip_capacity(fast) or room <= 0:
        return 1
    shards = -(-graph.tensors[table].bytes // room)
    return shards if shards < pp else 1

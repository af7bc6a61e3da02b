"""Mapping strategies, one per accelerator family, registered by the name used in YAML.

A strategy turns an ``OpGraph`` into a ``Plan``: placement, lowering of every op in
dependency order, then the family's own shaping of the steps (launch overheads, fused
layers, staging, regions). Each family lives in one file of ``memsim.mapping.families``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from memsim.core import memo
from memsim.core.errors import ConfigError, run_field
from memsim.core.registry import Registry
from memsim.core.units import PS_PER_S, transfer_ps
from memsim.hardware import rates
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping import collectives, dispatch, overlap, system
from memsim.mapping.dispatch import dispatch_of
from memsim.mapping.layout import Grid, Layout, branches, lay_out, stage_graphs
from memsim.mapping.lower import Context, capacity_bytes, lower, lowering_key
from memsim.mapping.placement import default_holds
from memsim.mapping.plan import BRANCH, COMPUTE, OpTask, Plan, Step
from memsim.mapping.prefetch import Prefetcher
from memsim.mapping.roofline import staged_roofline
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.graph import COLLECTIVE_KINDS, Op, OpGraph

Strategy = Callable[[OpGraph, ChipSpec, Layout, StackSpec], Plan]
STRATEGIES: Registry[Strategy] = Registry("mapping strategy", field="family", package="memsim.mapping.families")
register = STRATEGIES.register

# A family shapes each op's lowered steps and says how many kernels the op launches (0: it runs
# inside a kernel launched before it); each kernel pays the step's dispatch (``mapping.dispatch``).
Shaper = Callable[[Op, tuple[Step, ...], Context], tuple[tuple[Step, ...], int]]


def _busy(chip: ChipSpec, steps: tuple[Step, ...]) -> dict[Ref | None, int]:
    """Picoseconds the steps keep compute (None) and each level or link busy, analytically."""
    busy: dict[Ref | None, int] = {None: sum(s.compute_ps * s.count for s in steps)}
    for s in steps:
        for where, b in s.total_loads + s.total_stores:
            busy[where] = busy.get(where, 0) + transfer_ps(b, rates.shared(rates.effective_bandwidth(chip, where), s.share))
    return busy


def _bound(chip: ChipSpec, steps: tuple[Step, ...]) -> Ref | None:
    """What limits the steps analytically: the busiest level or link, or None for compute."""
    busy = _busy(chip, steps)
    return max(busy, key=busy.__getitem__)


def plan_with(graph: OpGraph, chip: ChipSpec, shape: Shaper, layout: Layout = Layout(), stack: StackSpec = IDEAL,
              attention: str | None = None, compute_share: rates.Share = rates.WHOLE, grid: bool = False) -> Plan:
    """Place each pipeline stage, lower every op of every micro-batch in dependency order, and
    let the family shape its steps.

    Collectives become rounds of link transfers within their tensor-parallel group; with
    pipeline stages, the activation crossing a stage boundary is sent rank to rank.
    """
    tp = layout.tp
    laid = lay_out(graph, chip, layout)
    layout, stage_of, homes = laid.layout, laid.stage_of, laid.homes
    pp, regions = layout.pp, layout.regions
    micro = layout.graphs(graph)
    tasks: list[OpTask] = []
    prefetcher = Prefetcher()
    # and lowering key -> steps, "bounds": shaped steps -> bound
    cache: dict = {"branches": memo.derived("branches", graph, branches), "programs": dispatch.extra_programs(graph, stack)}
    launch = dispatch_of(chip, stack, graph.meta)
    for m, g in enumerate(micro):
        # Each stage's ops run with its share of its chip and its staging area.
        contexts = [Context(chip, g, homes, attention=attention or stack.kernels.attention,
                            compute_share=rates.share_of(compute_share * share), microbatch=m, staging_bytes=staging, grid=grid,
                            stage=s, room_bytes=room, stack=stack, dispatch=launch)
                    for s, (share, staging, room) in
                    enumerate(zip(laid.shares, laid.staging, laid.rooms or (-1,) * len(laid.shares)))]
        tasks += _micro_tasks(contexts, shape, stage_of, tp, f"#{m}" if len(micro) > 1 else "", prefetcher, cache,
                              (tp * pp, regions))
    split = [stage_graphs(g, stage_of, pp * regions) for g in micro]
    per_stage = [[parts[s] for parts in split] for s in range(pp * regions)]
    routes = system.Routes(chip, tp * pp, regions, tp)
    links = system.link_bytes(tasks, routes)
    hops = system.hop_seconds(tasks, routes)
    comms = system.collective_seconds(tasks, routes)
    shares = [rates.share_of(compute_share * share) for share in laid.shares]
    seconds, bound, need = staged_roofline(per_stage, chip, homes, links, regions, hops, comms, shares)
    return Plan(chip=chip, tasks=tuple(tasks), homes=tuple(sorted(homes.items())), roofline_s=seconds,
                roofline_bound=bound, compulsory_bytes=tuple(sorted(need.items())), chips=tp * pp, tp=tp,
                regions=regions, staging=laid.staging, shares=tuple(shares), routes=routes)


def _micro_tasks(contexts: list[Context], shape: Shaper, stage_of: dict[str, int], tp: int, suffix: str,
                 prefetcher: Prefetcher, cache: dict, system_size: tuple[int, int]) -> list[OpTask]:
    """The tasks of one micro-batch (``contexts``: its context on each stage): its ops on their
    stages' chips, the sends between stages and the prefetches of weights. With communication
    overlap, a GEMM whose output an all-reduce sums and that all-reduce are cut into chunks
    (``memsim.mapping.overlap``). ``system_size``: the system's chips and the regions of each."""
    chips, regions = system_size
    graph, chip, m = contexts[0].graph, contexts[0].chip, contexts[0].microbatch
    bounds = cache.setdefault("bounds", {})  # shaped steps -> what bounds them
    deps = memo.derived("dependencies", graph, OpGraph.graph)  # read only: shared by the reruns of a run
    order = memo.derived("order", graph, OpGraph.order)
    into: dict[int, str] = {}  # stage -> the send that brings the activation into it
    parts: dict[str, list[str]] = {}  # a GEMM cut into parts -> their task names
    done: dict[str, str] = {}  # an op cut into parts -> the task whose end means it is done
    tasks = []
    for n, op in enumerate(order):
        stage = stage_of[op.name]
        if n and stage != stage_of[order[n - 1].name]:
            prev = stage_of[order[n - 1].name]
            last = order[n - 1].name
            send = system.send_task(order[n - 1], graph, chip, prev, stage, tp, done.get(last, last + suffix), suffix,
                                    chips if regions == 1 else 0)
            tasks.append(send)
            into[stage] = send.op
        # A predecessor on another stage arrives through the send into this one.
        preds = tuple(dict.fromkeys(done.get(p, p + suffix) if stage_of[p] == stage else into[stage]
                                    for p in sorted(deps.predecessors(op.name))))
        if op.kind in COLLECTIVE_KINDS:
            cut = next((p for p in sorted(deps.predecessors(op.name)) if p in parts and stage_of[p] == stage), None)
            names = [op.name + suffix] if cut is None else [f"{op.name}/{i}{suffix}" for i in range(len(parts[cut]))]
            chunk_deps = [preds] if cut is None else \
                [(*tuple(d for d in preds if d != done[cut]), part) for part in parts[cut]]
            chunks = system.collective_tasks(op, contexts[stage], stage, tp, chunk_deps, names, chips, regions)
            tasks += [dataclasses.replace(t, microbatch=m) for t in chunks]
            done[op.name] = names[-1]
            continue
        prefetch, op_cx = prefetcher.stage(op, contexts[stage], stage * tp, op.name + suffix)
        if prefetch is not None:
            tasks.append(prefetch)
            preds += (prefetch.op,)
        key = lowering_key(op, op_cx)
        lowered = cache.get(key)
        if lowered is None:
            lowered = cache[key] = lower(op, op_cx)
            cache[("capacity", key)] = capacity_bytes(op, op_cx, lowered)
        capacity = cache[("capacity", key)]
        steps, kernels = shape(op, lowered, op_cx)
        if op_cx.compute_share < 1:  # a region: its share of each level's channels, whatever the family
            steps = tuple(s if s.share <= op_cx.compute_share else dataclasses.replace(s, share=op_cx.compute_share)
                          for s in steps)
        # Equal steps, one object: every later cache and the engine's memos then match them by identity.
        steps = cache.setdefault(("steps", steps), steps)
        if steps not in bounds:  # a compute-bound op's bound is None: cached as such, not looked up again
            bounds[steps] = _bound(chip, steps)
        bound = bounds[steps]
        releases = prefetch.acquires if prefetch is not None else 0
        stream = BRANCH if op.name in cache["branches"] else COMPUTE
        k = _overlap_chunks(op, graph, deps, chip, tp, steps, chips)
        names, pieces, flops, extra = [op.name + suffix], [steps], [op.flops], [capacity]
        if k > 1:
            # One kernel whose output tiles are signalled in k groups: launched once, and the last
            # group gives back the staged weights.
            names = parts[op.name] = [f"{op.name}/{i}{suffix}" for i in range(k)]
            pieces, flops = overlap.split_steps(steps, k), overlap.split(op.flops, k)
            extra = [tuple((where, overlap.split(b, k)[i]) for where, b in capacity) for i in range(k)]
            done[op.name] = names[-1]
            prefetcher.finished_by(stage * tp, op.name + suffix, names[-1])
        programs = kernels + cache["programs"].get(op.name, 0)  # and a layer's empty programs, on its first op
        for i, (name, part, part_flops, part_extra) in enumerate(zip(names, pieces, flops, extra)):
            first = i == 0
            tasks.append(OpTask(op=name, kind=op.kind, layer=op.layer, flops=part_flops,
                                overhead_ps=programs * op_cx.dispatch.device_ps if first else 0,
                                host_ps=programs * op_cx.dispatch.host_ps if first else 0, steps=part, deps=preds, bound=bound,
                                chip=stage * tp, graph_op=op.name, microbatch=m, stream=stream,
                                releases=releases if i == k - 1 else 0, capacity=part_extra))
    return tasks


def _overlap_chunks(op: Op, graph: OpGraph, deps, chip: ChipSpec, tp: int, steps: tuple[Step, ...], chips: int) -> int:
    """The parts a GEMM is cut into: as many as the all-reduce that sums its output is (1: none)."""
    if op.kind != "matmul" or chip.execution.comm_overlap < 2 or tp < 2:
        return 1
    sums = [graph.ops[s] for s in deps.successors(op.name) if graph.ops[s].kind == "allreduce"]
    if not sums:
        return 1
    return system.overlap_chunks(sums[0], chip, tp, max(_busy(chip, steps).values()) / PS_PER_S, chips)


def make_plan(graph: OpGraph, chip: ChipSpec, grid: Grid | None = None,
              microbatches: tuple[OpGraph, ...] = (), stack: StackSpec = IDEAL, step_work: bool = True) -> Plan:
    """The plan of a step on ``grid`` (default: one stage of the ranks its graph is one of), run by
    ``stack``. ``graph`` is what each stage places; with micro-batches, each of ``microbatches``
    (graphs with ``graph``'s ops) flows through the stages. ``step_work``: the host's work before
    and after the step is the plan's (a serving run adds it per step itself)."""
    grid = grid if grid is not None else Grid.of(graph)
    strategy = STRATEGIES.get(chip.family_of.strategy)
    if grid.pp < 1:
        raise ConfigError("must be at least 1", field=run_field("pp"))
    if grid.tp != graph.meta.tp:
        raise ConfigError(f"the step's graph is one rank of {graph.meta.tp}, not of {grid.tp}", field=run_field("tp"))
    collectives.check_algorithm(chip.system.collective)
    layout = Layout(pp=grid.pp, tp=grid.tp, microbatches=tuple(microbatches),
                    kv_copies=len(microbatches) if len(microbatches) > 1 and
                    len({g.meta.context for g in microbatches}) == 1 else 1)
    placed = default_holds(graph, chip, layout.kv_copies)
    # The mapping reads the stack's kernels, dispatch and collectives, never its work per step, which
    # the host plan below adds: reruns that change only that share one mapping (``memo``). The key
    # holds the graphs it names by id.
    key = ("plan", id(graph), tuple(map(id, microbatches)), layout.pp, layout.tp, layout.kv_copies, placed,
           stack.kernels, stack.dispatch, stack.collectives)
    plan = memo.remembered(key, lambda: (graph, microbatches, strategy(graph, placed, layout, stack)))[2]
    host = dispatch.host_plan([t.chip for t in plan.tasks], [t.host_ps for t in plan.tasks],
                              stack.dispatch.host == "ahead", stack, graph.meta, step_work)
    return dataclasses.replace(plan, stack=stack, host=host)

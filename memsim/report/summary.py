"""The run summary: a pure function of the plan, the graph and the engine's records."""
from __future__ import annotations

from memsim.core.units import PS_PER_S
from memsim.engine import EngineResult
from memsim.engine.records import WAIT, Usage
from memsim.hardware.resource import LEVEL, LINK, SYSTEM, Ref, link_label
from memsim.mapping import Plan
from memsim.mapping.dispatch import launch_of
from memsim.mapping.plan import COMPUTE as COMPUTE_STREAM
from memsim.mapping.roofline import op_dtype
from memsim.report import energy, spill
from memsim.report.summary_fields import Summary
from memsim.report.summary_records import ABSENT, EngineCounts, Grid, StackUsed, Traffic, Workload
from memsim.workload import OpGraph


def stall_seconds(result: EngineResult) -> dict[str, float]:
    """The compute stream's idle time per cause. A ``branch`` stream's waits are not idle
    compute: the compute stream computes or waits beside them."""
    out: dict[str, int] = {}
    for r in result.records:
        if r.kind == "stall" and r.stream == COMPUTE_STREAM:
            cause = str(r.cause)
            out[cause] = out.get(cause, 0) + (r.end_ps - r.start_ps)
    return {k: v / PS_PER_S for k, v in sorted(out.items())}


def capacity_by_level(plan: Plan) -> dict[str, int]:
    """Per level, by name: the bytes of the step's traffic that SRAM capacity added (re-fetches
    of operands its tiles could not hold; ``OpTask.traffic``), over the chips simulated."""
    out: dict[str, int] = {}
    for task in plan.tasks:
        for where, (_, extra) in task.traffic().items():
            if extra and not where.is_link:
                out[where.name] = out.get(where.name, 0) + extra
    return out


def level_stalls(plan: Plan, result: EngineResult) -> tuple[dict[str, int], dict[str, float]]:
    """Per level, by name, over the chips simulated: picoseconds the compute streams waited for it,
    and the part of each wait that SRAM capacity caused. A wait is split as the traffic it waited
    for splits: that of the operator holding the level if another held it, else the waiting
    operator's own (its capacity bytes at the level over all it moves there)."""
    tasks = {task.op: task for task in plan.tasks}
    traffic: dict[str, dict] = {}  # an operator's ``OpTask.traffic``, worked out once it waits or is waited on
    waits: dict[str, int] = {}
    capacity: dict[str, float] = {}
    for r in result.records:
        if r.kind != "stall" or r.stream != COMPUTE_STREAM or r.cause is None or r.cause.kind is not WAIT \
                or r.cause.on is None or r.cause.on.kind is not LEVEL:
            continue
        name, ps = r.cause.on.name, r.end_ps - r.start_ps
        waits[name] = waits.get(name, 0) + ps
        op = r.cause.holder or r.op
        if op not in traffic:
            traffic[op] = tasks[op].traffic() if op in tasks else {}
        compulsory, extra = traffic[op].get(Ref.level(name), (0, 0))
        if extra:
            capacity[name] = capacity.get(name, 0.0) + ps * extra / (compulsory + extra)
    return waits, capacity


def owner(plan: Plan, usage: Usage) -> str:
    """Whose a level or link is, as written in ``per_chip``: ``system`` for a link between chips,
    else its chip, and its region on a layer-pipelined chip where it is the region's own."""
    unit = usage.resource.chip
    if unit == SYSTEM:
        return "system"
    chip = f"chip{plan.chip_of(unit)}"
    return chip if plan.regions == 1 or usage.shared else f"{chip}.region{unit // plan.tp % plan.regions}"


def per_chip(plan: Plan, result: EngineResult) -> dict[str, dict[str, Traffic]]:
    """Every level and link of every chip simulated (a stage's other tensor-parallel ranks run
    as its first), and every link direction between chips: bytes read, written, and the time it
    was held. They add up to ``bytes_per_level`` and ``bytes_per_link``."""
    out: dict[str, dict[str, Traffic]] = {}
    for u in sorted(result.usage, key=lambda u: (u.resource.chip, u.resource.kind.value, u.resource.name)):
        out.setdefault(owner(plan, u), {})[str(u.resource)] = Traffic(
            read=u.read, written=u.written, total=u.read + u.written, busy_s=u.busy_ps / PS_PER_S)
    return out


def utilization(per: dict[str, dict[str, Traffic]], step_s: float) -> dict[str, dict[str, float]]:
    """Each resource of ``per_chip``: the share of the step it was held."""
    return {who: {name: (v.busy_s / step_s if step_s else 0.0) for name, v in resources.items()}
            for who, resources in per.items()}


def exposed_comm_seconds(plan: Plan, result: EngineResult) -> float:
    """The compute stream's waits for the interconnect between chips (its stalls on it)."""
    link = plan.chip.interconnect
    if link is None or plan.chips <= 1:
        return 0.0
    on = Ref.link(link.name)
    return sum(r.end_ps - r.start_ps for r in result.records if r.kind == "stall" and r.stream == COMPUTE_STREAM
               and r.cause is not None and r.cause.on == on.on(r.chip)) / PS_PER_S


def compute_busy_seconds(result: EngineResult) -> float:
    """Time the compute units computed (``dequant`` intervals, beside them, are not compute)."""
    return sum(r.end_ps - r.start_ps for r in result.records if r.kind == "compute") / PS_PER_S


def _read(graph: OpGraph, klass: str) -> int:
    return sum(r.bytes for op in graph for r in op.inputs if graph.tensors[r.tensor].klass == klass)


def _workload(graphs: tuple[OpGraph, ...]) -> Workload:
    """The step's description; with micro-batches, the whole step's batch and tokens."""
    meta = graphs[0].meta
    if len(graphs) == 1:
        return Workload.of(meta)
    if all(g.meta.context == meta.context for g in graphs):
        return Workload.of(meta, microbatches=len(graphs), batch=sum(g.meta.batch or 0 for g in graphs))
    # a prefill in chunks of its prompt
    return Workload.of(meta, microbatches=len(graphs), tokens=sum(g.meta.tokens or 0 for g in graphs))


def summarize(graph: OpGraph, plan: Plan, result: EngineResult, micro: tuple[OpGraph, ...] = ()) -> Summary:
    """``graph`` is the step as placed; with micro-batches, ``micro`` are the graphs that ran."""
    chip = plan.chip
    step_s = result.end_ps / PS_PER_S
    graphs = micro or (graph,)
    flops = sum(g.total_flops() for g in graphs)
    read, written = dict(result.bytes_read), dict(result.bytes_written)
    busy_ps = dict(result.busy_ps)
    capacity, (waits, refetched) = capacity_by_level(plan), level_stalls(plan, result)
    per_level, capacity_stalls = {}, {}
    for lvl in chip.levels:
        n = str(Ref.level(lvl.name))
        total = read.get(n, 0) + written.get(n, 0)
        extra = min(capacity.get(lvl.name, 0), total)
        per_level[lvl.name] = Traffic(read=read.get(n, 0), written=written.get(n, 0), total=total,
                                      compulsory=total - extra, capacity=extra, busy_s=busy_ps.get(n, 0) / PS_PER_S)
        if waits.get(lvl.name):
            capacity_stalls[lvl.name] = refetched.get(lvl.name, 0.0) / PS_PER_S
    chips = per_chip(plan, result)
    links: dict[str, list[int]] = {}  # per link, and per direction of each link between chips
    for u in result.usage:
        if u.resource.kind is LINK:
            e = links.setdefault(link_label(u.resource.name, u.resource.direction), [0, 0, 0])
            e[0], e[1], e[2] = e[0] + u.read, e[1] + u.written, e[2] + u.busy_ps
    per_link = {name: Traffic(read=r, written=w, total=r + w, busy_s=b / PS_PER_S) for name, (r, w, b) in links.items()}
    stalls = stall_seconds(result)
    busy = compute_busy_seconds(result)
    dtypes = {op_dtype(chip, op, graph) for op in graph}
    peak: float = max(chip.compute.peak(d) for d in dtypes) if dtypes else max(v for _, v in chip.compute.peak_flops_per_s)
    peak /= plan.clock  # utilisation of the chip's peak at full clock, whatever clock the cap left it
    dominant = max(stalls, key=stalls.__getitem__) if stalls else "compute"
    weights_needed = sum(_read(g, "weight") for g in graphs)
    kv_read = sum(_read(g, "kv") for g in graphs)
    kv_written = sum(g.tensors[t].bytes for g in graphs for op in g for t in op.outputs if g.tensors[t].klass == "kv")
    workload = _workload(graphs)
    joules = energy.breakdown(plan, result)
    return Summary(
        hardware=chip.name,
        derived_from=chip.derived_from or ABSENT,
        family=chip.family,
        stack=StackUsed(name=plan.stack.name, description=plan.stack.description,
                        launch=launch_of(plan.stack, graph.meta), default=False),
        workload=workload,
        step_time_s=step_s,
        roofline_s=plan.roofline_s,
        roofline_bound=str(plan.roofline_bound),
        step_over_roofline=step_s / plan.roofline_s if plan.roofline_s else None,
        flops_total=flops,
        compute_utilization=flops / (step_s * peak) if step_s else 0.0,
        compute_busy_s=busy,
        bytes_per_level=per_level,
        bytes_per_link=per_link,
        per_chip=chips,
        utilization=utilization(chips, step_s),
        compulsory_bytes=dict(plan.compulsory_bytes),
        weight_bytes=weights_needed,
        weight_bytes_stored=graph.bytes_of("weight"),
        kv_cache_bytes=kv_read,
        kv_cache_bytes_written=kv_written,
        stall_s=stalls,
        capacity_stall_s=capacity_stalls,
        stall_total_s=sum(stalls.values()),
        exposed_comm_s=exposed_comm_seconds(plan, result),
        chips=plan.chips,
        grid=Grid(tp=plan.tp, pp=plan.chips // plan.tp),
        embedding_placement=table_placement(graph, plan),
        placement=spill.bytes_by_level(graph, plan),
        dominant_stall=dominant if busy < step_s / 2 else "compute",
        ops=len(plan.tasks),
        engine=EngineCounts(events=result.events, simulated_ops=result.simulated_tasks,
                            replayed_ops=result.replayed_tasks, records=len(result.records), transfers=transfers(plan)),
        energy_j=joules,
        **energy.power_keys(plan, result, joules, tokens(workload)),
    )


def transfers(plan: Plan) -> int:
    """The point-to-point transfers of the plan's collectives and sends that the mapping and the
    engine work out: each distinct round once, however many tasks or rounds repeat it."""
    distinct = {id(r): len(r) for t in plan.tasks for r in t.rounds}
    return sum(distinct.values())


def table_placement(graph: OpGraph, plan: Plan) -> dict[str, str]:
    """Where the embedding table and the LM head live: ``host`` (a level reached over a link,
    host DDR or MemoryX), ``own stage`` (pipeline stages that run no layer) or ``with layers``
    (a stage, or a region of a chip, that runs layers too). Each is split by vocabulary over its
    stage's tensor-parallel ranks."""
    homes = dict(plan.homes)
    layered = {t.chip for t in plan.tasks if t.layer >= 0}
    out: dict[str, str] = {}
    for role, names in (("embedding", [n for n in graph.ops if n == "embed" or n.startswith("embed.shard")]),
                        ("lm_head", ["lm_head"] if "lm_head" in graph.ops else [])):
        # The largest weight each op reads: its table (or its shard of it).
        tables = [max((r.tensor for r in graph.ops[n].inputs if graph.tensors[r.tensor].klass == "weight"),
                      key=lambda t: graph.tensors[t].bytes, default="") for n in names]
        if not tables or "" in tables:  # an op that reads no weight (tensor names are never empty)
            continue
        units = {t.chip for t in plan.tasks if t.graph_op in names}
        if any(plan.chip.level(homes[t]).via for t in tables):
            out[role] = "host"
        else:
            out[role] = "with layers" if units & layered else "own stage"
        if len(names) > 1:
            out[role] += f" (split over {len(names)} stages)"
    return out


def tokens(workload: Workload) -> int:
    """Tokens a step produces (a decode: one per sequence) or takes in (a prefill: its prompts); 0: unknown."""
    return (workload.batch or 0) * (workload.tokens or 0)

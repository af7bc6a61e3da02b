"""The scheduler: runs a Plan's tasks on a chip in stream order, respecting dependencies.

One task runs at a time (a GPU stream: a kernel starts when the previous one has finished,
stores included; pipeline stages hand over one to the next). A stage's tensor-parallel ranks
run identical shards, so the stage's first chip is simulated and collectives run over every
link of the system. A task therefore starts with every resource idle, so two
tasks with equal signatures take identical intervals: the first is simulated and later
ones replay its records shifted in time (identical layers cost one simulation).
"""
from __future__ import annotations

from dataclasses import dataclass

import simpy

from memsim.engine.pipeline import run_step
from memsim.engine.recorder import Interval, Recorder
from memsim.engine.resources import ChipResources
from memsim.engine.system import SystemLinks, run_collective
from memsim.mapping.plan import OpTask, Plan


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts scheduled events."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def schedule(self, event, priority=1, delay=0):  # noqa: D102
        self.events += 1
        super().schedule(event, priority, delay)


@dataclass(frozen=True, slots=True)
class EngineResult:
    records: tuple[Interval, ...]
    spans: tuple[tuple[str, int, int], ...]
    end_ps: int
    events: int
    simulated_tasks: int
    replayed_tasks: int
    approximate_steps: int  # steps fast-forwarded by repeating a window, not an exact cycle
    bytes_read: tuple[tuple[str, int], ...]
    bytes_written: tuple[tuple[str, int], ...]
    busy_ps: tuple[tuple[str, int], ...] = ()  # per port: time its busiest channel was occupied


def run(plan: Plan, *, fast_forward: bool = True, memoize: bool = True) -> EngineResult:
    env = CountingEnvironment()
    chips = {c: ChipResources(plan.chip) for c in sorted({t.chip for t in plan.tasks} | {0})}
    links = SystemLinks(plan.chip, plan.chips) if plan.chips > 1 else None
    # Every port, keyed for byte accounting: chip levels by (chip, name), system links by name.
    ports = {(c, name): p for c, r in chips.items() for name, p in r.levels.items()}
    if links is not None:
        ports.update({(-1, p.name): p for p in links.ports.values()})
    rec = Recorder()
    done = {t.op: env.event() for t in plan.tasks}
    cache: dict[tuple, tuple[int, list[Interval], dict]] = {}
    stats = {"simulated": 0, "replayed": 0, "approximate": 0}

    def idle_at(now: int) -> bool:
        return all(r.idle_at(now) for r in chips.values()) and (links is None or links.idle_at(now))

    def run_task(task: OpTask, chip: str):
        start = env.now
        res = chips[task.chip]
        if memoize and task.signature in cache and idle_at(start):
            duration, rel, moved = cache[task.signature]
            for r in rel:
                rec.records.append(r._replace(start_ps=r.start_ps + start, end_ps=r.end_ps + start, op=task.op,
                                              layer=task.layer))
            for key, (rd, wr) in moved.items():
                ports[key].bytes_read += rd
                ports[key].bytes_written += wr
            stats["replayed"] += 1
            yield env.timeout(duration)
            return
        first = len(rec.records)
        before = {k: (v.bytes_read, v.bytes_written) for k, v in ports.items()}
        idle = idle_at(start)
        if task.overhead_ps:
            yield env.timeout(task.overhead_ps)
            rec.add(start, env.now, chip, "compute", "stall", task.op, task.kind, task.layer, 0, 0, "", "",
                    "overhead", 1)
        if task.rounds:
            yield from run_collective(env, links, rec, task, chip)
        for step in task.steps:
            stats["approximate"] += yield from run_step(env, res, rec, chip, task, step, fast_forward)
        stats["simulated"] += 1
        if memoize and idle and idle_at(env.now):
            rel = [r._replace(start_ps=r.start_ps - start, end_ps=r.end_ps - start) for r in rec.records[first:]]
            moved = {k: (v.bytes_read - before[k][0], v.bytes_written - before[k][1]) for k, v in ports.items()}
            cache[task.signature] = (env.now - start, rel, {k: m for k, m in moved.items() if m != (0, 0)})

    def stream():
        for task in plan.tasks:
            chip = f"chip{task.chip}"
            t0 = env.now
            pending = [done[d] for d in task.deps if not done[d].triggered]
            if pending:
                yield env.all_of(pending)
                rec.add(t0, env.now, chip, "compute", "stall", task.op, task.kind, task.layer, 0, 0, "", "",
                        "dependency", 1)
            start = env.now
            yield from run_task(task, chip)
            rec.spans.append((task.op, start, env.now))
            done[task.op].succeed()

    env.process(stream())
    env.run()
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    busy: dict[str, int] = {}
    for (_, name), p in ports.items():
        read[name] = read.get(name, 0) + p.bytes_read
        written[name] = written.get(name, 0) + p.bytes_written
        busy[name] = busy.get(name, 0) + max(ch.busy_ps for ch in p.channels)
    return EngineResult(
        records=tuple(rec.records),
        spans=tuple(rec.spans),
        end_ps=int(env.now),
        events=env.events,
        simulated_tasks=stats["simulated"],
        replayed_tasks=stats["replayed"],
        approximate_steps=stats["approximate"],
        bytes_read=tuple(read.items()),
        bytes_written=tuple(written.items()),
        busy_ps=tuple(busy.items()),
    )

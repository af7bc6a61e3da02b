"""The scheduler: runs a Plan's tasks on a chip in stream order, respecting dependencies.

One task runs at a time per chip (a GPU stream: a kernel starts when the previous one has
finished, stores included). A task therefore starts with every resource idle, so two
tasks with equal signatures take identical intervals: the first is simulated and later
ones replay its records shifted in time (identical layers cost one simulation).
"""
from __future__ import annotations

from dataclasses import dataclass

import simpy

from memsim.engine.pipeline import run_step
from memsim.engine.recorder import Interval, Recorder
from memsim.engine.resources import ChipResources
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


def run(plan: Plan, *, chip_name: str = "chip0", fast_forward: bool = True, memoize: bool = True) -> EngineResult:
    env = CountingEnvironment()
    res = ChipResources(plan.chip)
    rec = Recorder()
    done = {t.op: env.event() for t in plan.tasks}
    cache: dict[tuple, tuple[int, list[Interval], dict[str, tuple[int, int]]]] = {}
    stats = {"simulated": 0, "replayed": 0, "approximate": 0}

    def run_task(task: OpTask):
        start = env.now
        if memoize and task.signature in cache and res.idle_at(start):
            duration, rel, moved = cache[task.signature]
            for r in rel:
                rec.records.append(r._replace(start_ps=r.start_ps + start, end_ps=r.end_ps + start, op=task.op,
                                              layer=task.layer))
            for lvl, (rd, wr) in moved.items():
                res.levels[lvl].bytes_read += rd
                res.levels[lvl].bytes_written += wr
            stats["replayed"] += 1
            yield env.timeout(duration)
            return
        first = len(rec.records)
        before = {k: (v.bytes_read, v.bytes_written) for k, v in res.levels.items()}
        idle = res.idle_at(start)
        if task.overhead_ps:
            yield env.timeout(task.overhead_ps)
            rec.add(start, env.now, chip_name, "compute", "stall", task.op, task.kind, task.layer, 0, 0, "", "",
                    "overhead", 1)
        for step in task.steps:
            stats["approximate"] += yield from run_step(env, res, rec, chip_name, task, step, fast_forward)
        stats["simulated"] += 1
        if memoize and idle and res.idle_at(env.now):
            rel = [r._replace(start_ps=r.start_ps - start, end_ps=r.end_ps - start) for r in rec.records[first:]]
            moved = {k: (v.bytes_read - before[k][0], v.bytes_written - before[k][1]) for k, v in res.levels.items()}
            cache[task.signature] = (env.now - start, rel, moved)

    def stream():
        for task in plan.tasks:
            t0 = env.now
            pending = [done[d] for d in task.deps if not done[d].triggered]
            if pending:
                yield env.all_of(pending)
                rec.add(t0, env.now, chip_name, "compute", "stall", task.op, task.kind, task.layer, 0, 0, "", "",
                        "dependency", 1)
            start = env.now
            yield from run_task(task)
            rec.spans.append((task.op, start, env.now))
            done[task.op].succeed()

    env.process(stream())
    env.run()
    return EngineResult(
        records=tuple(rec.records),
        spans=tuple(rec.spans),
        end_ps=int(env.now),
        events=env.events,
        simulated_tasks=stats["simulated"],
        replayed_tasks=stats["replayed"],
        approximate_steps=stats["approximate"],
        bytes_read=tuple((k, v.bytes_read) for k, v in res.levels.items()),
        bytes_written=tuple((k, v.bytes_written) for k, v in res.levels.items()),
    )

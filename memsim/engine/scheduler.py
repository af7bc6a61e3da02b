"""The scheduler: a Plan's operator DAG issued on the streams of every chip.

Each chip has streams (compute, copy, communication; a chip declares which it has). A
task is issued on its stream in plan order, once its dependencies are done and the
stream's previous task has finished, stores included; tasks on different streams and
different chips run concurrently and contend for the resources they share. Idle time of a
chip's compute stream is recorded with its cause: waiting for a task on another chip is the
pipeline ``bubble``, waiting for a collective or a prefetch names its link or level.

Two exact shortcuts sit behind small hooks: fast-forward of periodic steps
(``engine/fastforward.py``) and replay of identical tasks (``engine/replay.py``). Both ask
``quiet_until``: the earliest time another task could touch a set of resources, which is
now when another stream has a task, running or still to come, that uses any of them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from heapq import heapify

import simpy

from memsim.engine.fastforward import FastForward
from memsim.engine.pipeline import StepRun
from memsim.engine.records import (BUBBLE, COMPUTE, DEPENDENCY, OVERHEAD, SYSTEM, Cause, Interval, ResourceId,
                                   keep)
from memsim.engine.replay import Recording, Replay
from memsim.engine.replay import key as replay_key
from memsim.engine.rows import step_rows
from memsim.engine.resources import COMMUNICATION, DEMAND, PREFETCH, ChipResources, Job, Server
from memsim.engine.system import SystemLinks, run_collective
from memsim.hardware.resource import Ref
from memsim.mapping.plan import COMM, COPY, OpTask, Plan

PRIORITY = {COMPUTE: DEMAND, COMM: COMMUNICATION, COPY: PREFETCH}
NEVER = float("inf")


class Environment(simpy.Environment):
    """A SimPy environment that can move a step's events later, and counts its events."""

    def scheduled(self) -> int:
        """Events scheduled so far: SimPy numbers every scheduled event from 0 (this takes a
        number too, which leaves a harmless gap)."""
        return next(self._eid)

    def shift(self, step: object, delta: int) -> None:
        """Move every scheduled event tagged as ``step``'s by ``delta``."""
        queue = self._queue
        for i, (t, prio, eid, event) in enumerate(queue):
            if getattr(event, "step", None) is step:
                queue[i] = (t + delta, prio, eid, event)
        heapify(queue)


@dataclass(frozen=True, slots=True)
class EngineResult:
    records: tuple[Interval, ...]
    spans: tuple[tuple[str, int, int], ...]  # (op, start_ps, end_ps)
    end_ps: int
    events: int
    simulated_tasks: int
    replayed_tasks: int
    approximate_steps: int  # steps fast-forwarded by repeating a window, not an exact cycle
    bytes_read: tuple[tuple[str, int], ...]
    bytes_written: tuple[tuple[str, int], ...]
    busy_ps: tuple[tuple[str, int], ...] = ()  # per resource name: time it was held


class Simulation:
    def __init__(self, plan: Plan, fast_forward: bool, memoize: bool) -> None:
        self.plan = plan
        self.fast_forward, self.memoize = fast_forward, memoize
        self.env = env = Environment()
        self.chips: dict[int, ChipResources] = {}
        first: dict[int, ChipResources] = {}  # chip -> its first unit's resources, which its regions share
        local = frozenset(Ref.level(lvl.name) for lvl in plan.chip.levels if lvl.is_scratchpad)
        local |= frozenset({Ref.link(plan.chip.execution.fabric)} if plan.chip.execution.fabric else ())
        for unit in sorted({t.chip for t in plan.tasks} | {0}):
            res = ChipResources(env, plan.chip, unit, plan.staging_bytes, first.get(plan.chip_of(unit)), local)
            self.chips[unit] = first.setdefault(plan.chip_of(unit), res) and res
        self.links = SystemLinks(env, plan) if plan.units > 1 else None
        declared = plan.chip.execution.streams
        self.streams: dict[tuple[int, str], list[OpTask]] = {}
        for t in plan.tasks:
            self.streams.setdefault((t.chip, t.stream if t.stream in declared else COMPUTE), []).append(t)
        self.stream_of = {t.op: key for key, tasks in self.streams.items() for t in tasks}
        self.task_of = {t.op: t for t in plan.tasks}
        footprints: dict[tuple, list[Server]] = {}
        self.servers = {}
        for t in plan.tasks:
            fp = (t.chip, tuple(sorted({str(ref) for s in t.steps for ref, _ in s.loads + s.stores})),
                  any(s.compute_ps for s in t.steps), t.rounds)
            self.servers[t.op] = footprints.get(fp) or footprints.setdefault(fp, self._servers(t))
        # Per server: the streams that use it, each with the index of its last task that does.
        self.last_use: dict[int, dict[tuple[int, str], int]] = {}
        for key, tasks in self.streams.items():
            for i, t in enumerate(tasks):
                for s in self.servers[t.op]:
                    self.last_use.setdefault(id(s), {})[key] = i
        self.position = {key: 0 for key in self.streams}
        self.done = {t.op: env.event() for t in plan.tasks}
        self.finish: dict[str, int] = {}
        self.rows: list[Interval] = []
        self.spans: list[tuple[str, int, int]] = []
        self.replay = Replay()
        self.stats = {"simulated": 0, "replayed": 0, "approximate": 0}

    def _servers(self, task: OpTask) -> list[Server]:
        """The resources a task can touch."""
        res = self.chips[task.chip]
        out = [res.compute] if any(s.compute_ps for s in task.steps) else []
        for step in task.steps:
            for ref, _ in step.loads + step.stores:
                port = res.ports[ref]
                for s in (port, port.via):
                    if s is not None and s not in out:
                        out.append(s)
        if task.rounds and self.links is not None:
            out += self.links.servers(task)
        return out

    # -- the shortcuts' question ----------------------------------------------------------
    def _others(self, key: tuple[int, str], servers: list[Server], lower: bool):
        """The other streams that have a task, running or to come, using any of ``servers``: those of
        lower priority than ``key``'s if ``lower``, else those of the same or higher priority."""
        mine = PRIORITY.get(key[1], DEMAND)
        for s in servers:
            for other, last in self.last_use.get(id(s), {}).items():
                if other != key and (PRIORITY.get(other[1], DEMAND) > mine) == lower \
                        and last >= self.position[other]:
                    yield other, [id(s)]

    def quiet_until(self, key: tuple[int, str], servers: list[Server], lower: bool = True) -> float:
        """The earliest time a task of another stream could touch ``servers`` (ignoring streams
        of lower priority, whose requests yield to this one's, unless ``lower``)."""
        for _ in self._others(key, servers, False):
            return self.env.now
        if lower:
            for _ in self._others(key, servers, True):
                return self.env.now
        return NEVER

    def shared(self, key: tuple[int, str], servers: list[Server]) -> list[Server]:
        """Which of ``servers`` a lower-priority stream (a prefetch) uses or may use."""
        ids = {i for _, hits in self._others(key, servers, True) for i in hits}
        return [s for s in servers if id(s) in ids or s.prefetching()]

    # -- processes --------------------------------------------------------------------------
    def _stream(self, key: tuple[int, str], tasks: list[OpTask]):
        env = self.env
        chip, stream = key
        for i, task in enumerate(tasks):
            self.position[key] = i
            t0 = env.now
            pending = [d for d in task.deps if not self.done[d].triggered]
            if pending:
                yield env.all_of([self.done[d] for d in pending])
                if stream == COMPUTE:
                    self.rows += self._idle(chip, task, t0, self._wait_cause(chip, pending))
            start = env.now
            yield from self._task(task, Job(task.op, chip, stream), key)
            self.spans.append((task.op, start, env.now))
            self.finish[task.op] = env.now
            self.done[task.op].succeed()
        self.position[key] = len(tasks)

    def _wait_cause(self, chip: int, deps: list[str]) -> Cause:
        """Why a compute stream waited: for the dependency that finished last."""
        last = max(deps, key=lambda d: self.finish[d])
        dep = self.task_of[last]
        if dep.chip != chip:
            return Cause(BUBBLE)
        if self.stream_of[last][1] != COMPUTE and dep.bound is not None:
            return Cause.wait(dep.bound, dep.op if self.stream_of[last][1] == COPY else "")
        return Cause(DEPENDENCY)

    def _idle(self, chip: int, task: OpTask, start: int, cause: Cause) -> list[Interval]:
        """The compute stream's idle interval from ``start`` to now, if it is not empty."""
        row = Interval(start, self.env.now, chip, ResourceId(COMPUTE, chip, "compute"), "stall", task.op, task.kind,
                       task.layer, cause=cause)
        return [row] if keep(row) else []

    def _task(self, task: OpTask, job: Job, key: tuple[int, str]):
        staging = self.chips[task.chip].staging
        if task.acquires:  # a prefetch waits for room in the staging area
            yield staging.get(task.acquires)
        yield from self._run_task(task, job, key)
        if task.releases:
            staging.put(task.releases)

    def _run_task(self, task: OpTask, job: Job, key: tuple[int, str]):
        env = self.env
        start = env.now
        servers = self.servers[task.op]
        memo_key = replay_key(dataclasses.replace(task, chip=0).signature, servers)
        if self.memoize:
            memo = self.replay.lookup(memo_key, servers, start, self.quiet_until(key, servers))
            if memo is not None:
                self.rows += self.replay.apply(memo, servers, job, start, task.op, task.layer)
                self.stats["replayed"] += 1
                yield env.timeout(memo.duration)
                return
        recording = Recording(start, servers)
        rows: list[Interval] = []
        res = self.chips[task.chip]
        on_compute = key[1] == COMPUTE
        if task.overhead_ps:
            yield env.timeout(task.overhead_ps)
            if on_compute:
                rows += self._idle(job.chip, task, start, Cause(OVERHEAD))
        if task.rounds:
            t0 = env.now
            yield from run_collective(env, self.links, task, job, rows)
            if on_compute:
                rows += self._idle(job.chip, task, t0, Cause.wait(task.bound))
        for step in task.steps:
            observer = FastForward(lambda run: self.quiet_until(key, run.footprint(), lower=False), env.shift,
                                   lambda run: self.shared(key, run.footprint())) if self.fast_forward else None
            run = StepRun(env, res, task, step, job, PRIORITY.get(key[1], DEMAND), observer)
            yield from run.run()
            rows += step_rows(run)
            if observer is not None and observer.approximate:
                self.stats["approximate"] += 1
        rows = [r for r in rows if keep(r)]
        self.rows += rows
        self.stats["simulated"] += 1
        if self.memoize:
            self.replay.remember(memo_key, recording, job, env.now, rows)

    def run(self) -> EngineResult:
        for key, tasks in self.streams.items():
            self.env.process(self._stream(key, tasks))
        self.env.run()
        end = int(self.env.now)
        if len(self.chips) > 1:  # a chip that finished early idles until the step ends
            for (chip, stream), tasks in self.streams.items():
                last = self.finish.get(tasks[-1].op, end) if tasks else end
                if stream == COMPUTE and last < end:
                    self.rows.append(Interval(last, end, chip, ResourceId(COMPUTE, chip, "compute"), "stall",
                                              tasks[-1].op, tasks[-1].kind, tasks[-1].layer, cause=Cause(BUBBLE)))
        read: dict[str, int] = {}
        written: dict[str, int] = {}
        busy: dict[str, int] = {}
        servers = {id(s): s for r in self.chips.values() for s in r.servers()}  # regions share some
        servers.update({id(p): p for p in self.links.ports.values()} if self.links is not None else {})
        for s in servers.values():
            if s.rid.kind == COMPUTE:
                continue
            name = str(s.rid)
            read[name] = read.get(name, 0) + s.bytes_read
            written[name] = written.get(name, 0) + s.bytes_written
            busy[name] = busy.get(name, 0) + s.busy_ps
        return EngineResult(tuple(self.rows), tuple(self.spans), end, self.env.scheduled(), self.stats["simulated"],
                            self.stats["replayed"], self.stats["approximate"], tuple(read.items()),
                            tuple(written.items()), tuple(busy.items()))


def run(plan: Plan, *, fast_forward: bool = True, memoize: bool = True) -> EngineResult:
    return Simulation(plan, fast_forward, memoize).run()

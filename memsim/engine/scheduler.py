"""The scheduler: a Plan's operator DAG issued on the streams of every chip.

Each chip has streams (compute, copy, communication; a chip declares which it has). A
task is issued on its stream in plan order, once its dependencies are done and the
stream's previous task has finished, stores included; tasks on different streams and
different chips run concurrently and contend for the resources they share. Idle time of a
chip's compute stream is recorded with its cause: waiting for a task on another chip is the
pipeline ``bubble``, waiting for a collective or a prefetch names its link or level.

This is a plain simulation. Two exact shortcuts, fast-forward of periodic steps and replay of
identical tasks, are installed through one seam only when one is on (``engine/shortcuts.py``,
``self.shortcuts``; None in a plain run): the scheduler asks it whether a task replays, has it
remember a task it simulated, and gives each step the observer it returns. For them, the
scheduler keeps a record of its streams (which task each is at, whether it runs, its current
step, when its latest task ended, whether a prefetch waits for staging room), a few writes a
task, which ``engine/neighbours.py`` reads.
"""
from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from simpy.events import Event

from memsim.engine.pipeline import StepRun
from memsim.engine.records import (
    BUBBLE_CAUSE,
    COMPUTE,
    DEPENDENCY_CAUSE,
    HOST_CAUSE,
    LIBRARY_CAUSE,
    OVERHEAD_CAUSE,
    WAIT,
    Cause,
    Interval,
    Usage,
    keep,
)
from memsim.engine.resources import DEMAND, PRIORITY, ChipResources, Job, Server
from memsim.engine.rows import step_rows
from memsim.engine.shortcuts import Shortcuts
from memsim.engine.simpy_fast import Environment
from memsim.engine.system import SystemLinks, play, run_collective
from memsim.hardware.resource import SYSTEM, Ref, ResourceKind
from memsim.mapping.plan import BRANCH, COPY, OpTask, Plan

Key = tuple[int, str]  # a stream: (chip or region, stream name)
Process = Generator[Event, object, None]


@dataclass(frozen=True, slots=True)
class EngineResult:
    records: tuple[Interval, ...]
    spans: tuple[tuple[str, int, int], ...]  # (op, start_ps, end_ps)
    end_ps: int
    events: int
    simulated_tasks: int
    replayed_tasks: int
    bytes_read: tuple[tuple[str, int], ...]
    bytes_written: tuple[tuple[str, int], ...]
    busy_ps: tuple[tuple[str, int], ...] = ()  # per resource name: time it was held
    usage: tuple[Usage, ...] = ()  # per level and link of each chip (or region) and of the system


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
            res = ChipResources(env, plan.chip, unit, plan.staging_of(unit), first.get(plan.chip_of(unit)), local)
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
        # Collectives whose links no other stream uses: their links are idle whenever they start.
        self.alone: dict[str, list[Server]] = {}
        for key, tasks in self.streams.items():
            for t in tasks:
                links = [s for s in self.servers[t.op] if s.rid.chip == SYSTEM]
                if t.rounds and all(self.last_use[id(s)].keys() == {key} for s in links):
                    self.alone[t.op] = links
        self.position = {key: 0 for key in self.streams}
        self.index = {t.op: i for tasks in self.streams.values() for i, t in enumerate(tasks)}
        self.running: dict[tuple[int, str], bool] = {}  # a stream whose task has started and not ended
        self.ended: dict[tuple[int, str], int] = {}  # when a stream's latest task ended
        self.current: dict[tuple[int, str], StepRun] = {}  # the step a stream's running task is in
        self.starved: set[tuple[int, str]] = set()  # streams whose prefetch waits for staging room
        self.holders: dict[int, set[str]] = {}  # chip -> the operators whose prefetched weights hold room
        # The operator that uses each prefetch's weights (and gives their room back).
        self.user_of = {d: t.op for t in plan.tasks if t.releases for d in t.deps
                        if self.task_of[d].acquires}
        self.done = {t.op: env.event() for t in plan.tasks}
        self.finish: dict[str, int] = {}
        # The host's part (``mapping.dispatch.HostPlan``): when a host that runs ahead has issued each
        # task, and when a serial one starts; a collective's library call, once it has run (op -> start, end).
        host = plan.host
        self.release = dict(zip((t.op for t in plan.tasks), host.releases)) if host is not None else {}
        self.serial = host is not None and not host.ahead
        self.library: dict[str, tuple[int, int]] = {}
        self.rows: list[Interval] = []
        self.spans: list[tuple[str, int, int]] = []
        self._waits: dict[tuple[Ref | None, int, str], Cause] = {}  # (on, chip, holder) -> its stall
        self.stats = {"simulated": 0, "replayed": 0}
        # Installed last, on every resource made: the plain engine's one seam.
        self.shortcuts = Shortcuts(self, fast_forward, memoize) if fast_forward or memoize else None

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

    # -- processes --------------------------------------------------------------------------
    def _stream(self, key: Key, tasks: list[OpTask]) -> Process:
        env = self.env
        chip, stream = key
        host = self.plan.host
        for i, task in enumerate(tasks):
            self.position[key] = i
            t0 = env.now_ps
            pending = [d for d in task.deps if not self.done[d].triggered]
            if pending:
                yield env.all_of([self.done[d] for d in pending])
                if stream == COMPUTE:
                    self.rows += self._waited(chip, task, t0, pending)
            if host is not None:  # the host has yet to issue it: its launch, or its work before the step
                ready = self.release.get(task.op, 0)
                if self.serial:  # it launches once the kernel before has ended (and, first, its work before the step)
                    ready = max(env.now_ps, host.before_ps if host.overlap != "full" else 0) + task.host_ps
                if ready > env.now_ps:
                    t1 = env.now_ps
                    yield env.timeout(ready - t1)
                    if stream == COMPUTE:
                        self.rows += self._idle(chip, task, t1, HOST_CAUSE)
            start = env.now_ps
            if task.library_ps:  # the library's call follows the kernel's launch (a replayed task's too)
                self.library[task.op] = (start + task.overhead_ps, start + task.overhead_ps + task.library_ps)
            self.running[key] = True
            yield from self._task(task, Job(task.op, chip, stream), key)
            self.running[key] = False
            self.ended[key] = env.now_ps
            self.spans.append((task.op, start, env.now_ps))
            self.finish[task.op] = env.now_ps
            self.done[task.op].succeed()
        self.position[key] = len(tasks)

    def _waited(self, chip: int, task: OpTask, start: int, deps: list[str]) -> list[Interval]:
        """A compute stream's wait from ``start`` to now for ``deps``, with its cause; where it waited
        for a collective, the part its library's call took is the library's."""
        cause = self._wait_cause(chip, deps)
        last = max(deps, key=lambda d: self.finish[d])
        call = self.library.get(last)
        now = self.env.now_ps
        if call is None or call[1] <= start or call[0] >= now:
            return self._idle(chip, task, start, cause)
        a, b = max(call[0], start), min(call[1], now)
        return [r for at, to, why in ((start, a, cause), (a, b, LIBRARY_CAUSE), (b, now, cause))
                for r in self._span(chip, task, at, to, why)]

    def _span(self, chip: int, task: OpTask, start: int, end: int, cause: Cause) -> list[Interval]:
        row = Interval(start_ps=start, end_ps=end, chip=chip, resource=self.chips[chip].compute.rid,
                       kind="stall", op=task.op, op_kind=task.kind, layer=task.layer, cause=cause, stream=COMPUTE)
        return [row] if keep(row) else []

    def _wait_cause(self, chip: int, deps: list[str]) -> Cause:
        """Why a compute stream waited: for the dependency that finished last."""
        last = max(deps, key=lambda d: self.finish[d])
        dep = self.task_of[last]
        if dep.chip != chip:
            return BUBBLE_CAUSE
        if self.stream_of[last][1] != COMPUTE and dep.bound is not None:
            return self._waiting(dep.bound, chip, dep.op if self.stream_of[last][1] == COPY else "")
        return DEPENDENCY_CAUSE

    def _waiting(self, on: Ref | None, chip: int, holder: str = "") -> Cause:
        """The stall of waiting for ``on`` of ``chip`` (behind ``holder``), one object each (as
        ``Server.waited``)."""
        key = (on, chip, holder)
        cause = self._waits.get(key)
        if cause is None:
            cause = self._waits[key] = Cause(WAIT, on.on(chip) if on is not None else None, holder)
        return cause

    def _idle(self, chip: int, task: OpTask, start: int, cause: Cause, stream: str = COMPUTE) -> list[Interval]:
        """A compute (or branch) stream's idle interval from ``start`` to now, if it is not empty."""
        row = Interval(start_ps=start, end_ps=self.env.now_ps, chip=chip, resource=self.chips[chip].compute.rid,
                       kind="stall", op=task.op, op_kind=task.kind, layer=task.layer, cause=cause, stream=stream)
        return [row] if keep(row) else []

    def _task(self, task: OpTask, job: Job, key: Key) -> Process:
        if not (task.acquires or task.releases):
            yield from self._run_task(task, job, key)
            return
        staging = self.chips[task.chip].staging
        assert staging is not None, f"{task.op}: its chip sets no staging room aside"
        if task.acquires:  # a prefetch waits for room in the staging area
            self.starved.add(key)
            yield staging.get(task.acquires)
            self.starved.discard(key)
            self.holders.setdefault(task.chip, set()).add(self.user_of[task.op])
        yield from self._run_task(task, job, key)
        if task.releases:
            staging.put(task.releases)
            self.holders[task.chip].discard(task.op)

    def _run_task(self, task: OpTask, job: Job, key: Key) -> Process:
        env = self.env
        start = env.now_ps
        servers = self.servers[task.op]
        shortcuts, recording = self.shortcuts, None
        if shortcuts is not None:
            replayed, recording = shortcuts.begin(task, job, key, servers)
            if replayed is not None:
                self.rows += replayed[0]
                self.stats["replayed"] += 1
                yield env.timeout(replayed[1])
                return
        rows: list[Interval] = []
        res = self.chips[task.chip]
        on_compute = key[1] in (COMPUTE, BRANCH)
        if task.overhead_ps:
            yield env.timeout(task.overhead_ps)
            if on_compute:
                rows += self._idle(job.chip, task, start, OVERHEAD_CAUSE, key[1])
        if task.library_ps:  # the library's own fixed cost of the call
            t0 = env.now_ps
            yield env.timeout(task.library_ps)
            if on_compute:
                rows += self._idle(job.chip, task, t0, LIBRARY_CAUSE, key[1])
        if task.rounds:
            t0 = env.now_ps
            links = self.links
            assert links is not None, "a collective on one chip"
            alone = self.alone.get(task.op)
            if alone is not None and all(s.idle(t0) for s in alone):
                yield from play(env, links.played(task.rounds, task.step_ps, task.channel_rate), task, job, rows)
            else:
                yield from run_collective(env, links, task, job, rows)
            if on_compute:
                rows += self._idle(job.chip, task, t0, self._waiting(task.bound, job.chip),
                                  key[1])
        for step in task.steps:
            observer = shortcuts.observer() if shortcuts is not None else None
            run = self.current[key] = StepRun(env, res, task, step, job, PRIORITY.get(key[1], DEMAND), observer)
            yield from run.run()
            del self.current[key]
            rows += step_rows(run)
        rows = [r for r in rows if keep(r)]
        self.rows += rows
        self.stats["simulated"] += 1
        if shortcuts is not None and recording is not None:
            shortcuts.remember(recording, job, rows)

    def run(self) -> EngineResult:
        for key, tasks in self.streams.items():
            self.env.process(self._stream(key, tasks))
        self.env.run()
        end = self.env.now_ps
        # A compute stream that finished early idles until the step ends: for another chip (a
        # bubble), or for its own chip's other streams (the last collective, a link or level).
        lasts = [tasks[-1].op for tasks in self.streams.values() if tasks]
        for (chip, stream), tasks in self.streams.items():
            last = self.finish.get(tasks[-1].op, end) if tasks else end
            if stream == COMPUTE and last < end:
                self.rows += self._idle(chip, tasks[-1], last, self._wait_cause(chip, lasts))
        host = self.plan.host
        if host is not None:  # the host's work after the step, or a host slower than the device
            done = end + host.after_ps if host.overlap == "none" else max(end, host.busy_ps)
            for (chip, stream), tasks in self.streams.items():
                if stream == COMPUTE and tasks and done > end:
                    self.rows += self._span(chip, tasks[-1], end, done, HOST_CAUSE)
            end = done
        read: dict[str, int] = {}
        written: dict[str, int] = {}
        busy: dict[str, int] = {}
        servers = {id(s): s for r in self.chips.values() for s in r.servers()}  # regions share some
        servers.update({id(p): p for p in self.links.ports.values()} if self.links is not None else {})
        holders: dict[int, int] = {}  # server -> the units whose resources hold it
        for res in self.chips.values():
            for s in res.servers():
                holders[id(s)] = holders.get(id(s), 0) + 1
        usage = tuple(Usage(resource=s.rid, read=s.bytes_read, written=s.bytes_written, busy_ps=s.busy_ps,
                            shared=holders.get(key, 0) > 1)
                      for key, s in servers.items() if s.rid.kind is not ResourceKind.COMPUTE)
        for u in usage:
            name = str(u.resource)
            read[name] = read.get(name, 0) + u.read
            written[name] = written.get(name, 0) + u.written
            busy[name] = busy.get(name, 0) + u.busy_ps
        return EngineResult(tuple(self.rows), tuple(self.spans), end, self.env.scheduled(), self.stats["simulated"],
                            self.stats["replayed"], tuple(read.items()),
                            tuple(written.items()), tuple(busy.items()), usage)


def run(plan: Plan, *, fast_forward: bool = True, memoize: bool = True) -> EngineResult:
    return Simulation(plan, fast_forward, memoize).run()

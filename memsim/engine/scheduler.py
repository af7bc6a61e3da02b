"""The scheduler: a Plan's operator DAG issued on the streams of every chip.

Each chip has streams (compute, copy, communication; a chip declares which it has). A
task is issued on its stream in plan order, once its dependencies are done and the
stream's previous task has finished, stores included; tasks on different streams and
different chips run concurrently and contend for the resources they share. Idle time of a
chip's compute stream is recorded with its cause: waiting for a task on another chip is the
pipeline ``bubble``, waiting for a collective or a prefetch names its link or level.

Two exact shortcuts sit behind small hooks: fast-forward of periodic steps
(``engine/fastforward.py``) and replay of identical tasks (``engine/replay.py``). Replay asks
``quiet_until``: now when another stream has a task, running or still to come, that uses any
of a task's resources. Fast-forward asks ``partners`` (the steps running beside a step on
the resources it shares, and a lower bound on when any other stream could next touch them),
``shared`` and ``touched_since``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memsim.engine.chunk import footprint
from memsim.engine.environment import Environment
from memsim.engine.fastforward import FastForward
from memsim.engine.pipeline import StepRun
from memsim.engine.records import (
    BUBBLE,
    COMPUTE,
    DEPENDENCY,
    OVERHEAD,
    WAIT,
    Cause,
    Interval,
    Usage,
    keep,
)
from memsim.engine.replay import Recording, Replay
from memsim.engine.replay import key as replay_key
from memsim.engine.resources import COMMUNICATION, DEMAND, PREFETCH, ChipResources, Job, Server
from memsim.engine.rows import step_rows
from memsim.engine.system import SystemLinks, play, run_collective
from memsim.hardware.resource import SYSTEM, Ref, ResourceId, ResourceKind
from memsim.mapping.plan import BRANCH, COMM, COPY, OpTask, Plan

PRIORITY = {COMPUTE: DEMAND, BRANCH: DEMAND, COMM: COMMUNICATION, COPY: PREFETCH}
NEVER = float("inf")


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
        self.rows: list[Interval] = []
        self.spans: list[tuple[str, int, int]] = []
        self.replay = Replay()
        self.stats = {"simulated": 0, "replayed": 0}

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

    # -- the shortcuts' questions ---------------------------------------------------------
    def _others(self, keys, servers: list[Server], lower: bool, mine: int):
        """The streams not in ``keys`` that have a task, running or to come, using any of
        ``servers``: of lower priority than ``mine`` if ``lower``, else of the same or higher."""
        for s in servers:
            for other, last in self.last_use.get(id(s), {}).items():
                if other not in keys and (PRIORITY.get(other[1], DEMAND) > mine) == lower \
                        and last >= self.position[other]:
                    yield other, id(s)

    def quiet_until(self, key: tuple[int, str], servers: list[Server]) -> float:
        """The earliest time a task of another stream could touch ``servers``."""
        for _ in self._others((key,), servers, False, PRIORITY.get(key[1], DEMAND)):
            return self.env.now
        for _ in self._others((key,), servers, True, PRIORITY.get(key[1], DEMAND)):
            return self.env.now
        return NEVER

    def partners(self, run: StepRun) -> tuple[list[StepRun], float] | None:
        """The steps running on other streams that share ``run``'s resources at its priority or
        higher (and theirs in turn), and the earliest time another such stream could touch the
        group's resources; ``None`` if that could be now."""
        key = run.key
        mine = PRIORITY.get(key[1], DEMAND)
        group = {key: run}
        servers = run.footprint()
        quiet, memo = NEVER, {}
        grown = True
        while grown:
            grown = False
            for other, _ in self._others(group, servers, False, mine):
                step = self.current.get(other)
                if step is not None and step.consumed == step.step.count and not step.outstanding:
                    # Its stores have drained and it waits out their latency: it touches nothing
                    # more, and its stream goes on when that ends.
                    quiet = min(quiet, max(step.last_store, self.env.now))
                elif step is not None:
                    group[other] = step
                    servers = servers + step.footprint()
                    grown = True
                    break
                else:
                    quiet = min(quiet, self._next_start(other, group, memo))
                if quiet <= self.env.now:
                    return None
        return [step for k, step in group.items() if k != key], quiet

    def shared(self, runs: list[StepRun]) -> list[tuple[Server, set]]:
        """Which of the group's resources a lower-priority stream (a prefetch) uses or may use
        before the group's tasks end, each with those streams. A stream waiting for one of the
        group's tasks cannot start anything."""
        keys = {r.key for r in runs}
        servers = footprint(runs)
        mine = max(PRIORITY.get(k[1], DEMAND) for k in keys)
        memo: dict = {}
        streams: dict[int, set] = {}
        for other, i in self._others(keys, servers, True, mine):
            if self._next_start(other, keys, memo) < NEVER:
                streams.setdefault(i, set()).add(other)
        return [(s, streams.get(id(s), set())) for s in servers if id(s) in streams or s.prefetching()]

    def touched_since(self, runs: list[StepRun]) -> float:
        """When a task of a stream outside the group that uses the group's resources (at its
        priority or higher) last ended."""
        keys = {r.key for r in runs}
        mine = max(PRIORITY.get(k[1], DEMAND) for k in keys)
        latest = -1.0
        for s in footprint(runs):
            for other in self.last_use.get(id(s), {}):
                if other not in keys and PRIORITY.get(other[1], DEMAND) <= mine:
                    latest = max(latest, NEVER if self.running.get(other) else self.ended.get(other, -1))
        return latest

    def _next_start(self, other: tuple[int, str], keys, memo: dict) -> float:
        """A lower bound on when stream ``other`` next starts work: now if it runs a task, else
        when its next task's dependencies can all have finished. ``NEVER`` if that waits for
        the running tasks of the streams ``keys``."""
        tasks, position = self.streams[other], self.position[other]
        if position >= len(tasks):
            return NEVER
        if self.running.get(other) and other not in self.starved:
            return self.env.now
        return self._earliest(tasks[position].op, keys, memo, start=True)

    def _earliest(self, op: str, keys, memo: dict, start: bool = False) -> float:
        """A lower bound on when ``op`` finishes (starts, if ``start``): ``NEVER`` if it is a running
        task of the streams ``keys`` or later in them, or waits for one."""
        now = self.env.now
        stack = [op]
        while stack:
            name = stack[-1]
            if name in memo:
                stack.pop()
                continue
            stream = self.stream_of[name]
            at, position = self.index[name], self.position[stream]
            if self.done[name].triggered:
                memo[name] = now
            elif stream in keys and at >= position:
                memo[name] = NEVER
            elif at == position and self.running.get(stream):
                if stream in self.starved:  # it starts once a user of prefetched weights gives room back
                    memo[name] = min((self._earliest(h, keys, memo) for h in self.holders.get(stream[0], ())),
                                     default=now)
                else:
                    step = self.current.get(stream)
                    memo[name] = now + (_least_left(step) if step is not None else 0)
            else:  # not started: once its dependencies and its stream's previous task have finished
                before = self.task_of[name].deps + ((self.streams[stream][at - 1].op,) if at > position else ())
                deps = [d for d in before if d not in memo]
                if deps:
                    stack += deps
                    continue
                memo[name] = max((memo[d] for d in before), default=now)
                if name == op and start:
                    return memo[name]
            stack.pop()
        return memo[op]

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
            self.running[key] = True
            yield from self._task(task, Job(task.op, chip, stream), key)
            self.running[key] = False
            self.ended[key] = env.now
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
            return Cause(WAIT, dep.bound.on(chip), dep.op if self.stream_of[last][1] == COPY else "")
        return Cause(DEPENDENCY)

    def _idle(self, chip: int, task: OpTask, start: int, cause: Cause, stream: str = COMPUTE) -> list[Interval]:
        """A compute (or branch) stream's idle interval from ``start`` to now, if it is not empty."""
        row = Interval(start_ps=start, end_ps=self.env.now, chip=chip, resource=ResourceId.compute(chip),
                       kind="stall", op=task.op, op_kind=task.kind, layer=task.layer, cause=cause, stream=stream)
        return [row] if keep(row) else []

    def _task(self, task: OpTask, job: Job, key: tuple[int, str]):
        staging = self.chips[task.chip].staging
        if task.acquires:  # a prefetch waits for room in the staging area
            self.starved.add(key)
            yield staging.get(task.acquires)
            self.starved.discard(key)
            self.holders.setdefault(task.chip, set()).add(self.user_of[task.op])
        yield from self._run_task(task, job, key)
        if task.releases:
            staging.put(task.releases)
            self.holders[task.chip].discard(task.op)

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
        on_compute = key[1] in (COMPUTE, BRANCH)
        if task.overhead_ps:
            yield env.timeout(task.overhead_ps)
            if on_compute:
                rows += self._idle(job.chip, task, start, Cause(OVERHEAD), key[1])
        if task.rounds:
            t0 = env.now
            alone = self.alone.get(task.op)
            if alone is not None and all(s.idle(t0) for s in alone):
                yield from play(env, self.links.played(task.rounds), task, job, rows)
            else:
                yield from run_collective(env, self.links, task, job, rows)
            if on_compute:
                rows += self._idle(job.chip, task, t0, Cause(WAIT, task.bound.on(job.chip) if task.bound else None),
                                  key[1])
        for step in task.steps:
            observer = FastForward(self) if self.fast_forward else None
            run = self.current[key] = StepRun(env, res, task, step, job, PRIORITY.get(key[1], DEMAND), observer)
            yield from run.run()
            del self.current[key]
            rows += step_rows(run)
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
        # A compute stream that finished early idles until the step ends: for another chip (a
        # bubble), or for its own chip's other streams (the last collective, a link or level).
        lasts = [tasks[-1].op for tasks in self.streams.values() if tasks]
        for (chip, stream), tasks in self.streams.items():
            last = self.finish.get(tasks[-1].op, end) if tasks else end
            if stream == COMPUTE and last < end:
                self.rows += self._idle(chip, tasks[-1], last, self._wait_cause(chip, lasts))
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


def _least_left(run: StepRun) -> int:
    """A lower bound on a step's time to its end: each port serves one transfer at a time, so it
    is busy for what is left of the transfers requested and the holds of the chunks not yet
    issued; so are the compute units for the chunks not yet computed."""
    now, unissued = run.env._now, run.step.count - run.issued
    left = [(run.step.count - run.consumed - run.computing) * run.step.compute_ps]
    for port in run.loads:
        pending = sum(p.hold if u is None else u.duration if u.end < 0 else max(0, u.end - now)
                      for c in run.pending for u, _, _, p in c.transfers if p is port)
        left.append(pending + unissued * port.hold)
    return max(left)


def run(plan: Plan, *, fast_forward: bool = True, memoize: bool = True) -> EngineResult:
    return Simulation(plan, fast_forward, memoize).run()

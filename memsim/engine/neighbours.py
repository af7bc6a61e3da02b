"""What the shortcuts ask the scheduler about the streams around a task or a step.

Replay asks ``quiet_until``: now when another stream has a task, running or still to come, that
uses any of a task's resources. Fast-forward asks ``partners`` (the steps running beside a step
on the resources it shares, and a lower bound on when any other stream could next touch them),
``shared`` and ``touched_since``. Each reads the scheduler's record of its streams (which task
each is at, whether it runs, its current step, when its latest task ended, whether a prefetch
waits for staging room); a plain run never asks.
"""
from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

from memsim.engine.chunk import footprint
from memsim.engine.pipeline import StepRun
from memsim.engine.resources import DEMAND, PRIORITY, Server

if TYPE_CHECKING:
    from memsim.engine.scheduler import Simulation

NEVER = float("inf")
Key = tuple[int, str]  # a stream: (chip or region, stream name)


class Neighbours:
    """The scheduler's answers to the shortcuts' questions about other streams."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def _others(self, keys: Collection[Key], servers: list[Server], lower: bool, mine: int) -> Iterator[tuple[Key, int]]:
        """The streams not in ``keys`` that have a task, running or to come, using any of
        ``servers``: of lower priority than ``mine`` if ``lower``, else of the same or higher."""
        last_use, position = self.sim.last_use, self.sim.position
        for s in servers:
            for other, last in last_use.get(id(s), {}).items():
                if other not in keys and (PRIORITY.get(other[1], DEMAND) > mine) == lower and last >= position[other]:
                    yield other, id(s)

    def quiet_until(self, key: Key, servers: list[Server]) -> float:
        """The earliest time a task of another stream could touch ``servers``."""
        mine = PRIORITY.get(key[1], DEMAND)
        for _ in self._others((key,), servers, False, mine):
            return self.sim.env.now_ps
        for _ in self._others((key,), servers, True, mine):
            return self.sim.env.now_ps
        return NEVER

    def partners(self, run: StepRun) -> tuple[list[StepRun], float] | None:
        """The steps running on other streams that share ``run``'s resources at its priority or
        higher (and theirs in turn), and the earliest time another such stream could touch the
        group's resources; ``None`` if that could be now."""
        sim, key = self.sim, run.key
        now = sim.env.now_ps
        mine = PRIORITY.get(key[1], DEMAND)
        group = {key: run}
        servers = run.footprint()
        quiet, memo = NEVER, dict[str, float]()
        grown = True
        while grown:
            grown = False
            for other, _ in self._others(group, servers, False, mine):
                step = sim.current.get(other)
                if step is not None and step.consumed == step.step.count and not step.outstanding:
                    # Its stores have drained and it waits out their latency: it touches nothing
                    # more, and its stream goes on when that ends.
                    quiet = min(quiet, max(step.last_store, now))
                elif step is not None:
                    group[other] = step
                    servers = servers + step.footprint()
                    grown = True
                    break
                else:
                    quiet = min(quiet, self._next_start(other, group, memo))
                if quiet <= now:
                    return None
        return [step for k, step in group.items() if k != key], quiet

    def shared(self, runs: list[StepRun]) -> list[tuple[Server, set[Key]]]:
        """Which of the group's resources a lower-priority stream (a prefetch) uses or may use
        before the group's tasks end, each with those streams. A stream waiting for one of the
        group's tasks cannot start anything."""
        keys = {r.key for r in runs}
        servers = footprint(runs)
        mine = max(PRIORITY.get(k[1], DEMAND) for k in keys)
        memo: dict[str, float] = {}
        streams: dict[int, set[Key]] = {}
        for other, i in self._others(keys, servers, True, mine):
            if self._next_start(other, keys, memo) < NEVER:
                streams.setdefault(i, set()).add(other)
        return [(s, streams.get(id(s), set())) for s in servers if id(s) in streams or s.prefetching()]

    def touched_since(self, runs: list[StepRun]) -> float:
        """When a task of a stream outside the group that uses the group's resources (at its
        priority or higher) last ended."""
        sim = self.sim
        keys = {r.key for r in runs}
        mine = max(PRIORITY.get(k[1], DEMAND) for k in keys)
        latest = -1.0
        for s in footprint(runs):
            for other in sim.last_use.get(id(s), {}):
                if other not in keys and PRIORITY.get(other[1], DEMAND) <= mine:
                    latest = max(latest, NEVER if sim.running.get(other) else sim.ended.get(other, -1))
        return latest

    def _next_start(self, other: Key, keys: Collection[Key], memo: dict[str, float]) -> float:
        """A lower bound on when stream ``other`` next starts work: now if it runs a task, else
        when its next task's dependencies can all have finished. ``NEVER`` if that waits for
        the running tasks of the streams ``keys``."""
        sim = self.sim
        tasks, position = sim.streams[other], sim.position[other]
        if position >= len(tasks):
            return NEVER
        if sim.running.get(other) and other not in sim.starved:
            return sim.env.now_ps
        return self._earliest(tasks[position].op, keys, memo, start=True)

    def _earliest(self, op: str, keys: Collection[Key], memo: dict[str, float], start: bool = False) -> float:
        """A lower bound on when ``op`` finishes (starts, if ``start``): ``NEVER`` if it is a running
        task of the streams ``keys`` or later in them, or waits for one."""
        sim = self.sim
        now = sim.env.now_ps
        stack = [op]
        while stack:
            name = stack[-1]
            if name in memo:
                stack.pop()
                continue
            stream = sim.stream_of[name]
            at, position = sim.index[name], sim.position[stream]
            if sim.done[name].triggered:
                memo[name] = now
            elif stream in keys and at >= position:
                memo[name] = NEVER
            elif at == position and sim.running.get(stream):
                if stream in sim.starved:  # it starts once a user of prefetched weights gives room back
                    memo[name] = min((self._earliest(h, keys, memo) for h in sim.holders.get(stream[0], ())),
                                     default=now)
                else:
                    step = sim.current.get(stream)
                    memo[name] = now + (least_left(step) if step is not None else 0)
            else:  # not started: once its dependencies and its stream's previous task have finished
                before = sim.task_of[name].deps + ((sim.streams[stream][at - 1].op,) if at > position else ())
                deps = [d for d in before if d not in memo]
                if deps:
                    stack += deps
                    continue
                memo[name] = max((memo[d] for d in before), default=now)
                if name == op and start:
                    return memo[name]
            stack.pop()
        return memo[op]


def least_left(run: StepRun) -> int:
    """A lower bound on a step's time to its end: each port serves one transfer at a time, so it
    is busy for what is left of the transfers requested and the holds of the chunks not yet
    issued; so are the compute units for the chunks not yet computed."""
    now, unissued = run.env.now_ps, run.step.count - run.issued
    left = [(run.step.count - run.consumed - run.computing) * run.step.compute_ps]
    for port in run.loads:
        pending = sum(p.hold if u is None else u.duration if u.end < 0 else max(0, u.end - now)
                      for c in run.pending for u, _, _, p in c.transfers if p is port)
        left.append(pending + unissued * port.hold)
    return max(left)

"""The shortcuts, installed on a simulation only when one is on: the plain engine's one seam.

``engine.run(plan, fast_forward=..., memoize=...)``. With both off (a plain run) the scheduler
makes no ``Shortcuts``: its servers carry no watch, its steps no observer, and no task is
looked up or recorded. With either on, ``Shortcuts`` installs a ``Touches`` on every server
(``engine/watch.py``) and answers the scheduler's hooks:

- ``recall``: a task identical to one remembered, on resources nothing else can touch before it
  would end, is replayed (``engine/replay.py``): its rows and how long it takes;
- ``recording`` and ``remember``: a task simulated is remembered if nothing else touched its
  resources meanwhile;
- ``observer``: a step's fast-forward (``engine/fastforward.py``, which fills the gaps a group
  leaves to a prefetch with ``engine/gapfill.py``).

What they ask about the other streams, ``engine/neighbours.py`` answers from the scheduler's
record of its streams.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from memsim.engine import replay, watch
from memsim.engine.fastforward import FastForward
from memsim.engine.neighbours import Neighbours
from memsim.engine.records import Interval
from memsim.engine.resources import Job, Server
from memsim.mapping.plan import OpTask

if TYPE_CHECKING:
    from memsim.engine.scheduler import Key, Simulation


class Shortcuts:
    """Fast-forward and replay (either or both) on one simulation."""

    def __init__(self, sim: Simulation, fast_forward: bool, memoize: bool) -> None:
        self.sim = sim
        self.fast_forward, self.memoize = fast_forward, memoize
        self.neighbours = Neighbours(sim)
        self.replay = replay.Replay()
        links = sim.links.ports.values() if sim.links is not None else ()
        watch.install([*(s for res in sim.chips.values() for s in res.servers()), *links])

    def recall(self, task: OpTask, job: Job, key: Key, servers: list[Server]) -> tuple[list[Interval], int] | None:
        """A remembered task that ``task`` may replay now: its rows, moved to now and to this
        task's resources (their accounts are updated), and its duration."""
        if not self.memoize:
            return None
        now = self.sim.env.now_ps
        signature = _signature(task, servers)
        memo = self.replay.lookup(signature, servers, now, self.neighbours.quiet_until(key, servers))
        if memo is None:
            return None
        return self.replay.apply(memo, servers, job, now, task.op, task.layer), memo.duration

    def recording(self, task: OpTask, servers: list[Server]) -> replay.Recording | None:
        """What remembering ``task``, about to be simulated, needs (nothing without replay)."""
        if not self.memoize:
            return None
        return replay.Recording(_signature(task, servers), self.sim.env.now_ps, servers)

    def remember(self, recording: replay.Recording, job: Job, rows: list[Interval]) -> None:
        self.replay.remember(recording, job, self.sim.env.now_ps, rows)

    def observer(self) -> FastForward | None:
        """A new step's fast-forward, if it is on."""
        return FastForward(self.neighbours) if self.fast_forward else None


def _signature(task: OpTask, servers: list[Server]) -> tuple:
    """What decides a task's timing, wherever it runs (``replay.key``)."""
    return replay.key(dataclasses.replace(task, chip=0).signature, servers)

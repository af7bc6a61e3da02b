"""The shortcuts, installed on a simulation only when one is on: the plain engine's one seam.

``engine.run(plan, fast_forward=..., memoize=...)``. With both off (a plain run) the scheduler
makes no ``Shortcuts``: its servers carry no watch, its steps no observer, and no task is
looked up or recorded. With either on, ``Shortcuts`` installs a ``Touches`` on every server
(``engine/watch.py``) and answers the scheduler's hooks:

- ``begin``: a task identical to one remembered, on resources nothing else can touch before it
  would end, is replayed (``engine/replay.py``): its rows and how long it takes;
- ``remember``: a task simulated is remembered if nothing else touched its resources meanwhile;
- ``observer``: a step's fast-forward (``engine/fastforward.py``, which fills the gaps a group
  leaves to a prefetch with ``engine/gapfill.py``).

What they ask about the other streams, ``engine/neighbours.py`` answers from the scheduler's
record of its streams.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memsim.engine import replay, watch
from memsim.engine.fastforward import FastForward
from memsim.engine.neighbours import Neighbours
from memsim.engine.records import Interval
from memsim.engine.resources import Job, Server
from memsim.mapping.plan import OpTask

if TYPE_CHECKING:
    from memsim.engine.scheduler import Key, Simulation

Replayed = tuple[list[Interval], int]  # a replayed task's rows and duration


class Shortcuts:
    """Fast-forward and replay (either or both) on one simulation."""

    def __init__(self, sim: Simulation, fast_forward: bool, memoize: bool) -> None:
        self.sim = sim
        self.fast_forward, self.memoize = fast_forward, memoize
        self.neighbours = Neighbours(sim)
        links = sim.links.ports.values() if sim.links is not None else ()
        self.watches = watch.install([*(s for res in sim.chips.values() for s in res.servers()), *links])
        self.replay = replay.Replay(self.watches)

    def begin(self, task: OpTask, job: Job, key: Key, servers: list[Server]) -> tuple[Replayed | None,
                                                                                      replay.Recording | None]:
        """``task`` is about to start on ``servers``: the task remembered that it replays now, if
        any (its rows, moved to now and to this task's resources, whose accounts are updated, and
        its duration), else what remembering it will need (nothing without replay)."""
        if not self.memoize:
            return None, None
        now = self.sim.env.now_ps
        signature = replay.key(task.signature_on(0), servers)  # wherever it runs
        memo = self.replay.lookup(signature, servers, now, self.neighbours.quiet_until(key, servers))
        if memo is None:
            return None, replay.Recording(signature, now, servers, self.watches)
        return (self.replay.apply(memo, servers, job, now, task.op, task.layer), memo.duration), None

    def remember(self, recording: replay.Recording, job: Job, rows: list[Interval]) -> None:
        self.replay.remember(recording, job, self.sim.env.now_ps, rows)

    def observer(self) -> FastForward | None:
        """A new step's fast-forward, if it is on."""
        return FastForward(self.neighbours, self.watches) if self.fast_forward else None


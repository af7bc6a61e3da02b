"""The SimPy environment the engine runs in: SimPy's own, with a faster run loop, a count of
the events scheduled, and a way to move the events of one step later (fast-forward skipped
the cycles they were waiting in).
"""
from __future__ import annotations

from heapq import heapify, heappop

import simpy


class Environment(simpy.Environment):
    """A SimPy environment that can move a step's events later, and counts its events."""

    def run(self, until: float | simpy.Event | None = None) -> object:
        """SimPy's ``run``. To the end of the schedule (the engine's use), ``step`` is inlined
        in the loop, with the same callback and failure handling: it costs a call per event."""
        if until is not None:
            return super().run(until)
        queue, pop = self._queue, heappop
        while queue:
            self._now, _, _, event = pop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        return None

    def scheduled(self) -> int:
        """Events scheduled so far: SimPy numbers every scheduled event from 0 (this takes a
        number too, which leaves a harmless gap)."""
        return next(self._eid)

    def shift(self, step: object, delta: int) -> None:
        """Move every scheduled event tagged as ``step``'s by ``delta``."""
        queue = self._queue
        for i, (t, prio, eid, event) in enumerate(queue):
            owner = getattr(event, "step", None)
            if owner is None and hasattr(event, "use"):  # a prefetch's hold timer: its request's step
                owner = getattr(event.use, "step", None)
            if owner is step:
                queue[i] = (t + delta, prio, eid, event)
        heapify(queue)

"""SimPy, faster: the one module of the engine that goes past SimPy's public API.

A chunk-by-chunk run is millions of events, so the engine's most frequent events skip the calls
SimPy's public constructors make. Everything that does is here; the rest of the engine uses
SimPy's public API and what this module gives it:

- ``Environment``: SimPy's, with its clock kept as an integer (``now_ps``: the engine's times are
  whole picoseconds; SimPy types its clock as a float), a run loop that inlines ``step`` (one call
  per event fewer), a count of the events scheduled (``scheduled``) and a way to move a step's
  events later (``shift``, for fast-forward);
- ``Timer``: a timeout at a given time in one call (``Environment.timeout`` makes three), which
  carries the step it belongs to;
- ``Request``: a SimPy ``Put`` made without ``Put.__init__`` (which queues it and asks its
  resource to serve it, three calls a request); ``resources.Use`` is one;
- ``succeed_at``: ``Event.succeed`` for a later time (a hold ends when it was granted for).

What it relies on in SimPy, checked against the versions in ``TESTED`` (``tests/engine/
test_simpy_fast.py`` fails on any other, naming what to check again):

- ``Environment._queue`` is a heap of ``(time, priority, id, event)``, ``_eid`` the
  ``itertools.count`` that numbers scheduled events, and ``_now`` the clock that ``step`` sets
  from the heap and ``schedule`` reads;
- an event is triggered by setting ``_ok`` and ``_value`` (whose class default, ``PENDING``, marks
  it pending) and pushing it on the heap; ``step`` calls its ``callbacks``, sets them to None, and
  re-raises a failed event's exception unless ``_defused`` is set;
- ``Put.__init__`` does nothing a resource of ours needs besides setting ``env``, ``callbacks``
  and ``resource`` and queueing the request (``BaseResource._env`` is the resource's environment).

Events of the engine that belong to a step carry it as ``step`` (``Timer``, ``Signal``, the
requests of ``resources``); nothing else is hung on an event.
"""
from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import Any, cast

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, Event, EventPriority
from simpy.resources.base import Put, ResourceType

# The SimPy versions whose internals this module was checked against (the pin test reads it).
TESTED = frozenset({"4.1.2"})

Callback = Callable[[Any], None]  # SimPy calls an event's callbacks with the event


class Environment(simpy.Environment):
    """SimPy's environment with an integer clock, a faster run loop and an event count."""

    def __init__(self) -> None:
        super().__init__(0)
        self.now_ps = 0  # the clock, in whole picoseconds: the engine schedules nothing in between

    def step(self) -> None:
        """SimPy's ``step`` (``run`` with ``until`` takes it), keeping ``now_ps``."""
        try:
            now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        self._now = self.now_ps = cast(int, now)
        # SimPy types callbacks as a list; a processed event's are None (its own step says so too)
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:
            event.callbacks = callbacks[callbacks.index(callback) + 1:]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def run(self, until: float | Event | None = None) -> Any:
        """SimPy's ``run``. To the end of the schedule (the engine's use), ``step`` is inlined
        in the loop, with the same callback and failure handling: it costs a call per event."""
        if until is not None:
            return super().run(until)
        queue = cast("list[tuple[int, EventPriority, int, Event]]", self._queue)  # whole picoseconds
        pop = heappop
        while queue:
            now, _, _, event = pop(queue)
            self._now = self.now_ps = now
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]  # (as in step)
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
        """Move every scheduled event of ``step``'s (its ``step``) ``delta`` later."""
        queue = self._queue
        for i, (t, prio, eid, event) in enumerate(queue):
            if getattr(event, "step", None) is step:
                queue[i] = (t + delta, prio, eid, event)
        heapify(queue)


class Timer(Event):
    """A timeout at ``at`` that calls ``callback``, made in one call; ``step``: the step whose
    event it is, which ``Environment.shift`` moves with the step's other events (None: none)."""

    step: object

    def __init__(self, env: Environment, at: int, callback: Callback, step: object = None) -> None:
        self.env = env
        self.callbacks = [callback]
        self.step = step
        self._ok = True
        self._value = None
        heappush(env._queue, (at, NORMAL, next(env._eid), self))


class Signal(Event):
    """An event a step triggers itself (``succeed``); ``step`` as a ``Timer``'s."""

    step: object

    def __init__(self, env: Environment, step: object) -> None:
        super().__init__(env)
        self.step = step


class Request(Put[ResourceType]):
    """A ``Put`` made without ``Put.__init__``: a subclass sets ``resource`` and ``callbacks``
    and queues itself, or has itself scheduled at once (``succeed_at``). Until then it is pending
    (SimPy's class default). Its environment is its resource's: it is not stored."""

    # SimPy's Event.env is a plain attribute; a request's is read from its resource instead of
    # being stored on every request, and nothing sets it.
    @property
    def env(self) -> simpy.Environment:  # type: ignore[override]
        return self.resource._env


def succeed_at(env: Environment, event: Event, at: int) -> None:
    """``event.succeed()`` to be processed at ``at`` rather than now: a hold ends when it was
    granted for."""
    event._ok = True
    event._value = None
    heappush(env._queue, (at, NORMAL, next(env._eid), event))

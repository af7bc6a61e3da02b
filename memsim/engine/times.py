"""Which fields of the engine's objects hold absolute times: declared once per class.

Fast-forward skips whole cycles of a step: every field of the step's objects that holds an
absolute time (picoseconds) moves by the time skipped (``Times.shift``), and between chunks it
compares the step's state, which gives those times as offsets from now, so that a state repeats
when the step does (``Times.offsets``). ``StepRun``, ``Chunk``, ``Stores``, ``Use`` and
``Server`` each declare theirs as ``TIMES``; the slotted ones take their ``__slots__`` from it
too, so a time field is named in one place.

A field holds a time, or a tuple, list or dict of times and other values (a ``Cause``), or
None; a value equal to ``unset`` is no time yet and never moves. A field is one of:

- ``compared``: in the state as its offset from now;
- ``ahead``: in the state as the time left until it, 0 once passed (what it decides is over);
- ``moved``: moved, not compared: a time that only measures an interval still open (when
  compute went idle, where a row ends so far) or that the state gives another way (a
  request's status).

Times of the past (when a step started, where its rows begin) do not move.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Times:
    compared: tuple[str, ...] = ()
    ahead: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    unset: int | None = None  # a value that means "not yet" (a request's start and end: -1)

    @property
    def names(self) -> tuple[str, ...]:
        return self.compared + self.ahead + self.moved

    def shift(self, obj: object, delta: int) -> None:
        """Move every time ``obj`` holds ``delta`` later."""
        for name in self.names:
            setattr(obj, name, _later(getattr(obj, name), delta, self.unset))

    def offsets(self, obj: object, now: int) -> list[Any]:
        """``obj``'s compared times as offsets from ``now``, then the time left until each of
        its ``ahead`` ones. (Loops, not comprehensions: fast-forward asks after every chunk.)"""
        out = []
        for name in self.compared:
            value = getattr(obj, name)
            out.append(value - now if type(value) is int else _offset(value, now))
        for name in self.ahead:
            left = getattr(obj, name) - now
            out.append(left if left > 0 else 0)
        return out


def _later(value: Any, delta: int, unset: int | None) -> Any:
    if type(value) is int:  # (not a bool)
        return value if value == unset else value + delta
    if isinstance(value, (tuple, list)):
        return type(value)(_later(v, delta, unset) for v in value)
    if isinstance(value, dict):
        return {k: _later(v, delta, unset) for k, v in value.items()}
    return value  # None, or not a time


def _offset(value: Any, now: int) -> Any:
    if type(value) is int:
        return value - now
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out.append(v - now if type(v) is int else _offset(v, now))
        return tuple(out)
    return value

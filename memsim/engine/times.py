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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Times:
    compared: tuple[str, ...] = ()
    ahead: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    unset: int | None = None  # a value that means "not yet" (a request's start and end: -1)
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)  # all of them
    # offsets(obj, now): obj's compared times as offsets from now, then the time left until each
    # of its ahead ones. shift(obj, delta): move every time obj holds delta later.
    offsets: Callable[[Any, int], tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    shift: Callable[[Any, int], None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = self.compared + self.ahead + self.moved
        if not all(name.isidentifier() for name in names):
            raise ValueError(f"not field names: {names}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "offsets", _compiled("offsets", "now", self._offset_terms()))
        object.__setattr__(self, "shift", _compiled("shift", "delta", [], [self._move(name) for name in names]))

    def _offset_terms(self) -> list[str]:
        return [f"v - now if type(v := obj.{n}) is int else _offset(v, now)" for n in self.compared] + \
            [f"t if (t := obj.{n} - now) > 0 else 0" for n in self.ahead]

    def _move(self, name: str) -> str:
        unset = f" and v != {self.unset}" if self.unset is not None else ""
        return (f"if type(v := obj.{name}) is int{unset}: obj.{name} = v + delta\n"
                f"    elif type(v) is not int and v is not None: obj.{name} = _later(v, delta, {self.unset})")


def _compiled(name: str, arg: str, terms: list[str], statements: list[str] | None = None) -> Any:
    """A function of (obj, arg) that runs ``statements`` or returns the tuple of ``terms``,
    compiled once per declaration (as dataclasses compile ``__init__``): fast-forward compares
    the state of every step it watches after each chunk, and moves whole groups of steps; a
    loop over the names, object by object, cost it a third more."""
    body = "".join(f"    {s}\n" for s in statements or ["pass"]) if statements is not None else \
        f"    return ({''.join(f'({t}), ' for t in terms)})\n"
    namespace: dict[str, Any] = {"_offset": _offset, "_later": _later}
    exec(f"def {name}(obj, {arg}):\n{body}", namespace)
    return namespace[name]


def _later(value: Any, delta: int, unset: int | None) -> Any:
    if type(value) is int:  # (not a bool)
        return value if value == unset else value + delta
    if isinstance(value, (tuple, list)):
        moved = [_later(v, delta, unset) for v in value]
        return moved if type(value) is list else tuple(moved)
    if isinstance(value, dict):
        return {k: _later(v, delta, unset) for k, v in value.items()}
    return value  # None, or not a time


def _offset(value: Any, now: int) -> Any:
    if type(value) is int:
        return value - now
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out.append(v - now if type(v) is int else _offset(v, now) if isinstance(v, (tuple, list)) else v)
        return tuple(out)
    return value

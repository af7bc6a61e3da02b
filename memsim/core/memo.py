"""Work shared inside one scope: a run with its estimates' reruns builds each distinct graph once,
derives each graph's dependencies once, and maps a step once for every rerun that changes nothing
the mapping reads (a stack's work per step is added after the mapping).

``remembered(key, make)`` inside ``shared()`` calls ``make`` the first time ``key`` is asked for and
gives every later caller what it made; outside a scope it always calls ``make``. What is remembered
is never changed once made (graphs, plans and their parts are read-only to everything after them).
A key naming an object by its ``id`` keeps the object in the value, so the id is not reused while
the scope lasts.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

# What was made inside ``shared``: key -> value (None outside one).
_MADE: contextvars.ContextVar[dict[Hashable, Any] | None] = contextvars.ContextVar("memsim_memo", default=None)


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Inside, ``remembered`` makes each key's value once (a scope inside another is the outer one)."""
    if _MADE.get() is not None:
        yield
        return
    token = _MADE.set({})
    try:
        yield
    finally:
        _MADE.reset(token)


def remembered(key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, once a ``key`` inside ``shared``."""
    made = _MADE.get()
    if made is None:
        return make()
    if key not in made:
        made[key] = make()
    return made[key]


def derived(kind: str, of: Any, make: Callable[[Any], T]) -> T:
    """``make(of)``, once an object ``of`` inside ``shared`` (``kind`` names what is derived)."""
    return remembered((kind, id(of)), lambda: (of, make(of)))[1]

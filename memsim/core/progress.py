"""Progress for work that takes more than a moment: a bar on stderr while a terminal watches and
the work has run for ``DELAY`` seconds, nothing otherwise.

The command line turns bars on for a command (``shown``) unless it is given ``--no-progress``; a
call from Python draws none. The work itself only says how much there is and when a piece is done
(``bar``), so a serving run, a run's sensitivity reruns, explain's reruns and a generation's steps
report the same way, and none of them knows whether anyone is watching.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

DELAY = 2.0  # seconds of work before a bar appears: a quick command prints nothing
_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("memsim_progress", default=False)


@contextlib.contextmanager
def shown(enabled: bool = True, terminal: bool | None = None) -> Iterator[None]:
    """Inside, bars are drawn where ``enabled`` and stderr is a terminal (``terminal`` says so in its place)."""
    token = _ON.set(enabled and (sys.stderr.isatty() if terminal is None else terminal))
    try:
        yield
    finally:
        _ON.reset(token)


def on() -> bool:
    """Whether bars are drawn here."""
    return _ON.get()


class _Silent:
    """What ``bar`` gives where nobody watches: it counts and draws nothing."""

    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        return None

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def bar(total: int | None, unit: str, what: str) -> Any:
    """A bar for ``total`` pieces of work (``unit``: what one is), labelled ``what``; use it as a context
    manager and ``update()`` it as each piece is done."""
    if not on():
        return _Silent()
    from tqdm import tqdm  # only where a bar is drawn

    return tqdm(total=total, unit=unit, desc=what, file=sys.stderr, delay=DELAY, leave=False, dynamic_ncols=True,
                mininterval=0.25)

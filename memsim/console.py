"""The ``memsim`` console script: Ctrl-C at any moment, even while the command line's
libraries load, is one line and exit code 130 (``memsim.cli`` does the rest)."""
from __future__ import annotations

import signal
import sys


def entry() -> None:
    try:
        try:
            from memsim.cli import entry as run

            run()
        finally:  # the work is done or being reported: a Ctrl-C from here on is not a traceback either
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        interrupted()
    except Exception as exc:
        if by_interrupt(exc):  # a Ctrl-C inside a class being built while a library loads
            interrupted()
        raise


def by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a Ctrl-C, or because of one (Python wraps an
    exception raised in ``__set_name__``, a ``KeyboardInterrupt`` included, in a ``RuntimeError``)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def interrupted() -> None:
    """One line on stderr, exit code 130 (128 + SIGINT)."""
    try:
        sys.stderr.write("memsim: interrupted\n")
        sys.stderr.flush()
    finally:
        sys.exit(130)

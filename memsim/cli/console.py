"""The ``memsim`` console script: Ctrl-C at any moment, even while the command line's
libraries load, is one line and exit code 130 (``memsim.cli.main`` does the rest)."""
from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn


def exit_on_lost_interrupt(unraisable) -> None:
    """``sys.unraisablehook``: a Ctrl-C that lands where Python cannot raise it (in a weakref
    callback, as importlib's module locks have, or a ``__del__``) would be printed and lost, and
    the command would run on to the end. It ends the command here, as a Ctrl-C raised anywhere
    else would: one line, exit code 130, at once (an output folder is swapped in with the
    signals deferred, so none is left half-written; a temporary one the next run removes).
    Anything else is reported as Python does."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        try:
            sys.stderr.write("memsim: interrupted\n")
            sys.stderr.flush()
        finally:
            os._exit(130)
    sys.__unraisablehook__(unraisable)


_SEEN: list[int] = []  # the Ctrl-Cs this process received (``_on_interrupt``)


def _on_interrupt(signum: int, frame: object) -> None:
    """Python's own SIGINT handler (raise ``KeyboardInterrupt``), which also notes that one came:
    a library that turns it into an error of its own (pandas, when it lands while numpy loads:
    "Unable to import required dependency numpy") loses the chain back to it."""
    _SEEN.append(signum)
    raise KeyboardInterrupt


def entry() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (not where Ctrl-C is ignored)
        signal.signal(signal.SIGINT, _on_interrupt)
    sys.unraisablehook = exit_on_lost_interrupt
    try:
        try:
            from memsim.cli.commands import front

            if front(sys.argv[1:]):  # --help, --version: answered without loading the simulator
                return
            from memsim.cli.main import entry as run

            swallowed()  # a Ctrl-C that a library caught while it loaded
            run()
            swallowed()  # one caught in the run: the command ends as if it had not been
            finished()
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
    exception raised in ``__set_name__``, a ``KeyboardInterrupt`` included, in a ``RuntimeError``),
    or came after one this process received (a library may raise an error of its own instead)."""
    if _SEEN:
        return True
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def swallowed() -> None:
    """A Ctrl-C this process received that a library caught and dropped (a bare ``except:``
    around an import, or an error of its own turned into a fallback) must still end the
    command: one line, exit code 130."""
    if _SEEN:
        raise KeyboardInterrupt


def finished() -> NoReturn:
    """End a command that has finished at once, its output flushed: what it leaves needs no teardown,
    and CPython's, which frees every object of every module loaded, adds a tenth to a quick run's
    wall time (60 ms after ``memsim run``; mypy ends its runs the same way, for the same reason).
    Every file a command writes is closed, and its folders swapped in, before it returns."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader of stdout left (``memsim list hw | head -1``), as the command line says
        os._exit(1)
    os._exit(0)


def interrupted() -> None:
    """One line on stderr, exit code 130 (128 + SIGINT)."""
    try:
        sys.stderr.write("memsim: interrupted\n")
        sys.stderr.flush()
    finally:
        sys.exit(130)

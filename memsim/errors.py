"""User-facing errors: one family, each carrying the file and the field it is about.

The CLI turns any ``MemsimError`` into one line on stderr and exit code 2.
"""
from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import ParamSpec, TypeVar


class MemsimError(Exception):
    """Base of every error caused by user input."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = None if field is None else str(field)  # a YAML key may be a number
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        where = ": ".join(str(part) for part in (self.file, self.field) if part not in (None, ""))
        return f"{where}: {self.message}" if where else self.message


@contextmanager
def about_file(file: str) -> Iterator[None]:
    """An error raised inside that knows its field but not its file (a spec's or an op's own
    checks) is about ``file``."""
    try:
        yield
    except MemsimError as exc:
        exc.file = exc.file or file
        raise


class ConfigError(MemsimError):
    """A hardware, model or command-line value is missing, malformed or impossible."""


class TraceError(MemsimError):
    """A trace file is malformed: bad schema, cyclic or dangling references."""


class CapacityError(MemsimError):
    """The workload cannot be placed: it fits in no memory level, or a tile fits in no SRAM."""


class MemsimWarning(UserWarning):
    """Input that runs but deserves a word (the CLI prints it as one line on stderr)."""


# Whether errors name the command line's flags (``--batch``: the CLI) or keyword arguments
# (``batch``: a Python caller, the default). A Python entry point sets it while it runs, so that
# entry points it calls leave the renaming to it.
_FLAGS = contextvars.ContextVar("memsim_flags", default=False)
_FLAG = re.compile(r"--[a-z][a-z0-9-]*")
P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def flags_named() -> Iterator[None]:
    """Inside, errors name the command line's flags (the CLI runs in it)."""
    token = _FLAGS.set(True)
    try:
        yield
    finally:
        _FLAGS.reset(token)


def keyword_named(names: Mapping[str, str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a Python entry point: a ``MemsimError`` it raises outside ``flags_named`` names
    keyword arguments, each flag in ``names`` (``--batch``) given as its keyword (``batch``)."""
    def as_keywords(text: str) -> str:
        return _FLAG.sub(lambda m: names.get(m.group(0), m.group(0)), text)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _FLAGS.get():  # the command line, or an entry point calling another: the outermost renames
                return fn(*args, **kwargs)
            token = _FLAGS.set(True)
            try:
                return fn(*args, **kwargs)
            except MemsimError as exc:
                exc.field = None if exc.field is None else as_keywords(exc.field)
                exc.message = as_keywords(exc.message)
                exc.args = (exc.message,)
                raise
            finally:
                _FLAGS.reset(token)
        return wrapper
    return decorate

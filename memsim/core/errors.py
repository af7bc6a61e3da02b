"""User-facing errors: one family, each carrying the file and the field it is about.

The CLI turns any ``MemsimError`` into one line on stderr and exit code 2.
"""
from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator
from contextlib import contextmanager

# A run field named in an error (its field, or its text) is marked (``run_field``): the command line
# shows it as its flag (``--batch``), a Python caller as the keyword argument (``batch``). Only
# the CLI knows the flags: ``memsim.run.runspec`` registers those that are not ``--`` and the field's
# name with dashes (``FLAGS``).
MARK = "\x1f"
_RUN = re.compile(f"{MARK}([^{MARK}]*){MARK}")
FLAGS: dict[str, str] = {}
# Whether errors are shown with flags: the CLI runs inside ``flags_named``.
_FLAGS = contextvars.ContextVar("memsim_flags", default=False)


def run_field(name: str) -> str:
    """The run field ``name`` (``batch``, ``draft_k``) as an error names it: as a field, or in its text."""
    return f"{MARK}{name}{MARK}"


def is_run(field: str | None) -> bool:
    """Whether an error's field is a run field (not a file's field such as ``levels[hbm].latency``)."""
    return field is not None and field.startswith(MARK)


def flag(name: str) -> str:
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def shown(text: str, flags: bool | None = None) -> str:
    """``text`` with its run fields as flags (``flags``; None: as the CLI asks) or as keywords."""
    if MARK not in text:
        return text
    flags = _FLAGS.get() if flags is None else flags
    return _RUN.sub(lambda m: flag(m.group(1)) if flags else m.group(1), text)


class MemsimError(Exception):
    """Base of every error caused by user input. ``field`` and ``message`` read as the caller
    names things (``flags_named``); ``raw_field`` and ``raw_message`` keep the marks."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.raw_file = file
        self.raw_field = None if field is None else str(field)  # a YAML key may be a number
        self.raw_message = message
        super().__init__(message)

    @property
    def file(self) -> str | None:  # ``--set`` (``set``) where a value came from the overrides
        return None if self.raw_file is None else shown(self.raw_file)

    @file.setter
    def file(self, value: str | None) -> None:
        self.raw_file = value

    @property
    def field(self) -> str | None:
        return None if self.raw_field is None else shown(self.raw_field)

    @field.setter
    def field(self, value: str | None) -> None:
        self.raw_field = value

    @property
    def message(self) -> str:
        return shown(self.raw_message)

    @message.setter
    def message(self, value: str) -> None:
        self.raw_message = value
        self.args = (value,)

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self, flags: bool | None = None) -> str:
        """The error in one line: its file, its field and its message; run fields as flags
        (``flags``; None: as the caller names them)."""
        file = None if self.raw_file is None else shown(self.raw_file, flags)
        field = None if self.raw_field is None else shown(self.raw_field, flags)
        where = ": ".join(str(part) for part in (file, field) if part not in (None, ""))
        message = shown(self.raw_message, flags)
        return f"{where}: {message}" if where else message


@contextmanager
def about_file(file: str) -> Iterator[None]:
    """An error raised inside that knows its field but not its file (a spec's or an op's own
    checks) is about ``file``."""
    try:
        yield
    except MemsimError as exc:
        exc.raw_file = exc.raw_file or file
        raise


class ConfigError(MemsimError):
    """A hardware, model or command-line value is missing, malformed or impossible."""


class TraceError(MemsimError):
    """A trace file is malformed: bad schema, cyclic or dangling references."""


class CapacityError(MemsimError):
    """The workload cannot be placed: it fits in no memory level, or a tile fits in no SRAM."""


class MemsimWarning(UserWarning):
    """Input that runs but deserves a word (the CLI prints it as one line on stderr)."""

    def __str__(self) -> str:
        return shown(str(self.args[0]) if self.args else "")


@contextmanager
def flags_named() -> Iterator[None]:
    """Inside, errors and warnings name the command line's flags (the CLI runs in it)."""
    token = _FLAGS.set(True)
    try:
        yield
    finally:
        _FLAGS.reset(token)

"""User-facing errors: one family, each carrying the file and the field it is about.

The CLI turns any ``MemsimError`` into one line on stderr and exit code 2.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


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

"""Importers that turn other graph formats into memsim's operator DAG, each an optional extra.

Every importer returns the graph and a report of what it skipped or could not map. Each module
of this package registers its importer in ``IMPORTERS`` with the command line it takes (its
name, help and options); ``memsim import NAME`` is generated from that. An importer's library
is imported only when it runs, so registering one costs nothing where the extra is missing.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim.core.registry import Registry
from memsim.workload.fusion import fuse

if TYPE_CHECKING:
    from memsim.workload.graph import OpGraph


@dataclass
class ImportReport:
    mapped: dict[str, int] = field(default_factory=dict)  # source op type -> count mapped
    dropped: dict[str, int] = field(default_factory=dict)  # no-ops (shape and layout changes)
    unmapped: dict[str, int] = field(default_factory=dict)  # ops memsim has no kind for: skipped
    fused: tuple[int, int] = (0, 0)  # operators before and after ``memsim.workload.fusion`` (0, 0: not fused)

    def note(self, table: dict[str, int], op_type: str) -> None:
        table[op_type] = table.get(op_type, 0) + 1

    def lines(self) -> list[str]:
        fmt = lambda d: ", ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "none"
        out = [f"mapped: {fmt(self.mapped)}", f"dropped as no-ops: {fmt(self.dropped)}",
               f"skipped (not mapped): {fmt(self.unmapped)}"]
        if self.fused != (0, 0):
            out.append(f"fused: {self.fused[0]} operators into {self.fused[1]} kernels (pointwise chains and "
                       "siblings, GEMMs that share their input: memsim.workload.fusion)")
        return out


def fused(graph: OpGraph, report: ImportReport) -> tuple[OpGraph, ImportReport]:
    """``graph`` fused as a serving stack's compiler would (``memsim.workload.fusion``), the
    counts noted in ``report``."""
    out, before = fuse(graph)
    out.validate()
    report.fused = (before, len(out.ops))
    return out, report


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """An input of ``memsim import NAME``, passed to the importer as keyword ``name``: an option
    (``flag``: ``--ranks`` or ``-o/--output``) or, without a flag, a positional argument shown
    as ``metavar``. ``kind``: ``int``, ``str`` or ``Path`` (a file). A value below ``least`` or
    above ``limit`` (``memsim.core.limits``) is refused; ``parse`` turns what was given into what the
    importer takes, raising a ``ConfigError`` on the flag."""
    name: str
    flag: str = ""
    help: str = ""
    kind: type = str
    required: bool = False
    default: Any = None
    multiple: bool = False
    metavar: str | None = None
    least: int | None = None
    limit: int | None = None
    parse: Callable[[Any], Any] | None = None


# The trace file every importer writes; the command line shows it where an importer lists it.
OUTPUT = Option(name="output", flag="-o/--output", help="trace file to write", kind=Path, required=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Importer:
    """``memsim import NAME``: ``help`` (its first sentence is the command's summary), the
    ``options`` it shows in order (``OUTPUT`` among them), ``reads``: the option naming the file
    it reads (the output may not replace it), and ``run``, called with every option but the
    output as keywords."""
    help: str
    options: tuple[Option, ...]
    reads: str
    run: Callable[..., tuple[OpGraph, ImportReport]]


IMPORTERS: Registry[Importer] = Registry("importer", field="import", package=__name__)

"""Importers that turn other graph formats into memsim's operator DAG, each an optional extra.

Every importer returns the graph and a report of what it skipped or could not map.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ImportReport:
    mapped: dict[str, int] = field(default_factory=dict)  # source op type -> count mapped
    dropped: dict[str, int] = field(default_factory=dict)  # no-ops (shape and layout changes)
    unmapped: dict[str, int] = field(default_factory=dict)  # ops memsim has no kind for: skipped

    def note(self, table: dict[str, int], op_type: str) -> None:
        table[op_type] = table.get(op_type, 0) + 1

    def lines(self) -> list[str]:
        fmt = lambda d: ", ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "none"
        return [f"mapped: {fmt(self.mapped)}", f"dropped as no-ops: {fmt(self.dropped)}",
                f"skipped (not mapped): {fmt(self.unmapped)}"]

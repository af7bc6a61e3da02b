"""The recorder: one immutable record per interval, appended as the engine runs."""
from __future__ import annotations

from typing import NamedTuple


class Interval(NamedTuple):
    start_ps: int
    end_ps: int
    chip: str
    resource: str  # compute, or a memory level / link name
    kind: str  # compute | transfer | stall
    op: str
    op_kind: str
    layer: int
    bytes: int
    flops: int
    src: str
    dst: str
    cause: str  # for stalls: a level name, sram_capacity, link:NAME, dependency or overhead
    count: int  # identical intervals this record stands for (>1 for a fast-forwarded run)


class Recorder:
    def __init__(self) -> None:
        self.records: list[Interval] = []
        self.spans: list[tuple[str, int, int]] = []  # (op, start_ps, end_ps)

    def add(self, *fields) -> None:
        if fields[1] > fields[0] or (fields[4] == "transfer" and fields[8]):
            self.records.append(Interval(*fields))

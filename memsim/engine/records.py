"""What the engine records: typed resource identities, stall causes and one flat record per interval.

A ``ResourceId`` names a live resource of the simulated system (the compute units of a chip,
a memory level, a chip's link, a link between chips). A ``Cause`` says why compute was idle.
An ``Interval`` is one immutable record, built by keyword; summaries are pure functions of them.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.hardware.resource import written_name

COMPUTE, LEVEL, LINK, DEQUANT = "compute", "level", "link", "dequant"
SYSTEM = -1  # the chip index of links between chips: they belong to the system

# Stall kinds. WAIT names the resource waited on (a level or link; a contended compute unit),
# and the operator holding it when the wait was contention.
WAIT, TILE_BUFFER, UNPACK, OVERHEAD, DEPENDENCY, BUBBLE, POWER = (
    "wait", "tile_buffer", "dequant", "overhead", "dependency", "bubble", "power")


@dataclass(frozen=True, slots=True)
class ResourceId:
    kind: str  # COMPUTE, LEVEL, LINK or DEQUANT
    chip: int  # SYSTEM for links between chips
    name: str  # a level's or link's name as the chip declares it
    direction: tuple = ()  # a link between chips (or regions): (from, to), a chip number or a switch's node

    def __str__(self) -> str:
        return written_name(self.kind, self.name, self.direction) if self.kind in (LEVEL, LINK) else self.kind


@dataclass(frozen=True, slots=True)
class Cause:
    kind: str  # WAIT, TILE_BUFFER, UNPACK, OVERHEAD, DEPENDENCY, BUBBLE or POWER
    on: str = ""  # for WAIT: the resource waited on, as named in outputs (``hbm``, ``link:pcie``)
    holder: str = ""  # the operator holding it, when the wait was contention

    def __str__(self) -> str:
        return self.on if self.kind == WAIT else self.kind

    @classmethod
    def wait(cls, on: object, holder: str = "") -> Cause:
        return cls(WAIT, str(on), holder)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What one level or link did over a run: the bytes it read and wrote and the time it was
    held (``busy_ps``), replayed and fast-forwarded work included. ``shared``: the regions of its
    chip share it (a layer-pipelined chip's off-chip memory), so it is the chip's, not its
    region's (``resource.chip`` then names the chip's first region)."""
    resource: ResourceId
    read: int
    written: int
    busy_ps: int
    shared: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    start_ps: int
    end_ps: int
    chip: int
    resource: ResourceId
    kind: str  # compute | dequant | transfer | stall
    op: str
    op_kind: str
    layer: int
    bytes: int = 0
    flops: int = 0
    src: str = ""
    dst: str = ""
    cause: Cause | None = None  # for stalls
    count: int = 1  # chunk intervals this record stands for (a step's chunks are aggregated); bytes and flops are totals
    stream: str = "compute"
    energy_fj: int = 0  # dynamic energy of the work (compute: its FLOPs; dequant: unpacking; transfer: its bits)

    def moved(self, start_ps: int, chip: int, op: str, layer: int) -> Interval:
        """This record of a remembered task, for a task that runs the same from ``start_ps``
        (its times are relative to the remembered task's start) on ``chip``."""
        return Interval(start_ps=self.start_ps + start_ps, end_ps=self.end_ps + start_ps, chip=chip,
                        resource=self.resource, kind=self.kind, op=op, op_kind=self.op_kind, layer=layer,
                        bytes=self.bytes, flops=self.flops, src=self.src, dst=self.dst, cause=self.cause,
                        count=self.count, stream=self.stream, energy_fj=self.energy_fj)


def keep(r: Interval) -> bool:
    """Empty intervals are dropped, and so are transfers that carried no bytes; a transfer that
    carried bytes in no time is kept."""
    if r.kind == "transfer":
        return r.bytes > 0
    return r.end_ps > r.start_ps

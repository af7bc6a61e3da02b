"""What the engine records: stall causes and one flat record per interval.

Resources are named by their typed identity (``memsim.hardware.resource.ResourceId``: the
compute units of a chip, a memory level, a chip's link, a link between chips). A ``Cause`` says
why compute was idle: a kind, and for a wait the resource waited on and the operator holding it.
An ``Interval`` is one immutable record, built by keyword; summaries are pure functions of them.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from memsim.hardware.resource import ResourceId

# What an interval's ``kind`` and a task's default stream say (the compute units'; dequantising).
COMPUTE, DEQUANT = "compute", "dequant"


class CauseKind(enum.Enum):
    WAIT = "wait"  # for a resource: a level or link, or compute units another operator held
    TILE_BUFFER = "tile_buffer"  # for a free tile buffer (one of ``execution.prefetch_depth``)
    UNPACK = "dequant"  # for loaded weights to be dequantised
    OVERHEAD = "overhead"  # an operator's launch
    DEPENDENCY = "dependency"  # for an operator of another stream
    BUBBLE = "bubble"  # for the previous pipeline stage
    POWER = "power"  # compute slowed by the clock the power cap lowered
    HOST = "host"  # for the host: its launch calls, its work before and after the step (the stack's)
    LIBRARY = "collective_library"  # for a collective library's fixed cost of a call (the stack's)


WAIT, TILE_BUFFER, UNPACK, OVERHEAD, DEPENDENCY, BUBBLE, POWER, HOST, LIBRARY = CauseKind


@dataclass(frozen=True, slots=True)
class Cause:
    kind: CauseKind
    on: ResourceId | None = None  # for WAIT: the resource waited on
    holder: str = ""  # the operator holding it, when the wait was contention
    # Causes key a step's stall accounts, chunk by chunk: their hash is worked out once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.kind, self.on, self.holder)))

    def __hash__(self) -> int:
        return self._hash

    # Rebuilt where unpickled: a string's hash differs between processes.
    def __reduce__(self) -> tuple[type[Cause], tuple[CauseKind, ResourceId | None, str]]:
        return Cause, (self.kind, self.on, self.holder)

    def __str__(self) -> str:
        """The cause as outputs name it: the resource waited on, or the kind."""
        return str(self.on) if self.kind is WAIT and self.on is not None else self.kind.value

    @property
    def order(self) -> tuple[str, str, str]:
        """Causes in the order outputs list them: by the names they are written with."""
        return (self.kind.value, str(self.on) if self.on is not None else "", self.holder)


# The causes of a kind alone, one object each: a stall's cause keys the engine's accounts and the
# writers' tables, and a dictionary finds the very object it holds without comparing fields.
BUBBLE_CAUSE, DEPENDENCY_CAUSE, OVERHEAD_CAUSE, HOST_CAUSE, LIBRARY_CAUSE = (
    Cause(kind) for kind in (BUBBLE, DEPENDENCY, OVERHEAD, HOST, LIBRARY))


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
    # A transfer row spans its first chunk's start to its last chunk's end, and rows on one
    # resource may overlap (steps of concurrent streams); this is the time its transfers held
    # the resource, exactly: they add up to the resource's busy time.
    busy_ps: int = 0

    def moved(self, start_ps: int, chip: int, op: str, layer: int, resource: ResourceId | None = None) -> Interval:
        """This record ``start_ps`` later (a remembered task's records are relative to its start),
        for ``op`` of ``layer`` on ``chip`` (and ``resource``: its counterpart there)."""
        return _moved(self, start_ps, chip, op, layer, self.resource if resource is None else resource)


def _compile_moved() -> Callable[[Interval, int, int, str, int, ResourceId], Interval]:
    """``Interval.moved``'s copy, compiled once from the declared fields (as dataclasses compile
    ``__init__``): a replayed task copies every record of the task it repeats, and a copy that
    sets each slot directly costs half of one through the frozen ``__init__``."""
    given = {"start_ps": "self.start_ps + start_ps", "end_ps": "self.end_ps + start_ps", "chip": "chip",
             "op": "op", "layer": "layer", "resource": "resource"}
    names = [f.name for f in fields(Interval)]
    setters = {f"_set_{name}": getattr(Interval, name).__set__ for name in names}
    body = "".join(f"    _set_{name}(new, {given.get(name, 'self.' + name)})\n" for name in names)
    source = (f"def moved(self, start_ps, chip, op, layer, resource, *, _new=object.__new__, _cls=Interval, "
              f"{', '.join(f'{k}={k}' for k in setters)}):\n    new = _new(_cls)\n{body}    return new\n")
    space = {"Interval": Interval, **setters}
    exec(source, space)
    return space["moved"]


_moved = _compile_moved()


def keep(r: Interval) -> bool:
    """Empty intervals are dropped, and so are transfers that carried no bytes; a transfer that
    carried bytes in no time is kept."""
    if r.kind == "transfer":
        return r.bytes > 0
    return r.end_ps > r.start_ps

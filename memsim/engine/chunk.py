"""The pieces a step's pipeline (``engine/pipeline.py``) is made of: the levels it reads and
writes (``Port``), the chunks in flight from their loads to their compute (``Chunk``) and the
stores of a chunk's output (``Stores``). Each is a small slotted record the pipeline updates
in place, chunk by chunk, and declares which of its fields hold times (``engine/times.py``).
``widen`` keeps where the step's transfer rows begin and end; ``servers`` and ``footprint`` say what
a step's resources are.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from simpy.events import Event

from memsim.engine.records import POWER, TILE_BUFFER, UNPACK, Cause
from memsim.engine.resources import Server, Use
from memsim.engine.times import Times
from memsim.hardware.rates import Share

if TYPE_CHECKING:
    from memsim.engine.pipeline import StepRun

# A step's stalls are kept by ``Cause``; a holder is named where a load or compute queued behind
# another operator.
BUFFERS = Cause(TILE_BUFFER)
UNPACKING = Cause(UNPACK)
THROTTLED = Cause(POWER)  # compute slowed under the power cap


class Port:
    """A level (or link) a step loads from or stores to, and what one chunk's transfer holds:
    its share of the step's transfer, ``total`` bytes over ``count`` chunks. The whole transfer
    holds a level for total / (the rate its share of the channels gives, ``hardware/rates``),
    and the link it is reached over (``via``) at the link's own rate; a chunk holds it for that
    time over ``count``, rounded up. (Rounding each chunk's bytes to whole bytes per channel
    first would charge a small chunk up to a byte per channel more than its share: an artefact
    of the cut, not of the level.)"""

    __slots__ = ("server", "via", "hold", "via_hold", "name", "key", "via_key", "latency_ps")

    def __init__(self, server: Server, total: int, count: int, share: Share, latency_ps: int = 0) -> None:
        self.server = server
        self.via = via = server.via  # the link it is reached over, if any
        self.hold = -(-server.duration(total, share) // count)
        self.via_hold = -(-via.duration(total) // count) if via is not None else 0
        self.name = str(server.rid)
        self.key = server.waited()  # the stall of waiting for it
        self.via_key = via.waited() if via is not None else self.key
        self.latency_ps = latency_ps or server.latency_ps  # a step may name its own (a fabric traversal)


class Chunk:
    """A chunk in flight, from its loads' request to its compute. Its callbacks (``loaded``,
    ``landing``, ``unpacked``) carry it to its step: nothing is hung on the events."""

    TIMES = Times(compared=("issued", "landed"))
    __slots__ = (*TIMES.names, "run", "index", "transfers", "drain", "writer", "left", "source", "held", "ready")

    def __init__(self, run: StepRun, index: int, issued: int, drain: int, writer: Cause) -> None:
        self.run = run
        self.index = index
        # per load: (use, via use or None, idle before issue, port); (None, None, ...) until requested
        self.transfers: list[tuple[Use | None, Use | None, int, Port]] = []
        self.issued = issued  # when its loads were requested
        self.drain = drain  # of its wait for a buffer, the part a store still drained it
        self.writer = writer  # the stall key of that store's level
        self.left = 0  # requests not yet finished
        self.landed = issued  # when its last load arrived, latency included
        # The stall of the level (or link) that arrived last; before any arrived (a chunk with no
        # loads), the wait before its issue was for a free tile buffer.
        self.source = BUFFERS
        self.held = 0  # that load's wait for a buffer while its level was idle
        self.ready = False  # landed (and, with dequantisation, unpacked)

    # The callbacks of its events. A request's callbacks are dropped once it has been processed,
    # so no reference cycle outlives the chunk's loads: chunks and their requests are freed at
    # once rather than by the cyclic GC every few dozen chunks.
    def loaded(self, _use: Use) -> None:
        """One of its loads (or the link it came over) finished; the last one has it arrive."""
        self.left -= 1
        if not self.left:
            self.run.arrived(self)

    def landing(self, _event: Event) -> None:
        self.run.land(self)

    def unpacked(self, _event: Event) -> None:
        self.run.unpacked(self)


class Stores:
    """The stores of one chunk's output; its buffer is free when the last has drained."""

    TIMES = Times(compared=("computed",))
    __slots__ = (*TIMES.names, "run", "index", "uses", "left")

    def __init__(self, run: StepRun, index: int, computed: int) -> None:
        self.run = run
        self.index = index
        self.uses: list[tuple[Use, Use | None, Port]] = []  # per store: (use, via use or None, port)
        self.computed = computed
        self.left = 0  # requests not yet finished

    def stored(self, _use: Use) -> None:
        """One of its stores (or the link it went over) finished; after the last, its buffer is free."""
        self.left -= 1
        if not self.left:
            self.run.drained(self)


Row = tuple[int, bool, bool]  # a step's transfer row: (port index, is a load, on the link it is reached over)


def widen(begins: dict[Row, int], ends: dict[Row, int], transfers: list[tuple[Use | None, Use | None]],
          load: bool) -> None:
    """The first and last chunks' transfers (of ``Chunk.transfers`` or ``Stores.uses``: per
    port, its request and its link's) widen each level's row, and the row of the link it is
    reached over: where it begins (the first start) and ends (the latest end)."""
    for i, (use, via) in enumerate(transfers):
        for key, u in (((i, load, False), use), ((i, load, True), via)):
            if u is None:
                continue
            if key not in begins:
                begins[key], ends[key] = u.start, u.end
            elif u.end > ends[key]:
                ends[key] = u.end


def footprint(runs: list) -> list[Server]:
    """The resources of steps (``StepRun.servers``), each once, in a fixed order."""
    return list({id(s): s for run in runs for s in run.servers}.values())


def servers(compute: Server | None, ports: list[Port]) -> list[Server]:
    """The resources a step uses: its compute units if it computes, each level and link."""
    out = {id(compute): compute} if compute is not None else {}
    for port in ports:
        out[id(port.server)] = port.server
        if port.server.via is not None:
            out[id(port.server.via)] = port.server.via
    return list(out.values())

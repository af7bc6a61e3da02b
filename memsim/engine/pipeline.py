"""One step on one chip: loads stream ahead of compute through SRAM buffers, chunk by chunk.

The step is a small state machine driven by SimPy event callbacks (a callback is cheaper
than a process):

- the *loader* takes a free tile buffer (``depth`` of them), requests the chunk's loads from
  the levels it reads (``Server`` resources shared with every other task on the chip) and
  asks for the next buffer. With a weight-only format it first dequantises the chunk that
  just landed, so unpacking is serial with the weight stream;
- the *compute* side takes the oldest chunk that has arrived, holds the compute units for the
  chunk's compute time, requests the stores of its output share, and frees the buffer once
  they have drained.

Every idle moment of compute between the step's start and its end gets a cause. Intervals
are aggregated as the chunks run (busy time, stall time per cause, bytes and the span of
each level's row) and recorded when the step ends.

This is the plain pipeline. A step has an ``observer`` only when fast-forward is on
(``engine/shortcuts.py`` gives it): it is called after each chunk, and may skip cycles; only
then are a chunk's stalls kept apart from the step's (``chunk_stalls``) for it to compare. The
fields that hold times are declared once (``StepRun.TIMES``, ``engine/times.py``), for it to
move and compare them.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Generator
from functools import partial
from typing import Protocol

from simpy.events import Event

from memsim.engine.chunk import BUFFERS, THROTTLED, UNPACKING, Chunk, Port, Row, Stores, servers, widen
from memsim.engine.records import Cause
from memsim.engine.resources import ChipResources, Job, Server, Use
from memsim.engine.simpy_fast import Environment, Signal, Timer
from memsim.engine.times import Times
from memsim.mapping.plan import OpTask, Step


class Observer(Protocol):
    """What watches a step chunk by chunk (fast-forward's ``FastForward``)."""

    def __call__(self, run: StepRun) -> int:
        """Called as a chunk's compute ends: how long the step may sleep, having skipped
        the chunks of that time (0: none)."""

    def reset(self) -> None:
        """Forget what was observed (another observer skipped this step's cycles)."""


class StepRun:
    """The state of one step on one chip."""

    # The fields that hold times fast-forward moves: the loader's wait (when it asked, and when
    # its levels were free), the latest buffer freed (its chunk's compute end, when), when its
    # latest chunk is unpacked and its latest store drained, when compute went idle, and where
    # its transfer rows end so far (a chunk in flight across a skip may be its last).
    TIMES = Times(compared=("waiting", "freed_computed", "freed_at"), ahead=("unpacking", "last_store"),
                  moved=("idle_since", "last_compute", "row_ends"))
    # Slotted: the per-chunk callbacks read and write these attributes all the time.
    __slots__ = (*TIMES.names, "env", "res", "task", "step", "job", "priority", "observer", "count", "loads",
                 "stores", "load_servers", "load_totals", "store_totals", "load_dst", "store_src", "free_buffers",
                 "pending", "outstanding", "issued", "consumed", "computing", "freed_by", "store_level",
                 "finished", "started", "busy_ps", "unpack_ps", "first_unpack", "stalls", "chunk_stalls",
                 "row_begins", "on_compute", "servers")

    def __init__(self, env: Environment, res: ChipResources, task: OpTask, step: Step, job: Job,
                 priority: int, observer: Observer | None = None) -> None:
        self.env, self.res, self.task, self.step = env, res, task, step
        self.job = job  # the owner of every request the step makes
        self.priority = priority
        self.observer = observer
        self.count = step.count
        self.loads = [Port(res.ports[ref], n, step.count, step.share, step.latency_ps)
                      for ref, n in step.total_loads]
        self.stores = [Port(res.ports[ref], n, step.count, step.share) for ref, n in step.total_stores]
        self.load_servers = [p.server for p in self.loads]
        self.load_totals = [b for _, b in step.total_loads]
        self.store_totals = [b for _, b in step.total_stores]
        # A direct copy (DMA staging) shows as level-to-level transfers; otherwise via the scratchpad.
        self.load_dst = self.stores[0].name if step.direct and self.stores else res.scratchpad
        self.store_src = self.loads[0].name if step.direct and self.loads else res.scratchpad
        self.free_buffers = step.depth
        self.pending: deque[Chunk] = deque()  # issued chunks that compute has not taken yet
        self.outstanding: deque[Stores] = deque()  # stores not yet drained
        self.issued = 0
        self.consumed = 0
        self.computing = False
        self.waiting: tuple[int, list[int]] | None = None  # loader: (asked, levels' free times)
        self.unpacking = 0  # when the loader finishes dequantising its latest chunk
        # The latest buffer freed: when its chunk's compute ended, when it was freed, and the stall
        # key of the store that drained it last.
        self.freed_computed, self.freed_at, self.freed_by = 0, 0, BUFFERS
        self.last_store = 0  # when the latest store has drained, latency included
        self.store_level: Cause | None = None  # the wait for the level (or link) of the latest store
        self.finished = Signal(env, self)
        # Aggregates, recorded when the step ends.
        self.started = self.idle_since = env.now_ps
        self.last_compute = env.now_ps
        self.busy_ps = 0
        self.unpack_ps = 0
        self.first_unpack = -1
        self.stalls: dict[Cause, int] = {}  # cause -> ps
        # The latest chunk's, apart only for an observer to compare; else the step's own.
        self.chunk_stalls: dict[Cause, int] = {} if observer is not None else self.stalls
        self.row_begins: dict[Row, int] = {}  # per transfer row: its first chunk's start
        self.row_ends: dict[Row, int] = {}  # and its latest end
        self.on_compute = self._computed  # the callback of its compute requests, bound once
        self.servers = servers(res.compute if step.compute_ps else None, self.loads + self.stores)  # never changes

    def run(self) -> Generator[Event, object, None]:
        """The step as a SimPy process: start the loader and wait until the last store drained."""
        self._ask()
        yield self.finished

    # -- the loader ------------------------------------------------------------------------
    def _ask(self) -> None:
        """The loader asks for a tile buffer; it takes one at once if one is free."""
        while self.issued < self.count:
            waiting = self.waiting = (self.env.now_ps, [s.free_at for s in self.load_servers])
            if not self.free_buffers:
                return  # the loader takes the next buffer freed (``_free``)
            if not self._issue(waiting):
                return  # dequantising: the loader asks again once the chunk is unpacked
        self.waiting = None

    def _issue(self, waiting: tuple[int, list[int]]) -> bool:
        """Take a buffer and request the next chunk's loads, the loader having asked for it
        (``waiting``: when, and when each level it loads from was free); True if it may go on."""
        env = self.env
        now = env.now_ps
        asked, frees = waiting
        self.waiting = None
        self.free_buffers -= 1
        computed, freed, writer = self.freed_computed, self.freed_at, self.freed_by
        # Of the wait for a buffer, the part after its chunk's compute ended, while a slow
        # store still drained it, is that store's fault; the rest is SRAM capacity's.
        # (max and min are spelt out on the per-chunk path: the builtins cost a call each.)
        drain = 0
        if now > asked:
            drain = freed - (asked if asked > computed else computed)
            if drain < 0:
                drain = 0
        chunk = Chunk(self, self.issued, now, drain, writer)
        transfers, job, prio, on_load = chunk.transfers, self.job, self.priority, chunk.loaded
        # A stream of requests pays a level's latency once, before its first bytes arrive: a
        # request the step makes within that time goes out when it is over (it holds neither the
        # level, which another stream may use meanwhile, nor more than its buffer), and later
        # ones were issued ahead, so their data lands as their transfer ends. How a step's bytes
        # split between levels, or how finely it is cut, then never changes what latency costs.
        late = self.started - now
        for i, port in enumerate(self.loads):
            # Waiting for a buffer after the level could have taken the load is SRAM
            # capacity's fault; waiting behind busy channels is the level's.
            free = frees[i]
            idle = now - (asked if asked > free else free)
            chunk.left += 1 if port.via is None else 2
            if late + port.latency_ps > 0:
                transfers.append((None, None, idle, port))
                Timer(env, now + late + port.latency_ps, partial(self._request, chunk, i), self)
                continue
            use = Use(port.server, port.hold, job, prio, on_load, self)
            via = Use(port.via, port.via_hold, job, prio, on_load, self) if port.via is not None else None
            transfers.append((use, via, idle, port))
        self.issued += 1
        self.pending.append(chunk)
        if not chunk.left:
            self.arrived(chunk)
        return not self.step.unpack_ps

    def _request(self, chunk: Chunk, i: int, _event: Event) -> None:
        """A level's latency is over: the load the step asked it for goes out (as in ``_issue``)."""
        _, _, idle, port = chunk.transfers[i]
        job, prio, on_load = self.job, self.priority, chunk.loaded
        use = Use(port.server, port.hold, job, prio, on_load, self)
        via = Use(port.via, port.via_hold, job, prio, on_load, self) if port.via is not None else None
        chunk.transfers[i] = (use, via, idle, port)

    def arrived(self, chunk: Chunk) -> None:
        """All of a chunk's loads are done: when did it land, and which level was last?"""
        first = chunk.index == 0
        for use, via, idle, port in chunk.transfers:
            assert use is not None  # every load of a chunk that arrived was requested
            end, limiter, last = use.end, port.key, use.resource
            if via is not None and via.end > end:  # the link it is reached over ended last
                end, limiter, last = via.end, port.via_key, via.resource
            if end > chunk.landed:
                # A load that queued behind another operator's transfer names it as the holder.
                if use.blocker is not None:
                    limiter = last.waited(use.blocker.op)
                chunk.landed, chunk.source, chunk.held = end, limiter, idle if idle > 0 else 0
        if first or chunk.index == self.count - 1:
            widen(self.row_begins, self.row_ends, [(use, via) for use, via, _, _ in chunk.transfers], True)
        if chunk.landed > self.env.now_ps:
            Timer(self.env, chunk.landed, chunk.landing, self)
        elif not self.step.unpack_ps:  # ready now (``land``'s usual case, inlined)
            chunk.ready = True
            self._compute()
        else:
            self.land(chunk)

    def land(self, chunk: Chunk) -> None:
        """A chunk's data is in SRAM: it is ready, or is dequantised first."""
        unpack = self.step.unpack_ps
        if not unpack:
            chunk.ready = True
            self._compute()
            return
        now = self.env.now_ps
        if self.first_unpack < 0:
            self.first_unpack = now
        self.unpack_ps += unpack
        self.unpacking = now + unpack
        Timer(self.env, now + unpack, chunk.unpacked, self)

    def unpacked(self, chunk: Chunk) -> None:
        chunk.ready = True
        self._ask()
        self._compute()

    def _free(self, writer: Cause, computed: int) -> None:
        """A chunk's buffer is free: it goes to the loader if the loader waits for one."""
        self.freed_computed, self.freed_at, self.freed_by = computed, self.env.now_ps, writer
        self.free_buffers += 1
        waiting = self.waiting
        if waiting is None:
            return
        if self.issued >= self.count:  # fast-forward skipped the chunks it waited for
            self.waiting = None
        elif self._issue(waiting):
            self._ask()

    # -- compute ----------------------------------------------------------------------------
    def _compute(self) -> None:
        """Start the oldest chunk if it has arrived and the step is not computing."""
        pending = self.pending
        if self.computing or not pending or not pending[0].ready:
            return
        chunk = pending.popleft()
        now, t0 = self.env.now_ps, self.idle_since
        # The chunk's stalls: an observer compares them chunk by chunk; without one they go
        # straight into the step's (``chunk_stalls`` is ``stalls``).
        if self.observer is not None:
            self.chunk_stalls = {}
        stall = self.chunk_stalls
        if now > t0:
            # The wait splits into: no free buffer (SRAM capacity, or a store still draining
            # it), data in transit, then dequantisation. Keys may coincide, hence the sums.
            wait, held, drain = now - t0, chunk.held, chunk.drain
            capacity = held if held < wait else wait
            draining = drain if drain < capacity else capacity
            unpack = now - chunk.landed
            if unpack > wait - capacity:
                unpack = wait - capacity
            transit = wait - capacity - unpack
            if capacity > draining:
                stall[BUFFERS] = stall.get(BUFFERS, 0) + capacity - draining
            if draining > 0:
                stall[chunk.writer] = stall.get(chunk.writer, 0) + draining
            if transit > 0:
                stall[chunk.source] = stall.get(chunk.source, 0) + transit
            if unpack > 0:
                stall[UNPACKING] = stall.get(UNPACKING, 0) + unpack
        self.computing = True
        if not self.step.compute_ps:  # a copy: nothing to compute
            self._computed(None)
            return
        Use(self.res.compute, self.step.compute_ps, self.job, self.priority, self.on_compute, self)

    def _computed(self, use: Use | None) -> None:
        now = self.env.now_ps
        stall, step = self.chunk_stalls, self.step
        if use is not None and use.start > use.requested:  # another task held the compute units
            key = self.res.compute.waited(use.blocker.op if use.blocker is not None else "")
            stall[key] = stall.get(key, 0) + use.start - use.requested
        if step.throttle_ps:  # the part of the compute time the power cap added
            stall[THROTTLED] = stall.get(THROTTLED, 0) + step.throttle_ps
        if step.feed_ps:  # the part the matrix units waited for operands from SRAM
            stall[self.res.feeding] = stall.get(self.res.feeding, 0) + step.feed_ps
        stalls = self.stalls
        if stall is not stalls:
            for key, ps in stall.items():
                stalls[key] = stalls.get(key, 0) + ps
        self.busy_ps += step.compute_ps - step.throttle_ps - step.feed_ps
        self.computing = False
        self._store(now)
        self.consumed += 1
        self.idle_since = self.last_compute = now
        if self.consumed == self.count:
            self._drain()
            return
        skip = self.observer(self) if self.observer is not None else 0
        if skip:  # fast-forwarded: the skipped chunks run until then
            Timer(self.env, now + skip, self._resume, self)
        elif self.pending and self.pending[0].ready:  # (usually the next chunk is still in transit)
            self._compute()

    def _resume(self, _event: Event) -> None:
        self._compute()

    def _store(self, now: int) -> None:
        if not self.stores:
            self._free(BUFFERS, now)
            return
        batch = Stores(self, self.consumed, now)
        uses, job, prio, on_store = batch.uses, self.job, self.priority, batch.stored
        for port in self.stores:
            use = Use(port.server, port.hold, job, prio, on_store, self, True)
            via = None
            if port.via is not None:
                via = Use(port.via, port.via_hold, job, prio, on_store, self, True)
                batch.left += 1
            uses.append((use, via, port))
        batch.left += len(uses)
        self.outstanding.append(batch)

    def drained(self, batch: Stores) -> None:
        """All of a chunk's stores (and their links) finished: its buffer is free."""
        written, writer = batch.computed, BUFFERS
        for use, via, port in batch.uses:
            end, limiter = use.end, port.key
            if via is not None and via.end > end:  # the link it is reached over ended last
                end, limiter = via.end, port.via_key
            if end > written:
                written, writer = end, limiter
            end += port.latency_ps
            if end > self.last_store:
                self.last_store, self.store_level = end, port.key
        if batch.index == 0 or batch.index == self.count - 1:
            widen(self.row_begins, self.row_ends, [(use, via) for use, via, _ in batch.uses], False)
        self.outstanding.remove(batch)
        self._free(writer, batch.computed)
        if self.consumed == self.count:
            self._drain()

    def _drain(self) -> None:
        """After the last chunk: wait for the stores still draining, latency included."""
        if self.outstanding or self.finished.triggered:
            return
        if self.last_store > self.env.now_ps:
            Timer(self.env, self.last_store, self._finish, self)
        else:
            self._finish()

    def _finish(self, _event: Event | None = None) -> None:
        now = self.env.now_ps
        if now > self.last_compute and self.store_level is not None:
            key = self.store_level
            self.stalls[key] = self.stalls.get(key, 0) + now - self.last_compute
        # Bytes are counted exactly once the step is done (chunk sizes are rounded up for timing).
        for port, total in zip(self.loads, self.load_totals):
            port.server.count(total, True, self.job)
        for port, total in zip(self.stores, self.store_totals):
            port.server.count(total, False, self.job)
        self.finished.succeed()

    # -- what the scheduler and fast-forward read ----------------------------------------------
    def footprint(self) -> list[Server]:
        """The resources this step uses (its compute units if it computes, each level and link)."""
        return self.servers

    @property
    def key(self) -> tuple[int, str]:
        """The stream the step runs on: (chip or region, stream name)."""
        return self.job.chip, self.job.stream

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
are aggregated as the chunks run (busy time, stall time per cause, bytes and extent per
level) and recorded when the step ends. Fast-forward (``engine/fastforward.py``) observes
the step after each chunk through ``observer``; ``state`` is the one place that says what
decides the step's future.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

import simpy

from memsim.engine.records import COMPUTE, SRAM_CAPACITY, UNPACK, WAIT
from memsim.engine.resources import PREFETCH, ChipResources, Job, Server, Use
from memsim.mapping.plan import OpTask, Step

CAPACITY = (SRAM_CAPACITY, "")  # stall keys are (kind, resource) pairs until the step ends
UNPACKING = (UNPACK, "")


class Chunk:
    __slots__ = ("index", "transfers", "issued", "drain", "writer", "left", "landed", "source", "held", "ready")

    def __init__(self, index: int, transfers: list, issued: int, drain: int, writer: tuple[str, str]) -> None:
        self.index = index
        self.transfers = transfers  # per load: (use, via use or None, idle before issue, load index)
        self.issued = issued  # when its loads were requested
        self.drain = drain  # of its wait for a buffer, the part a store still drained it
        self.writer = writer  # the stall key of that store's level
        self.left = 0  # requests not yet finished
        self.landed = issued  # when its last load arrived, latency included
        self.source = (WAIT, "sram", "")  # the stall key of the level (or link) that arrived last
        self.held = 0  # that load's wait for a buffer while its level was idle
        self.ready = False  # landed (and, with dequantisation, unpacked)


class Stores:
    """The stores of one chunk's output; its buffer is free when the last has drained."""

    __slots__ = ("index", "uses", "computed", "left")

    def __init__(self, index: int, uses: list, computed: int) -> None:
        self.index = index
        self.uses = uses  # (use, via use or None, store index)
        self.computed = computed
        self.left = len(uses) + sum(1 for u in uses if u[1] is not None)


def status(use: Use | None, now: int) -> tuple:
    """A request's state relative to now: done, granted with time left, or queued."""
    if use is None:
        return ()
    if use.end < 0:
        return ("queued", use.duration, use.resource.put_queue.index(use))
    return ("held", use.end - now) if use.end > now else ("done",)


class StepRun:
    """The state of one step on one chip."""

    def __init__(self, env: simpy.Environment, res: ChipResources, task: OpTask, step: Step, job: Job,
                 priority: int, observer: Callable[["StepRun"], int] | None = None) -> None:
        self.env, self.res, self.task, self.step = env, res, task, step
        self.job = job  # the owner of every request the step makes
        self.priority = priority
        self.observer = observer
        # Per load and store: (server, its hold per chunk, the hold of the link it is reached
        # over, stall key, name); a transfer of n bytes holds a level for ceil(n / width) / rate.
        self.loads = [_port(res.ports[ref], n, step.share) for ref, n in step.loads]
        self.stores = [_port(res.ports[ref], n, step.share) for ref, n in step.stores]
        self.load_totals = [b for _, b in step.total_loads]
        self.store_totals = [b for _, b in step.total_stores]
        # A direct copy (DMA staging) shows as level-to-level transfers; otherwise via SRAM.
        self.load_dst = self.stores[0][4] if step.direct and self.stores else "sram"
        self.store_src = self.loads[0][4] if step.direct and self.loads else "sram"
        self.free_buffers = step.depth
        self.pending: deque[Chunk] = deque()  # issued chunks that compute has not taken yet
        self.outstanding: deque[Stores] = deque()  # stores not yet drained
        self.issued = 0
        self.consumed = 0
        self.computing = False
        self.waiting: tuple[int, tuple[int, ...]] | None = None  # loader: (asked, levels' free times)
        self.unpacking = 0  # when the loader finishes dequantising its latest chunk
        self.released = (0, 0, CAPACITY)  # latest buffer freed: (compute end, freed at, writer's key)
        self.last_store = 0  # when the latest store has drained, latency included
        self.store_level = ""
        self.finished = self._own(env.event())
        # Aggregates, recorded when the step ends.
        self.started = self.idle_since = env._now
        self.last_compute = env._now
        self.busy_ps = 0
        self.unpack_ps = 0
        self.first_unpack = -1
        self.stalls: dict[tuple[str, str, str], int] = {}  # (kind, resource, holder) -> ps
        self.chunk_stalls: dict[tuple[str, str, str], int] = {}  # the latest chunk's, for fast-forward
        self.extent: dict[tuple[int, bool], list[int]] = {}  # (index, is load) -> [first start, last end]

    def _own(self, event):
        """Tag an event as this step's, so fast-forward can move it."""
        event.step = self
        return event

    def _later(self, delay: int, callback) -> None:
        ev = self._own(self.env.timeout(delay))
        ev.callbacks.append(callback)

    def run(self):
        """The step as a SimPy process: start the loader and wait until the last store drained."""
        self._ask()
        yield self.finished

    # -- the loader ------------------------------------------------------------------------
    def _ask(self) -> None:
        """The loader asks for a tile buffer; it takes one at once if one is free."""
        while self.issued < self.step.count:
            self.waiting = (self.env._now, tuple(p[0].free_at for p in self.loads))
            if not self.free_buffers:
                return  # the loader takes the next buffer freed (``_free``)
            if not self._issue():
                return  # dequantising: the loader asks again once the chunk is unpacked
        self.waiting = None

    def _issue(self) -> bool:
        """Take a buffer and request the next chunk's loads; True if the loader may go on."""
        now = self.env._now
        asked, frees = self.waiting
        self.waiting = None
        self.free_buffers -= 1
        computed, freed, writer = self.released
        # Of the wait for a buffer, the part after its chunk's compute ended, while a slow
        # store still drained it, is that store's fault; the rest is SRAM capacity's.
        drain = max(0, freed - max(asked, computed)) if now > asked else 0
        chunk = Chunk(self.issued, [], now, drain, writer)
        job, prio, on_load = self.job, self.priority, self._loaded
        for i, (port, hold, via_hold, _, _) in enumerate(self.loads):
            use = port.request(hold, job, prio)
            use.step = self
            use.callbacks.append(on_load)
            use.chunk = chunk
            via = None
            if via_hold is not None:
                via = port.via.request(via_hold, job, prio)
                via.step = self
                via.callbacks.append(on_load)
                via.chunk = chunk
            # Waiting for a buffer after the level could have taken the load is SRAM
            # capacity's fault; waiting behind busy channels is the level's.
            chunk.transfers.append((use, via, now - max(asked, frees[i]), i))
            chunk.left += 1 if via is None else 2
        self.issued += 1
        self.pending.append(chunk)
        if not chunk.left:
            self._arrived(chunk)
        return not self.step.unpack_ps

    def _loaded(self, use: Use) -> None:
        chunk = use.chunk
        chunk.left -= 1
        if not chunk.left:
            self._arrived(chunk)

    def _arrived(self, chunk: Chunk) -> None:
        """All of a chunk's loads are done: when did it land, and which level was last?"""
        first = chunk.index == 0
        for use, via, idle, i in chunk.transfers:
            port = self.loads[i][0]
            end, limiter = self._ended(use, via, self.loads[i], (i, True), chunk.index)
            # A stream of requests pays the latency once: later requests were issued ahead.
            done = end + (port.latency_ps if first else 0)
            if done > chunk.landed:
                # A load that queued behind another operator's transfer names it as the holder.
                holder = use.blocker.op if use.blocker is not None else ""
                chunk.landed, chunk.source, chunk.held = done, (*limiter, holder), max(0, idle)
        wait = chunk.landed - self.env._now
        if wait > 0:
            self._later(wait, lambda _e: self._landed(chunk))
        else:
            self._landed(chunk)

    def _landed(self, chunk: Chunk) -> None:
        unpack = self.step.unpack_ps
        if not unpack:
            chunk.ready = True
            self._compute()
            return
        now = self.env._now
        if self.first_unpack < 0:
            self.first_unpack = now
        self.unpack_ps += unpack
        self.unpacking = now + unpack
        self._later(unpack, lambda _e: self._unpacked(chunk))

    def _unpacked(self, chunk: Chunk) -> None:
        chunk.ready = True
        self._ask()
        self._compute()

    def _free(self, writer: tuple[str, str], computed: int) -> None:
        """A chunk's buffer is free: it goes to the loader if the loader waits for one."""
        now = self.env._now
        self.released = (computed, now, writer)
        self.free_buffers += 1
        if self.waiting is None:
            return
        if self.issued >= self.step.count:  # fast-forward skipped the chunks it waited for
            self.waiting = None
        elif self._issue():
            self._ask()

    # -- compute ----------------------------------------------------------------------------
    def _compute(self) -> None:
        """Start the oldest chunk if it has arrived and the step is not computing."""
        if self.computing or not self.pending or not self.pending[0].ready:
            return
        chunk = self.pending.popleft()
        now, t0 = self.env._now, self.idle_since
        stall = self.chunk_stalls = {}
        if now > t0:
            # The wait splits into: no free buffer (SRAM capacity, or a store still draining
            # it), data in transit, then dequantisation.
            capacity = min(now - t0, chunk.held)
            draining = min(capacity, chunk.drain)
            unpack = min(now - t0 - capacity, now - chunk.landed)
            for key, span in ((CAPACITY, capacity - draining), (chunk.writer, draining),
                              (chunk.source, now - unpack - t0 - capacity), (UNPACKING, unpack)):
                if span > 0:
                    k = (key[0], key[1], key[2] if len(key) > 2 else "")
                    stall[k] = stall.get(k, 0) + span
        self.computing = True
        if not self.step.compute_ps:  # a copy: nothing to compute
            self._computed(None)
            return
        use = self.res.compute.request(self.step.compute_ps, self.job, self.priority)
        use.step = self
        use.callbacks.append(self._computed)

    def _computed(self, use: Use | None) -> None:
        now = self.env._now
        stall = self.chunk_stalls
        if use is not None and use.start > use.requested:  # another task held the compute units
            k = (WAIT, COMPUTE, use.blocker.op if use.blocker is not None else "")
            stall[k] = stall.get(k, 0) + use.start - use.requested
        for k, ps in stall.items():
            self.stalls[k] = self.stalls.get(k, 0) + ps
        self.busy_ps += self.step.compute_ps
        self.computing = False
        self._store(now)
        self.consumed += 1
        self.idle_since = self.last_compute = now
        if self.consumed == self.step.count:
            self._drain()
            return
        skip = self.observer(self) if self.observer is not None else 0
        if skip:  # fast-forwarded: the skipped chunks run until then
            self._later(skip, lambda _e: self._compute())
        else:
            self._compute()

    def _store(self, now: int) -> None:
        if not self.stores:
            self._free(CAPACITY, now)
            return
        job, prio, on_store = self.job, self.priority, self._stored
        uses = []
        for j, (port, hold, via_hold, _, _) in enumerate(self.stores):
            use = port.request(hold, job, prio)
            use.step = self
            via = None
            if via_hold is not None:
                via = port.via.request(via_hold, job, prio)
                via.step = self
            uses.append((use, via, j))
        batch = Stores(self.consumed, uses, now)
        self.outstanding.append(batch)
        for use, via, _ in uses:
            use.batch = batch
            use.callbacks.append(on_store)
            if via is not None:
                via.batch = batch
                via.callbacks.append(on_store)

    def _stored(self, use: Use) -> None:
        """A store (or its link) finished; once all of a chunk's have, its buffer is free."""
        batch = use.batch
        batch.left -= 1
        if batch.left:
            return
        written, writer = batch.computed, CAPACITY
        for use, via, j in batch.uses:
            port, name = self.stores[j][0], self.stores[j][4]
            end, limiter = self._ended(use, via, self.stores[j], (j, False), batch.index)
            if end > written:
                written, writer = end, limiter
            if end + port.latency_ps > self.last_store:
                self.last_store, self.store_level = end + port.latency_ps, name
        self.outstanding.remove(batch)
        self._free(writer, batch.computed)
        if self.consumed == self.step.count:
            self._drain()

    def _drain(self) -> None:
        """After the last chunk: wait for the stores still draining, latency included."""
        if self.outstanding or self.finished.triggered:
            return
        wait = self.last_store - self.env._now
        if wait > 0:
            self._later(wait, lambda _e: self._finish())
        else:
            self._finish()

    def _finish(self) -> None:
        now = self.env._now
        if now > self.last_compute:
            k = (WAIT, self.store_level, "")
            self.stalls[k] = self.stalls.get(k, 0) + now - self.last_compute
        # Bytes are counted exactly once the step is done (chunk sizes are rounded up for timing).
        for (port, *_), total in zip(self.loads, self.load_totals):
            port.count(total, True, self.job)
        for (port, *_), total in zip(self.stores, self.store_totals):
            port.count(total, False, self.job)
        self.finished.succeed()

    # -- accounting ---------------------------------------------------------------------------
    def _ended(self, use: Use, via: Use | None, port: tuple, row: tuple[int, bool], index: int) -> tuple:
        """When a finished transfer ended, and the stall key of whichever of the level and the
        link it is reached over ended last. The first and last chunks widen its row."""
        end, limiter = use.end, port[3]
        if via is not None and via.end > end:
            end, limiter = via.end, (WAIT, str(port[0].via.rid))
        if index == 0 or index == self.step.count - 1:
            ext = self.extent.get(row)
            if ext is None:
                self.extent[row] = [use.start, use.end]
            elif use.end > ext[1]:
                ext[1] = use.end
        return end, limiter

    def footprint(self) -> list[Server]:
        """The resources this step uses."""
        out = [self.res.compute] if self.step.compute_ps else []
        for port, *_ in self.loads + self.stores:
            if port not in out:
                out.append(port)
            if port.via is not None and port.via not in out:
                out.append(port.via)
        return out

    def state(self) -> tuple:
        """Everything that decides the step's future, as offsets from now. Fast-forward
        compares it between chunk completions; a new attribute that matters belongs here."""
        now = self.env._now
        chunks = tuple((c.issued - now, c.drain, c.writer, c.ready, c.left, c.landed - now,
                        tuple((status(u, now), status(v, now), idle) for u, v, idle, _ in c.transfers))
                       for c in self.pending)
        stores = tuple((b.computed - now, b.left, tuple((status(u, now), status(v, now)) for u, v, _ in b.uses))
                       for b in self.outstanding)
        # Prefetches never delay this step's requests (they are preempted): they are not part of its state.
        servers = tuple((max(0, s.horizon - now), status(s.user if s.user and s.user.priority < PREFETCH else None, now),
                         sum(1 for u in s.put_queue if u.priority < PREFETCH)) for s in self.footprint())
        waiting = None
        if self.waiting is not None:
            asked, frees = self.waiting
            waiting = (asked - now, tuple(f - now for f in frees))
        computed, freed, writer = self.released
        return (chunks, stores, servers, waiting, self.free_buffers, self.computing,
                max(0, self.unpacking - now), (computed - now, freed - now, writer), max(0, self.last_store - now),
                self.store_level, tuple(sorted(self.chunk_stalls.items())))

def _port(server: Server, nbytes: int, share: float) -> tuple:
    via = server.via.duration(nbytes) if server.via is not None else None
    return server, server.duration(nbytes, share), via, (WAIT, str(server.rid)), str(server.rid)

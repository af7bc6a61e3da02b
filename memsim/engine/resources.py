"""Engine resources: compute units, memory-level channels and links as SimPy resources.

A ``Server`` is a SimPy ``BaseResource`` of capacity one that keeps SimPy's request/release
protocol: ``request`` returns a ``Use`` (a ``Put`` event) that waits in the put queue, is
granted when the server is free, holds it for a duration fixed at request time, and releases
it when it succeeds. Granting and releasing cost no event of their own: a transfer costs one
event however many channels it is striped over.

The queue is ordered by priority, then by arrival (FIFO): the compute stream's demand loads
(priority 0) go before communication (1) and before the copy engine's prefetches (2), so a
prefetch uses bandwidth the running operator leaves idle. Within a priority, reads go before
writes, as a memory controller serves reads first and drains its write buffer in the gaps: a
store yields to a load of its priority or higher, which takes the server from it (the store
resumes where it stopped), as a demand request takes it from a prefetch. Nothing else is
preempted. A load then never waits behind a store that happened to arrive just before it,
so making a step's chunks bigger can only delay its loads, never let them pass a store they
queued behind before. A level with ``channels`` stripes each transfer evenly over the channels its step
may use, so a transfer of n bytes takes n / (bandwidth x width / channels), rounded up to the
picosecond (``hardware/rates``): the channel count at equal total bandwidth changes nothing for
a whole chip's step.

A level reached over a link (host DDR over PCIe, MemoryX over a wafer's I/O) holds the link
for the same transfer, and the later of the two finishes it. A link named in a plan (a wafer's
``execution.fabric``) can be a transfer's source itself.

A server keeps what a plain run reads: who holds it, its queue, its busy time and bytes, and its
``horizon`` (when it would be free of demand and communication requests: the pipeline's stall
causes read it, as ``free_at``). Who used it last and how often that changed, which only the
shortcuts read, is kept by the ``watch`` they install (``engine/watch.py``); a plain run's
servers have none. SimPy's internals are reached through ``engine/simpy_fast.py`` only.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

import simpy
from simpy.events import Event
from simpy.resources.base import BaseResource, Get

from memsim.engine.records import WAIT, Cause
from memsim.engine.simpy_fast import Environment, Request, Timer, succeed_at
from memsim.engine.times import Times
from memsim.hardware import rates
from memsim.hardware.resource import LEVEL, SYSTEM, Ref, ResourceId
from memsim.hardware.spec import ChipSpec, LinkSpec, MemoryLevel
from memsim.mapping.plan import BRANCH, COMM, COMPUTE, COPY

if TYPE_CHECKING:
    from memsim.engine.pipeline import StepRun
from memsim.core.units import transfer_ps

DEMAND, COMMUNICATION, PREFETCH = 0, 1, 2  # request priorities, lowest first
# The priority of each stream's requests (a stream a chip does not declare runs as compute).
PRIORITY = {COMPUTE: DEMAND, BRANCH: DEMAND, COMM: COMMUNICATION, COPY: PREFETCH}


class Job:
    """A running task: the owner of the requests it makes, named in contention stalls."""

    __slots__ = ("op", "chip", "stream")

    def __init__(self, op: str, chip: int, stream: str) -> None:
        self.op, self.chip, self.stream = op, chip, stream


class Watch(Protocol):
    """What the shortcuts keep of a server's use (``engine/watch.py``): told of every request
    (before it is served) and of every count of bytes, by their owner. A plain run has none."""

    def request(self, owner: Job | None, priority: int) -> None: ...

    def touch(self, owner: Job) -> None: ...


def _order(use: Use) -> tuple[int, bool, int]:
    return use.order


class _PriorityQueue(list["Use"]):
    """The put queue: highest priority (lowest number) first, FIFO within a priority."""

    def append(self, use: Use) -> None:
        if not self or self[-1].order < use.order:  # the usual case: it goes last
            list.append(self, use)
        else:
            bisect.insort(self, use, key=_order)


class Use(Request["Server"]):
    """A request to hold a server for ``duration_ps``. It is granted in queue order and
    succeeds when the hold ends; ``start``/``end`` are set when it is granted (``end`` is -1
    while it waits, and again while a preempted prefetch or store waits to resume). ``then`` is called
    with it when the hold ends; ``step`` tags it as a step's, so fast-forward can move it."""

    # Fast-forward moves them (a request is compared by its status: queued, held or done).
    TIMES = Times(moved=("requested", "start", "end"), unset=-1)
    _seq = count()
    blocker: Job | None = None  # the operator holding the server when the request arrived, if another one
    store = False  # a write: it yields to reads of its priority
    order: tuple[int, bool, int]  # its place in the queue (``_PriorityQueue``)
    # The one timer that may end a preemptible hold in service (an earlier one goes stale); None
    # once it has ended it (the request has succeeded) or while the request waits.
    timer: Timer | None = None

    def __init__(self, server: Server, duration_ps: int, owner: Job | None, priority: int,
                 then: Callable[[Use], None] | None = None, step: StepRun | None = None, store: bool = False) -> None:
        # SimPy's Put initialisation is skipped (``simpy_fast.Request``): a request is the
        # engine's most frequent event.
        self.resource = server
        self.duration = duration_ps
        self.owner = owner
        self.priority = priority
        self.step = step
        env = server.env
        self.requested = now = env.now_ps
        if store:
            self.store = True
        watch = server.watch
        if watch is not None:
            watch.request(owner, priority)
        if priority < PREFETCH:  # prefetches never delay demand traffic: only the others count
            horizon = server.horizon
            server.horizon = (now if now > horizon else horizon) + duration_ps
            if server.user is None and not server.put_queue:
                # Granted at once, the usual case: ``Server._grant`` inlined. A demand request is
                # triggered as it is made (it succeeds, releasing the server, when the hold ends);
                # a store's timer ends its hold unless a read preempts it.
                server.user = self
                server.busy_ps += duration_ps
                self.start = now
                self.end = end = now + duration_ps
                if store:
                    self.callbacks = [then] if then is not None else []
                    self.timer = Timer(env, end, self._expired, step)
                    return
                self.callbacks = [server._on_release, then] if then is not None else [server._on_release]
                succeed_at(env, self, end)
                return
        self.callbacks = [then] if then is not None else []
        self.start = self.end = -1
        user = server.user
        if user is None and not server.put_queue:
            server._grant(self)
            return
        if user is not None and user.owner is not owner:
            self.blocker = user.owner
        order = self.order = (priority, store, next(Use._seq))
        if user is not None and (user.priority >= PREFETCH or user.store) and user.timer is not None \
                and user.end > now and (priority, store) < (user.priority, user.store):
            # (a prefetch or store whose hold has just ended, its success scheduled or due now,
            # is not preempted)
            server._preempt(user)
            server._grant(self)
            return
        queue = server.put_queue
        if queue and order < queue[-1].order:
            queue.append(self)  # into its place
        else:
            list.append(queue, self)  # last, the usual case (``_PriorityQueue.append``, inlined)

    def _expired(self, timer: Event) -> None:
        """A preemptible hold's timer went off: unless it went stale, the hold ends now."""
        server = self.resource
        if self.timer is not timer or server.user is not self:
            return
        self.timer = None
        self.callbacks.insert(0, server._on_release)
        env = server.env
        succeed_at(env, self, env.now_ps)


class Server(BaseResource[Use, Get[Any]]):
    """A compute unit, memory level or link: SimPy's resource of capacity one, held a request
    at a time (see the module's docstring). ``watch``: the shortcuts' bookkeeping, if installed."""

    PutQueue = _PriorityQueue
    put_queue: _PriorityQueue
    TIMES = Times(ahead=("horizon",))  # fast-forward moves it; a step's state holds the time left until it

    def __init__(self, env: Environment, rid: ResourceId, channels: int = 1, bandwidth: int = 1,
                 latency_ps: int = 0, via: Server | None = None, energy_fj_per_bit: int = 0) -> None:
        super().__init__(env, 1)
        self.env = env
        self.rid = rid
        self.energy_fj_per_bit = energy_fj_per_bit  # what each bit it moves costs (its transfer rows carry it)
        self.channels = channels
        self.bandwidth = bandwidth  # bytes/s over all its channels
        self.latency_ps = latency_ps
        self.via = via
        self.user: Use | None = None
        self.horizon = 0  # when the server would be free of demand and communication requests
        self.busy_ps = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.watch: Watch | None = None  # installed by the shortcuts only (``engine/watch.py``)
        self._on_release = self._release
        self._waits: dict[str, Cause] = {}  # holder -> the stall of waiting for this server behind it

    def waited(self, holder: str = "") -> Cause:
        """The stall of waiting for this server (behind ``holder``'s operator): one object each,
        so the accounts and tables keyed by causes find it without comparing fields."""
        cause = self._waits.get(holder)
        if cause is None:
            cause = self._waits[holder] = Cause(WAIT, self.rid, holder)
        return cause

    # -- SimPy's request/release protocol ----------------------------------------------
    def request(self, duration_ps: int, owner: Job | None = None, priority: int = DEMAND,
                then: Callable[[Use], None] | None = None, step: StepRun | None = None, store: bool = False) -> Use:
        return Use(self, duration_ps, owner, priority, then, step, store)

    def _grant(self, use: Use) -> None:
        self.user = use
        env = self.env
        now = env.now_ps
        if use.start < 0:
            use.start = now
        use.end = end = now + use.duration
        self.busy_ps += use.duration
        if use.priority >= PREFETCH or use.store:  # preemptible: a timer ends the hold unless it is preempted
            use.timer = Timer(env, end, use._expired, use.step)
            return
        use.callbacks.insert(0, self._on_release)
        succeed_at(env, use, end)

    def postpone(self, use: Use, end: int) -> None:
        """A prefetch in service ends at ``end`` instead (fast-forward served it only the gaps
        of the cycles it skipped); its earlier timer goes stale."""
        use.end = end
        use.timer = Timer(self.env, end, use._expired, use.step)

    def _preempt(self, use: Use) -> None:
        """Demand traffic takes the server from a prefetch, which resumes where it stopped."""
        left = use.end - self.env.now_ps
        self.busy_ps -= left
        use.duration = left
        use.end = -1
        use.timer = None  # its timer is stale now
        use.order = (use.priority, use.store, -1)  # first among the requests of its kind waiting
        self.user = None
        self.put_queue.append(use)

    def _release(self, use: Use) -> None:
        self.user = None
        if self.put_queue:
            self._grant(self.put_queue.pop(0))

    def _do_put(self, use: Use) -> bool:
        if self.user is not None:
            return False
        self._grant(use)
        return True

    def _do_get(self, event: Get[Any]) -> None:  # nothing is ever taken out: a hold ends by itself
        return None

    def _trigger_get(self, put_event: Use | None) -> None:  # no get queue to serve
        return None

    def idle(self, now: int) -> bool:
        """Nothing in service or waiting."""
        return self.user is None and not self.put_queue and self.horizon <= now

    def prefetching(self) -> bool:
        """A prefetch holds the server or waits for it."""
        return any(u.priority >= PREFETCH for u in ([self.user] if self.user else []) + list(self.put_queue))

    # -- transfers ---------------------------------------------------------------------
    @property
    def free_at(self) -> int:
        return max(self.horizon, self.via.free_at) if self.via is not None else self.horizon

    def duration(self, nbytes: int, share: rates.Share = rates.WHOLE) -> int:
        """Time to move ``nbytes`` for a step with ``share`` of a level (a link serves whole)."""
        if self.rid.kind is not LEVEL:  # one channel at its whole rate: a collective's every transfer comes here
            return transfer_ps(nbytes, self.bandwidth)
        return rates.duration_ps(nbytes, self.bandwidth, self.channels, share)

    def count(self, nbytes: int, read: bool, owner: Job | None = None) -> None:
        """Account moved bytes here and on the link this level is reached over. Counting is a
        touch by ``owner`` (replay must not remember another task's bytes as its own)."""
        server: Server | None = self
        while server is not None:
            watch = server.watch
            if watch is not None and owner is not None:
                watch.touch(owner)
            if read:
                server.bytes_read += nbytes
            else:
                server.bytes_written += nbytes
            server = server.via


class ChipResources:
    """One chip's compute units, memory levels and chip links (PCIe, a wafer's fabric and I/O).

    A region of a layer-pipelined chip is a unit of its own: it has its own compute units and
    the ``local`` levels and links (its SRAM, its part of the fabric), and shares the chip's
    other levels and links with the chip's other regions (``shared``)."""

    def __init__(self, env: Environment, chip: ChipSpec, index: int, staging_bytes: int = 0,
                 shared: ChipResources | None = None, local: frozenset[Ref] = frozenset()) -> None:
        self.spec = chip
        self.index = index
        self.compute = Server(env, ResourceId.compute(index))
        self.ports: dict[Ref, Server] = {}
        for lk in chip.links:
            ref = Ref.link(lk.name)
            self.ports[ref] = shared.ports[ref] if shared is not None and ref not in local else _link(env, lk, index)
        for lvl in chip.levels:
            ref = Ref.level(lvl.name)
            if shared is not None and ref not in local:
                self.ports[ref] = shared.ports[ref]
                continue
            via = self.ports.get(Ref.link(lvl.via)) if lvl.via else None
            self.ports[ref] = _level(env, lvl, chip.compute.units, index, via)
        # What the matrix units waiting for operands from SRAM (``Step.feed_ps``) is a stall on: once per chip.
        self.scratchpad = chip.scratchpad.name  # what a transfer that is not a direct copy goes through
        self.feeding = self.ports[Ref.level(self.scratchpad)].waited()
        # SRAM set aside for prefetched weights: a prefetch takes its bytes, their user gives them back.
        self.staging = simpy.Container(env, capacity=staging_bytes, init=staging_bytes) if staging_bytes else None

    def servers(self) -> list[Server]:
        return [self.compute, *self.ports.values()]


def _level(env: Environment, spec: MemoryLevel, units: int, chip: int, via: Server | None) -> Server:
    bandwidth = spec.effective_bandwidth(units)
    return Server(env, Ref.level(spec.name).on(chip), spec.channels, bandwidth,
                  spec.latency_ps, via, spec.energy_fj_per_bit)


def _link(env: Environment, spec: LinkSpec, chip: int, direction: tuple = (), rate: int = 0) -> Server:
    return Server(env, Ref.link(spec.name).on(chip, direction), 1, rate or spec.effective_bandwidth,
                  spec.latency_ps, energy_fj_per_bit=spec.energy_fj_per_bit)


def system_link(env: Environment, spec: LinkSpec, direction: tuple, rate: int = 0) -> Server:
    """One direction (from, to) of a cable between chips (or regions) moving ``rate`` bytes/s (0:
    all of the chip's links)."""
    return _link(env, spec, SYSTEM, direction, rate)

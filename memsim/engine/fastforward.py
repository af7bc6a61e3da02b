"""Fast-forward: skip whole cycles of a step whose pipeline has become periodic.

A step repeats identical chunks. After each chunk the observer records the step's state
(``state``: in-flight loads, pending stores, the queues and horizons of its resources, and the
times its objects declare, ``engine/times.py``, as offsets from now). Once the state equals the
state ``q`` chunks earlier and the last two cycles took equal time, the future provably repeats
every ``q`` chunks, for as long as nothing else touches the step's resources. The observer then
moves every event the step has scheduled, and every time it holds (``shift``, over the same
declarations), ``k`` cycles later, accounts the skipped chunks (busy time, stalls, bytes,
resource occupancy) and lets the step sleep through them.

Steps on other streams that share its resources at its priority run beside it: the step
and those *partners* form a group whose joint state is compared, and a skip moves all of
them by the same time, each by the chunks it ran per cycle. The scheduler answers who the
partners are (``engine/neighbours.py``); it answers ``None`` when another stream could touch
the group's resources before the group's steps end without being one of them, and then
nothing is skipped. ``k`` is bounded by the chunks every member has left, so a skip never
hides contention. A history in which another task touched the group's resources is
discarded.

A step without a cycle of at most ``MAX_CYCLE`` chunks runs chunk by chunk: nothing is
skipped on a guess.
"""
from __future__ import annotations

from typing import Any

from memsim.engine import gapfill
from memsim.engine.chunk import Chunk, Stores, footprint
from memsim.engine.neighbours import Neighbours
from memsim.engine.pipeline import StepRun
from memsim.engine.records import Cause
from memsim.engine.resources import PREFETCH, Server, Use
from memsim.engine.watch import Watches

MIN_PREFIX = 4  # chunks before looking for a periodic state
MAX_CYCLE = 32  # longest cycle (in chunks) the detector looks for


def find_cycle(states: list[tuple], completions: list[int], depth: int) -> int | None:
    """Smallest q such that the state after the latest chunk equals the state q chunks
    earlier and the last two cycles of q chunks took equal time."""
    for q in range(1, MAX_CYCLE + 1):
        if len(completions) < max(MIN_PREFIX, depth + 1) + 2 * q:
            return None
        c = completions
        if states[-1] == states[-1 - q] and c[-1] - c[-1 - q] == c[-1 - q] - c[-1 - 2 * q]:
            return q
    return None


class FastForward:
    """The observer of one step: records its history (and its partners') and skips cycles when it may."""

    def __init__(self, neighbours: Neighbours, watches: Watches) -> None:
        self.neighbours = neighbours
        self.watches = watches  # who touched each server (``engine/watch.py``)
        self.states: list[tuple] = []
        self.completions: list[int] = []
        self.stalls: list[dict] = []
        self.counts: list[tuple] = []  # per chunk: each partner's chunks consumed and stalls so far
        self.gaps: list[tuple] = []  # per chunk: the prefetch transfers on the group's resources
        self.switches: tuple[int, ...] | None = None
        self.group: tuple[int, ...] = ()
        self.servers: list[Server] = []  # the group's resources

    def reset(self) -> None:
        self.states, self.completions, self.stalls, self.counts, self.gaps = [], [], [], [], []

    def _clean(self, run: StepRun, partners: list[StepRun]) -> None:
        """Forget the history if the partners changed, or (alone) if another task touched the
        step's resources since it began; a group checks the time of the last such touch instead."""
        watches = self.watches
        group = tuple(id(p) for p in partners) if partners else ()
        switches = tuple([watches[s].switches for s in run.servers]) if not partners else None
        if switches != self.switches or group != self.group:
            self.switches, self.group = switches, group
            self.servers = footprint([run, *partners])
            self.reset()

    def __call__(self, run: StepRun) -> int:
        now = run.env.now_ps
        found = self.neighbours.partners(run)
        # (Alone, the usual case, a step makes no generators over its partners: this runs after
        # every chunk.)
        if found is None or (found[0] and any(_leads(p, run) for p in found[0])):
            self.reset()  # another stream may interfere now, or a partner observes the group
            return 0
        partners, quiet = found
        self._clean(run, partners)
        self.states.append((state(run), *(state(p) for p in partners)) if partners else state(run))
        self.completions.append(now)
        self.stalls.append(dict(run.chunk_stalls))
        self.counts.append(tuple((p.consumed, p.issued, dict(p.stalls)) for p in partners) if partners else ())
        servers = self.servers
        self.gaps.append(gapfill.observe(servers, now))
        depth = max(run.step.depth, *(p.step.depth for p in partners)) if partners else run.step.depth
        q = find_cycle(self.states, self.completions, depth)
        if q is None:
            return 0
        cycle_ps = self.completions[-1] - self.completions[-1 - q]
        if cycle_ps <= 0:
            return 0
        # Every member runs whole cycles until the first of them runs out of chunks.
        members: list[tuple[StepRun, int, dict[Cause, int] | None]] = [(run, q, None)]
        for p, (consumed, issued, stalls), (was_consumed, was_issued, was_stalls) in zip(
                partners, self.counts[-1], self.counts[-1 - q]):
            if consumed - was_consumed != issued - was_issued:
                return 0
            members.append((p, consumed - was_consumed, _diff(stalls, was_stalls)))
        if any(n < 1 for _, n, _ in members):
            return 0
        cycles = min((m.step.count - m.issued) // n for m, n, _ in members)
        if quiet != float("inf"):
            cycles = min(cycles, int((quiet - now) // cycle_ps))
        if partners and self.neighbours.touched_since([run, *partners]) > self.completions[-1 - 2 * q]:
            return 0
        # A prefetch (which yields to the group) may use a resource the group leaves idle at
        # times. Skip only if the group keeps every such resource busy, or one prefetch transfer
        # fills its gaps at a steady rate (``engine/gapfill.py``).
        gaps = []
        ids = {id(s) for s in servers}
        for server, streams in self.neighbours.shared([run, *partners]):
            idle = cycle_ps - sum(n * _hold(m, server) for m, n, _ in members)
            if not idle:
                continue
            gap = gapfill.drift(self.gaps, servers.index(server), q, server, idle)
            owner = gapfill.alone(gap, now, ids) if gap is not None else None
            if gap is None or owner is None or streams - {owner.key}:
                return 0
            gaps.append(gap)
            cycles = min(cycles, gapfill.cycles_left(gap))
        if cycles < 1:
            return 0
        delta = cycles * cycle_ps
        for s in servers:
            Server.TIMES.shift(s, delta)
        for gap in gaps:
            gapfill.fill(gap, cycles, delta)
        for m, n, stalls in members:
            m.env.shift(m, delta)  # its scheduled events (``Environment.shift``)
            shift(m, delta)
            _account(m, cycles, n, [stalls] if stalls is not None else self.stalls[-q:])
            if m is not run and m.observer is not None:
                m.observer.reset()
        self.reset()
        return delta


def _leads(a: StepRun, b: StepRun) -> bool:
    """Of a group, the step of most chunks observes it (the finest clock; ties go to the first
    stream); the others leave it alone."""
    return (-a.step.count, a.job.chip, a.job.stream) < (-b.step.count, b.job.chip, b.job.stream)


def _diff(now: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}


def _account(run: StepRun, cycles: int, q: int, stalls: list[dict]) -> None:
    """The skipped chunks' busy time, stalls, bytes and resource occupancy: ``q`` chunks per
    cycle, whose stalls are ``stalls`` (per chunk, or for the whole cycle)."""
    step, n = run.step, cycles * q
    for chunk in stalls:
        for key, ps in chunk.items():
            run.stalls[key] = run.stalls.get(key, 0) + ps * cycles
    run.busy_ps += (step.compute_ps - step.throttle_ps - step.feed_ps) * n
    run.unpack_ps += step.unpack_ps * n
    run.res.compute.busy_ps += step.compute_ps * n
    for port in run.loads + run.stores:
        port.server.busy_ps += port.hold * n
        if port.via is not None:
            port.via.busy_ps += port.via_hold * n
    run.issued += n
    run.consumed += n
    for c in run.pending:  # the chunks in flight come after the skipped ones (their rows' span)
        c.index += n
    for b in run.outstanding:
        b.index += n


def _hold(run: StepRun, server) -> int:
    """How long one chunk of the step holds ``server``."""
    total = run.step.compute_ps if server is run.res.compute else 0
    for port in run.loads + run.stores:
        total += (port.hold if port.server is server else 0) + \
            (port.via_hold if port.server.via is server and port.via_hold else 0)
    return total


def state(run: StepRun) -> tuple[Any, ...]:
    """Everything that decides the step's future, its times as offsets from now (``TIMES``)."""
    now = run.env.now_ps
    chunk_times, store_times, server_times = Chunk.TIMES.offsets, Stores.TIMES.offsets, Server.TIMES.offsets
    chunks = tuple((*chunk_times(c, now), c.drain, c.writer, c.ready, c.left,
                    tuple((status(u, now), status(v, now), idle) for u, v, idle, _ in c.transfers))
                   for c in run.pending) if run.pending else ()
    stores = tuple((*store_times(b, now), b.left, tuple((status(u, now), status(v, now)) for u, v, _ in b.uses))
                   for b in run.outstanding) if run.outstanding else ()
    # Prefetches never delay this step's requests (they are preempted): they are not part of its state.
    servers = tuple((*server_times(s, now), status(s.user if s.user and s.user.priority < PREFETCH else None, now),
                     sum(1 for u in s.put_queue if u.priority < PREFETCH)) for s in run.footprint())
    return (chunks, stores, servers, *StepRun.TIMES.offsets(run, now), run.free_buffers, run.computing,
            run.freed_by, run.store_level, frozenset(run.chunk_stalls.items()))


def status(use: Use | None, now: int) -> tuple[Any, ...]:
    """A request's state relative to now: done, granted with time left, or queued."""
    if use is None:
        return ()
    if use.end < 0:
        return ("queued", use.duration, use.resource.put_queue.index(use))
    return ("held", use.end - now) if use.end > now else ("done",)


def shift(run: StepRun, delta: int) -> None:
    """Move every time the step holds by ``delta`` (fast-forward skipped that long): its own, its
    chunks' in flight, its pending stores' and their requests' (``TIMES``); the horizons of its
    resources move with the group's."""
    for c in run.pending:
        Chunk.TIMES.shift(c, delta)
        for use, via, _, _ in c.transfers:
            _shift_uses(use, via, delta)
    for b in run.outstanding:
        Stores.TIMES.shift(b, delta)
        for use, via, _ in b.uses:
            _shift_uses(use, via, delta)
    StepRun.TIMES.shift(run, delta)


def _shift_uses(use: Use | None, via: Use | None, delta: int) -> None:
    for u in (use, via):
        if u is not None:
            Use.TIMES.shift(u, delta)

"""Execution of one step: loads stream ahead of compute through SRAM buffers.

A loader process takes a free SRAM buffer, books the transfer on the source level's
channels and hands the arrival to the compute process, which waits for it, computes,
frees the buffer and books the store of its output share. Every idle moment of compute
is recorded as a stall with its cause.

Steps repeat identical chunks, so once the pipeline is periodic (chunk completions repeat
with a fixed cycle of ``q`` chunks) every further cycle adds exactly the same time. The
engine then stops issuing loads, lets the chunks already in flight finish, and advances
time by the remaining whole cycles (fast-forward). This is exact when the step has the
chip's resources to itself, which the scheduler guarantees; tests compare it against the
chunk-by-chunk run.
"""
from __future__ import annotations

import simpy

from memsim.engine.recorder import Recorder
from memsim.engine.resources import ChipResources
from memsim.mapping.plan import OpTask, Step

MIN_PREFIX = 4  # chunks before looking for a periodic state
MAX_CYCLE = 32  # longest cycle (in chunks) the detector looks for
# Rounding to whole picoseconds can make the exact cycle longer than MAX_CYCLE. After this many
# chunks without one, the engine repeats the last APPROX_WINDOW chunks instead (counted as an
# approximate fast-forward in the run's engine statistics).
APPROX_AFTER = 2048
APPROX_WINDOW = 512


def share(total: int, count: int, index: int) -> int:
    """Chunk ``index``'s exact share of ``total`` split over ``count`` chunks."""
    return total * (index + 1) // count - total * index // count


def _cycle(states: list[tuple], c: list[int], depth: int) -> int | None:
    """Smallest q such that the pipeline's whole state, seen from the latest completion,
    equals its state q chunks earlier: from then on the future provably repeats."""
    for q in range(1, MAX_CYCLE + 1):
        if len(c) < max(MIN_PREFIX, depth + 1) + 2 * q:
            return None
        if states[-1] == states[-1 - q] and c[-1] - c[-1 - q] == c[-1 - q] - c[-1 - 2 * q]:
            return q
    return None


class StepRun:
    """The processes and state of one step on one chip."""

    def __init__(self, env: simpy.Environment, res: ChipResources, rec: Recorder, chip: str, task: OpTask,
                 step: Step, fast_forward: bool) -> None:
        self.env, self.res, self.rec, self.chip = env, res, rec, chip
        self.task, self.step = task, step
        self.fast_forward = fast_forward
        self.limit = step.count  # chunks the loader may issue; lowered when fast-forwarding
        self.issued = 0
        self.completions: list[int] = []
        self.stalls: list[dict[str, int]] = []  # per chunk: stall time per cause
        self.states: list[tuple] = []  # per chunk: pipeline state relative to its completion
        self.arrivals: list[tuple] = []  # per issued chunk: (arrival, held, source, (drain, writer))
        self.waiting: tuple | None = None  # the loader's pending buffer request, if any
        self.unpacking = 0  # when the loader finishes dequantising its latest chunk
        self.pending: list[int] = []  # when buffers still draining to a store level come free
        self.approximate = False  # fast-forwarded by repeating a window rather than an exact cycle
        self.released = (0, 0, "sram_capacity")  # latest buffer freed: (compute end, freed at, store limiter)
        self.last_store = 0
        self.levels = sorted({lvl for lvl, _ in step.loads + step.stores})
        # A direct copy (DMA staging) shows as level-to-level transfers; otherwise via SRAM.
        self.load_dst = step.stores[0][0] if step.direct and step.stores else "sram"
        self.store_src = step.loads[0][0] if step.direct and step.loads else "sram"
        self.load_totals = dict(step.total_loads)
        self.store_totals = dict(step.total_stores)

    def _row(self, start, end, resource, kind, nbytes=0, flops=0, src="", dst="", cause="", count=1):
        t = self.task
        self.rec.add(start, end, self.chip, resource, kind, t.op, t.kind, t.layer, nbytes, flops, src, dst, cause,
                     count)

    def loader(self, slots: simpy.Container, ready: simpy.Store):
        env, levels, step = self.env, self.res.levels, self.step
        while self.issued < self.limit:
            index = self.issued
            asked = env.now
            free_when_asked = {lvl: levels[lvl].free_at for lvl, _ in step.loads}
            self.waiting = (asked, tuple(sorted(free_when_asked.items())))
            yield slots.get(1)
            self.waiting = None
            # Of the wait for a buffer, the part after its chunk's compute ended, while a slow
            # store still drained it, is that store's fault; the rest is SRAM capacity's.
            computed, freed, writer = self.released
            drain = max(0, freed - max(asked, computed)) if env.now > asked else 0
            if index >= self.limit:  # fast-forward began while this load waited for a buffer
                slots.put(1)
                return
            self.issued += 1
            now = env.now
            arrival, source, held = now, "sram", 0
            for lvl, nbytes in step.loads:
                level = levels[lvl]
                # How long this load waited for a free buffer after the level could have taken
                # it: that wait is SRAM capacity's fault; waiting behind busy channels is the level's.
                idle = now - max(asked, free_when_asked[lvl])
                start, end, limiter = level.transfer(now, nbytes, step.share)
                moved = share(self.load_totals[lvl], step.count, index)
                level.count(moved, read=True)
                self._row(start, end, lvl, "transfer", moved, src=lvl, dst=self.load_dst)
                # A stream of requests pays the latency once: later requests were issued ahead.
                done = end + (level.latency_ps if index == 0 else 0)
                if done > arrival:
                    arrival, source, held = done, limiter, max(0, idle)
            landed = arrival
            if step.unpack_ps:  # the loader dequantises the chunk before it issues the next one
                arrival += step.unpack_ps
                self._row(landed, arrival, "dequant", "compute")
            self.arrivals.append((arrival, held, source, (drain, writer)))
            ready.put((env.timeout(arrival - now), held, source, landed, (drain, writer)))
            if step.unpack_ps:
                self.unpacking = arrival
                yield env.timeout(arrival - now)

    def run(self):
        env, res, step = self.env, self.res, self.step
        slots = simpy.Container(env, capacity=step.depth, init=step.depth)
        ready = simpy.Store(env)
        env.process(self.loader(slots, ready))
        store_level = ""
        index = 0
        while index < self.limit:
            t0 = env.now
            arrived, held, source, landed, (drain, writer) = yield ready.get()
            yield arrived
            now = env.now
            stall: dict[str, int] = {}
            if now > t0:
                # The wait splits into: no free buffer (SRAM capacity, or a store still draining
                # it), data in transit, then dequantisation.
                capacity = min(now - t0, held)
                draining = min(capacity, drain)
                unpack = min(now - t0 - capacity, now - landed)
                for cause, a, b in (("sram_capacity", t0, t0 + capacity - draining),
                                    (writer, t0 + capacity - draining, t0 + capacity),
                                    (source, t0 + capacity, now - unpack), ("dequant", now - unpack, now)):
                    if b > a:
                        self._row(a, b, "compute", "stall", cause=cause)
                        stall[cause] = stall.get(cause, 0) + b - a
            start, end = res.compute.book(now, step.compute_ps)
            yield env.timeout(end - now)
            self._row(start, end, "compute", "compute", flops=share(step.flops, step.count, index))
            now = env.now
            written, writer = now, "sram_capacity"
            for lvl, nbytes in step.stores:
                level = res.levels[lvl]
                s, e, limiter = level.transfer(now, nbytes, step.share)
                moved = share(self.store_totals[lvl], step.count, index)
                level.count(moved, read=False)
                self._row(s, e, lvl, "transfer", moved, src=self.store_src, dst=lvl)
                if e > written:
                    written, writer = e, limiter
                if e + level.latency_ps > self.last_store:
                    self.last_store, store_level = e + level.latency_ps, lvl
            # The chunk's buffer holds its output until the store has drained it.
            self._release(slots, written, writer)
            self.completions.append(now)
            self.stalls.append(stall)
            index += 1
            if self.fast_forward and self.limit == step.count:
                self.states.append(self._state(index, stall))
                self._maybe_fast_forward()
        if self.last_store > env.now:
            t0 = env.now
            yield env.timeout(self.last_store - t0)
            self._row(t0, env.now, "compute", "stall", cause=store_level)
        if self.limit < step.count:
            yield from self._bulk()

    def _release(self, slots: simpy.Container, at: int, cause: str) -> None:
        computed = self.env.now
        if at <= computed:
            self.released = (computed, computed, cause)
            slots.put(1)
            return
        self.pending.append(at)

        def free(_event) -> None:
            self.pending.remove(at)
            self.released = (computed, at, cause)
            slots.put(1)

        self.env.timeout(at - self.env.now).callbacks.append(free)

    def _state(self, consumed: int, stall: dict[str, int]) -> tuple:
        """Everything that decides the future, as offsets from now (arrived loads count as 0)."""
        now = self.env.now
        flight = tuple((a - now, h, src, by) if a > now else (0, 0, "", ("", 0)) for a, h, src, by in
                       self.arrivals[consumed:])
        ports = [self.res.levels[lvl] for lvl in self.levels]
        ports += [p.via for p in ports if p.via is not None]
        channels = tuple(max(0, ch.free_at - now) for p in ports for ch in p.channels)
        waiting = None
        if self.waiting is not None:
            asked, free = self.waiting
            waiting = (asked - now, tuple((lvl, f - now) for lvl, f in free))
        return (flight, channels, max(0, self.last_store - now), max(0, self.res.compute.free_at - now), waiting,
                max(0, self.unpacking - now), tuple(t - now for t in self.pending),
                (self.released[0] - now, self.released[1] - now, self.released[2]),
                tuple(sorted(stall.items())))

    def _maybe_fast_forward(self) -> None:
        q = _cycle(self.states, self.completions, self.step.depth)
        if q is None and len(self.completions) >= APPROX_AFTER:
            q, self.approximate = APPROX_WINDOW, True
        if q is None:
            return
        remaining = self.step.count - self.issued
        cycles = remaining // q
        if cycles < 2:
            return
        self.limit = self.step.count - cycles * q  # the loader finishes the odd chunks, then stops
        self.cycle_q = q
        self.cycle_ps = self.completions[-1] - self.completions[-1 - q]
        self.cycle_stalls = self.stalls[-q:]

    def _bulk(self):
        """The skipped whole cycles: busy time first, then the stalls of the same run."""
        env, res, step = self.env, self.res, self.step
        rest = step.count - self.limit
        cycles = rest // self.cycle_q
        t0 = env.now
        done = self.limit
        busy = step.compute_ps * rest
        _, end = res.compute.book(t0, busy)
        self._row(t0, end, "compute", "compute", flops=step.flops - step.flops * done // step.count, count=rest)
        for direction, items in (("load", step.loads), ("store", step.stores)):
            totals = self.load_totals if direction == "load" else self.store_totals
            for lvl, nbytes in items:
                level = res.levels[lvl]
                s, e, _ = level.transfer(t0, nbytes * rest, step.share)
                moved = totals[lvl] - totals[lvl] * done // step.count
                if direction == "load":
                    level.count(moved, read=True)
                    self._row(s, e, lvl, "transfer", moved, src=lvl, dst=self.load_dst, count=rest)
                else:
                    level.count(moved, read=False)
                    self._row(s, e, lvl, "transfer", moved, src=self.store_src, dst=lvl, count=rest)
        if step.unpack_ps:
            self._row(t0, t0 + step.unpack_ps * rest, "dequant", "compute", count=rest)
        per_cause: dict[str, int] = {}
        for stall in self.cycle_stalls:
            for cause, ps in stall.items():
                per_cause[cause] = per_cause.get(cause, 0) + ps * cycles
        t = end
        for cause, ps in sorted(per_cause.items()):
            self._row(t, t + ps, "compute", "stall", cause=cause, count=rest)
            t += ps
        yield env.timeout(self.cycle_ps * cycles)


def run_step(env: simpy.Environment, res: ChipResources, rec: Recorder, chip: str, task: OpTask, step: Step,
             fast_forward: bool):
    """Run one step; returns True when it was fast-forwarded approximately."""
    run = StepRun(env, res, rec, chip, task, step, fast_forward)
    yield from run.run()
    return run.approximate

"""Execution of one step: loads stream ahead of compute through SRAM buffers.

A loader process takes a free SRAM buffer, books the transfer on the source level's
channels and hands the arrival to the compute process, which waits for it, computes and
frees the buffer, then books the store of its output share. Every idle moment of compute
is recorded as a stall with its cause.

Steps repeat identical chunks. Once the pipeline reaches a steady state, each further
chunk adds exactly one period, so the engine simulates a prefix of chunks and advances
time by ``period x remaining`` (fast-forward). This is exact when the step has the chip's
resources to itself, which the scheduler guarantees, and a test compares it against the
chunk-by-chunk run.
"""
from __future__ import annotations

import simpy

from memsim.engine.recorder import Recorder
from memsim.engine.resources import ChipResources
from memsim.mapping.plan import OpTask, Step

PREFIX_CHUNKS = 8  # chunks simulated one by one before looking for a steady period


def share(total: int, count: int, index: int) -> int:
    """Chunk ``index``'s exact share of ``total`` split over ``count`` chunks."""
    return total * (index + 1) // count - total * index // count


def _pipeline(env: simpy.Environment, res: ChipResources, rec: Recorder, chip: str, task: OpTask, step: Step,
              count: int, completions: list[int], stalls: dict[str, int], first: bool = True):
    slots = simpy.Container(env, capacity=step.depth, init=step.depth)
    ready = simpy.Store(env)
    op, kind, layer = task.op, task.kind, task.layer
    levels = res.levels

    done_before = len(completions)
    totals = dict(step.total_loads)
    store_totals = dict(step.total_stores)

    def loader():
        for i in range(count):
            index = done_before + i
            asked = env.now
            free_when_asked = {lvl: levels[lvl].free_at for lvl, _ in step.loads}
            yield slots.get(1)
            now = env.now
            arrival, source, held = now, "sram", 0
            for lvl, nbytes in step.loads:
                level = levels[lvl]
                # How long this load waited for a free buffer after the level could have taken
                # it: that wait is SRAM capacity's fault; waiting behind busy channels is the level's.
                idle = now - max(asked, free_when_asked[lvl])
                start, end = level.transfer(now, nbytes)
                moved = share(totals[lvl], step.count, index)
                level.bytes_read += moved
                rec.add(start, end, chip, lvl, "transfer", op, kind, layer, moved, 0, lvl, "sram", "", 1)
                # A stream of requests pays the latency once: later requests were issued ahead.
                done = end + (level.latency_ps if i == 0 and first else 0)
                if done > arrival:
                    arrival, source, held = done, lvl, max(0, idle)
            ready.put((env.timeout(arrival - now), held, source))

    env.process(loader())
    last_store = 0
    store_level = ""
    for _ in range(count):
        index = len(completions)
        t0 = env.now
        arrived, blocked, source = yield ready.get()
        yield arrived
        now = env.now
        stalls.clear()
        if now > t0:
            capacity = min(now - t0, blocked)
            rec.add(t0, t0 + capacity, chip, "compute", "stall", op, kind, layer, 0, 0, "", "", "sram_capacity", 1)
            rec.add(t0 + capacity, now, chip, "compute", "stall", op, kind, layer, 0, 0, "", "", source, 1)
            stalls["sram_capacity"] = capacity
            stalls[source] = stalls.get(source, 0) + now - t0 - capacity
        start, end = res.compute.book(now, step.compute_ps)
        yield env.timeout(end - now)
        rec.add(start, end, chip, "compute", "compute", op, kind, layer, 0, share(step.flops, step.count, index),
                "", "", "", 1)
        slots.put(1)
        now = env.now
        for lvl, nbytes in step.stores:
            level = levels[lvl]
            s, e = level.transfer(now, nbytes)
            moved = share(store_totals[lvl], step.count, index)
            level.bytes_written += moved
            rec.add(s, e, chip, lvl, "transfer", op, kind, layer, moved, 0, "sram", lvl, "", 1)
            if e + level.latency_ps > last_store:
                last_store, store_level = e + level.latency_ps, lvl
        completions.append(env.now)
    if last_store > env.now:
        t0 = env.now
        yield env.timeout(last_store - t0)
        rec.add(t0, env.now, chip, "compute", "stall", op, kind, layer, 0, 0, "", "", store_level, 1)


def _steady_period(c: list[int]) -> int | None:
    if len(c) < 4:
        return None
    d = [c[-1] - c[-2], c[-2] - c[-3], c[-3] - c[-4]]
    return d[0] if d[0] == d[1] == d[2] else None


def run_step(env: simpy.Environment, res: ChipResources, rec: Recorder, chip: str, task: OpTask, step: Step,
             fast_forward: bool):
    completions: list[int] = []
    stalls: dict[str, int] = {}  # the last chunk's stall time per cause
    if not fast_forward or step.count <= PREFIX_CHUNKS + 1:
        yield from _pipeline(env, res, rec, chip, task, step, step.count, completions, stalls)
        return
    yield from _pipeline(env, res, rec, chip, task, step, PREFIX_CHUNKS, completions, stalls)
    rest = step.count - PREFIX_CHUNKS
    period = _steady_period(completions)
    if period is None or period != step.compute_ps + sum(stalls.values()):
        # No steady state yet: keep simulating chunk by chunk.
        yield from _pipeline(env, res, rec, chip, task, step, rest, completions, stalls, first=False)
        return
    yield from _bulk(env, res, rec, chip, task, step, rest, period, stalls)


def _bulk(env: simpy.Environment, res: ChipResources, rec: Recorder, chip: str, task: OpTask, step: Step,
          rest: int, period: int, stalls: dict[str, int]):
    """``rest`` more chunks of a steady pipeline: busy time first, then the stalls of the same run."""
    t0 = env.now
    op, kind, layer = task.op, task.kind, task.layer
    busy = step.compute_ps * rest
    done = step.count - rest
    flops = step.flops - step.flops * done // step.count
    _, end = res.compute.book(t0, busy)
    rec.add(t0, end, chip, "compute", "compute", op, kind, layer, 0, flops, "", "", "", rest)
    for direction, items in (("load", step.loads), ("store", step.stores)):
        totals = dict(step.total_loads if direction == "load" else step.total_stores)
        for lvl, nbytes in items:
            level = res.levels[lvl]
            s, e = level.transfer(t0, nbytes * rest)
            moved = totals[lvl] - totals[lvl] * done // step.count
            if direction == "load":
                level.bytes_read += moved
                src, dst = lvl, "sram"
            else:
                level.bytes_written += moved
                src, dst = "sram", lvl
            rec.add(s, e, chip, lvl, "transfer", op, kind, layer, moved, 0, src, dst, "", rest)
    t = end
    for cause, ps in sorted(stalls.items()):
        rec.add(t, t + ps * rest, chip, "compute", "stall", op, kind, layer, 0, 0, "", "", cause, rest)
        t += ps * rest
    yield env.timeout(period * rest)

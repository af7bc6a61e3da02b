"""Replay: a task identical to one already simulated takes identical intervals.

A task whose resources were idle when it started and when it ended, and which no other
task touched in between, ran as a pure function of its signature. Its rows, the bytes it
moved and the busy time it added are remembered. A later task with the same signature whose
resources are idle now, and which no other task can touch before it would end (the
scheduler's ``quiet_until``), replays them shifted in time: identical layers cost one
simulation.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memsim.engine.records import Interval
from memsim.engine.resources import Job, Server
from memsim.engine.watch import Touches, Watches
from memsim.hardware.resource import SYSTEM, ResourceId


@dataclass(frozen=True, slots=True)
class Memo:
    duration: int
    rows: tuple[Interval, ...]  # times relative to the task's start
    moved: tuple[tuple[int, int, int], ...]  # per server: bytes read, bytes written, busy time added
    rids: tuple[ResourceId, ...]  # the servers it ran on, in the task's footprint order


def key(signature: tuple, servers: list[Server]) -> tuple:
    """What decides a task's timing: its plan and what its resources are, not which chip (or
    region) they belong to, so identical layers on other chips or regions replay it too."""
    return signature, tuple((s.rid.kind, s.channels, s.bandwidth, s.latency_ps,
                             s.via is not None and (s.via.bandwidth, s.via.latency_ps)) for s in servers)


class Recording:
    """What a task's first simulation needs to become a memo: its ``key``, and its resources'
    accounts when it started."""

    __slots__ = ("signature", "start", "servers", "watches", "before", "clean")

    def __init__(self, signature: tuple, start: int, servers: list[Server], watches: Watches) -> None:
        self.signature = signature
        self.start = start
        self.servers = servers
        self.watches: list[Touches] = [watches[s] for s in servers]
        self.before = [(s.bytes_read, s.bytes_written, s.busy_ps, w.touches) for s, w in zip(servers, self.watches)]
        self.clean = all(s.idle(start) for s in servers)


class Replay:
    def __init__(self, watches: Watches) -> None:
        self.watches = watches  # who touched each server (``engine/watch.py``)
        self.memos: dict[tuple, Memo] = {}
        self.remapped: dict[tuple, tuple[Interval, ...]] = {}

    def lookup(self, signature: tuple, servers: list[Server], now: int, quiet_until: float) -> Memo | None:
        memo = self.memos.get(signature)
        if memo is None or now + memo.duration > quiet_until or not all(s.idle(now) for s in servers):
            return None
        return memo

    def remember(self, rec: Recording, job: Job, now: int, rows: list[Interval]) -> None:
        signature = rec.signature
        if not rec.clean or signature in self.memos:
            return
        moved = []
        for s, seen, (read, written, busy, touches) in zip(rec.servers, rec.watches, rec.before):
            touched_by_others = seen.touches - touches > 1 or (seen.touches != touches and seen.last_any is not job)
            if touched_by_others or not s.idle(now):
                return
            moved.append((s.bytes_read - read, s.bytes_written - written, s.busy_ps - busy))
        rel = tuple(r.moved(-rec.start, r.chip, r.op, r.layer) for r in rows)
        self.memos[signature] = Memo(now - rec.start, rel, tuple(moved), tuple(s.rid for s in rec.servers))

    def apply(self, memo: Memo, servers: list[Server], job: Job, start: int, op: str, layer: int) -> list[Interval]:
        """Account the remembered task as run now, on ``servers``; returns its rows shifted to
        ``start`` and moved onto this task's chip and resources."""
        watches = self.watches
        for s, (read, written, busy) in zip(servers, memo.moved):
            s.bytes_read += read
            s.bytes_written += written
            s.busy_ps += busy
            if read or written or busy:
                watches[s].replayed(job)
        chip = job.chip
        rows = self._moved_rows(memo, servers, chip)
        return [r.moved(start, chip, op, layer) for r in rows]

    def _moved_rows(self, memo: Memo, servers: list[Server], chip: int) -> tuple[Interval, ...]:
        """The memo's rows on this chip's resources (remapped once per memo and chip)."""
        key = (id(memo), tuple(id(s) for s in servers))
        rows = self.remapped.get(key)
        if rows is None:
            rids = dict(zip(memo.rids, (s.rid for s in servers)))

            def moved(rid: ResourceId) -> ResourceId:
                if rid in rids:
                    return rids[rid]
                return rid if rid.chip in (SYSTEM, chip) else dataclasses.replace(rid, chip=chip)

            rows = self.remapped[key] = tuple(r.moved(0, r.chip, r.op, r.layer, moved(r.resource)) for r in memo.rows)
        return rows

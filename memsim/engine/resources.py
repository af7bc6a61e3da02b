"""Engine resources: FIFO servers for compute units, memory-level channels and links.

A server grants requests in arrival order, each for a fixed service time, like a SimPy
``Resource`` of capacity one; it books the interval at request time instead of queueing a
request event, which makes one transfer cost one event however many channels it spans.
Requests are always made at the current simulated time, so the order is exact FIFO.
"""
from __future__ import annotations

from memsim.hardware.spec import ChipSpec, MemoryLevel
from memsim.units import transfer_ps


class Server:
    __slots__ = ("name", "free_at", "busy_ps")

    def __init__(self, name: str) -> None:
        self.name = name
        self.free_at = 0
        self.busy_ps = 0

    def book(self, now: int, duration: int) -> tuple[int, int]:
        start = max(now, self.free_at)
        self.free_at = start + duration
        self.busy_ps += duration
        return start, self.free_at


class Level:
    """A memory level: ``channels`` servers; a transfer is striped evenly over all of them."""

    __slots__ = ("spec", "channels", "channel_bw", "latency_ps", "bytes_read", "bytes_written")

    def __init__(self, spec: MemoryLevel, units: int) -> None:
        self.spec = spec
        self.channels = [Server(f"{spec.name}[{i}]") for i in range(spec.channels)]
        self.channel_bw = max(1, spec.effective_bandwidth(units) // spec.channels)
        self.latency_ps = spec.latency_ps
        self.bytes_read = 0
        self.bytes_written = 0

    @property
    def free_at(self) -> int:
        return max(ch.free_at for ch in self.channels)

    def duration(self, nbytes: int) -> int:
        return transfer_ps(-(-nbytes // len(self.channels)), self.channel_bw)

    def transfer(self, now: int, nbytes: int) -> tuple[int, int]:
        """Book a transfer at ``now``: (first channel start, last channel end)."""
        dur = self.duration(nbytes)
        start, end = None, 0
        for ch in self.channels:
            s, e = ch.book(now, dur)
            start = s if start is None else min(start, s)
            end = max(end, e)
        return start, end


class ChipResources:
    def __init__(self, chip: ChipSpec) -> None:
        self.chip = chip
        self.compute = Server("compute")
        self.levels = {lvl.name: Level(lvl, chip.compute.units) for lvl in chip.levels}
        # One server per link direction; single-chip plans do not use them yet.
        self.links = {f"{lk.name}:{d}": Server(f"{lk.name}:{d}") for lk in chip.links for d in ("tx", "rx")}

    def idle_at(self, now: int) -> bool:
        return self.compute.free_at <= now and all(
            ch.free_at <= now for lvl in self.levels.values() for ch in lvl.channels)

"""Engine resources: FIFO servers for compute units, memory-level channels and links.

A server grants requests in arrival order, each for a fixed service time, like a SimPy
``Resource`` of capacity one; it books the interval at request time instead of queueing a
request event, which makes one transfer cost one event however many channels it spans.
Requests are always made at the current simulated time, so the order is exact FIFO.

Links are ports too: a level reached over a link (host DDR over PCIe, external memory over
a wafer's I/O) books the link as well, and a link named in a plan (``link:NAME``, e.g. a wafer's
``execution.fabric``) can be a transfer's source.
"""
from __future__ import annotations

from memsim.hardware.spec import ChipSpec, LinkSpec, MemoryLevel
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


class Port:
    """A level or link: ``channels`` servers; a transfer is striped evenly over the channels
    its step may use, and over the link the port is reached through, if any."""

    __slots__ = ("name", "channels", "channel_bw", "latency_ps", "bytes_read", "bytes_written", "via")

    def __init__(self, name: str, channels: int, bandwidth: int, latency_ps: int, via: "Port | None" = None) -> None:
        self.name = name
        self.channels = [Server(f"{name}[{i}]") for i in range(channels)]
        self.channel_bw = max(1, bandwidth // channels)
        self.latency_ps = latency_ps
        self.bytes_read = 0
        self.bytes_written = 0
        self.via = via

    @classmethod
    def level(cls, spec: MemoryLevel, units: int, via: "Port | None") -> "Port":
        return cls(spec.name, spec.channels, spec.effective_bandwidth(units), spec.latency_ps, via)

    @classmethod
    def link(cls, spec: LinkSpec) -> "Port":
        return cls(f"link:{spec.name}", 1, spec.bandwidth_bytes_per_s, spec.latency_ps)

    @property
    def free_at(self) -> int:
        busy = max(ch.free_at for ch in self.channels)
        return max(busy, self.via.free_at) if self.via is not None else busy

    def count(self, nbytes: int, read: bool) -> None:
        """Account moved bytes here and on the link this port is reached over."""
        port: Port | None = self
        while port is not None:
            if read:
                port.bytes_read += nbytes
            else:
                port.bytes_written += nbytes
            port = port.via

    def width(self, share: float) -> int:
        return max(1, min(len(self.channels), round(len(self.channels) * share)))

    def duration(self, nbytes: int, share: float = 1.0) -> int:
        return transfer_ps(-(-nbytes // self.width(share)), self.channel_bw)

    def transfer(self, now: int, nbytes: int, share: float = 1.0) -> tuple[int, int, str]:
        """Book a transfer at ``now``: (start, end, the port that finished last)."""
        k = self.width(share)
        dur = transfer_ps(-(-nbytes // k), self.channel_bw)
        start, end = None, 0
        for ch in self.channels[:k]:
            s, e = ch.book(now, dur)
            start = s if start is None else min(start, s)
            end = max(end, e)
        limiter = self.name
        if self.via is not None:
            s, e, _ = self.via.transfer(now, nbytes)
            if e > end:
                end, limiter = e, self.via.name
        return start, end, limiter


class ChipResources:
    def __init__(self, chip: ChipSpec) -> None:
        self.chip = chip
        self.compute = Server("compute")
        links = {f"link:{lk.name}": Port.link(lk) for lk in chip.links}
        self.levels: dict[str, Port] = dict(links)
        for lvl in chip.levels:
            self.levels[lvl.name] = Port.level(lvl, chip.compute.units, links.get(f"link:{lvl.via}"))

    def idle_at(self, now: int) -> bool:
        return self.compute.free_at <= now and all(lvl.free_at <= now for lvl in self.levels.values())

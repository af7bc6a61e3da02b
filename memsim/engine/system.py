"""The links of a multi-chip system and collectives run over them.

Each direction of each cable of the system as built (``memsim.mapping.fabric``) is a
``Server`` with the achievable bandwidth of the parallel links it bundles (their bandwidth
times their efficiency) and the link's latency. A transfer requests every link on its route at
once (cut-through) and arrives when the slowest has finished plus one latency per hop and,
between chips, the protocol's step latency (``system.step_latency``). A collective runs its
rounds one after another: a round starts when the slowest transfer of the previous one has
arrived. This is what ``memsim.mapping.fabric`` costs a collective's rounds at.
"""
from __future__ import annotations

import simpy

from memsim.engine.records import Interval
from memsim.engine.resources import COMMUNICATION, Job, Server, system_link
from memsim.mapping.fabric import fabric
from memsim.mapping.plan import OpTask, Plan
from memsim.mapping.system import region_link


class SystemLinks:
    """The links between chips, and between the regions of a layer-pipelined chip. Transfers
    name units (``Plan.chip_of`` says which chip a unit is on)."""

    def __init__(self, env: simpy.Environment, plan: Plan) -> None:
        chip = plan.chip
        self.env, self.plan = env, plan
        self.fabric = fabric(chip, plan.chips) if plan.chips > 1 else None
        link = chip.interconnect
        self.ports = {(a, b): system_link(env, link, f"{link.name}[{a}>{b}]", rate)
                      for (a, b), rate in self.fabric.rate.items()} if self.fabric is not None else {}
        self._routes: dict[tuple[int, int], list[Server]] = {}
        self._latency: dict[tuple[int, int], int] = {}

    def route(self, src: int, dst: int) -> list[Server]:
        key = (src, dst)
        if key not in self._routes:
            a, b = self.plan.chip_of(src), self.plan.chip_of(dst)
            if a == b:  # neighbouring regions of a chip: one hop over its fabric
                link = region_link(self.plan.chip)
                port = system_link(self.env, link, f"{link.name}[{src}>{dst}]")
                self.ports[key] = port
                self._routes[key] = [port]
            else:
                assert self.fabric is not None
                self._routes[key] = [self.ports[e] for e in self.fabric.route(a, b)]
        return self._routes[key]

    def latency_ps(self, src: int, dst: int) -> int:
        """What a transfer pays besides its bytes: every hop's latency and, between chips, the
        protocol's step latency (regions of a chip hand over without a handshake)."""
        key = (src, dst)
        if key not in self._latency:
            step = self.plan.chip.system.step_latency_ps if self.plan.chip_of(src) != self.plan.chip_of(dst) else 0
            self._latency[key] = step + sum(p.latency_ps for p in self.route(src, dst))
        return self._latency[key]

    def servers(self, task: OpTask) -> list[Server]:
        """Every link a collective's or send's transfers cross."""
        out: dict[int, Server] = {}
        for transfers in task.rounds:
            for src, dst, _ in transfers:
                for port in self.route(src, dst):
                    out[id(port)] = port
        return list(out.values())


def run_collective(env: simpy.Environment, links: SystemLinks, task: OpTask, job: Job, rows: list[Interval]):
    """Run a collective's rounds; its link transfers are aggregated into one row per link."""
    extent: dict[Server, list] = {}
    for transfers in task.rounds:
        sent = []
        for src, dst, nbytes in transfers:
            hops = links.route(src, dst)
            uses = []
            for port in hops:
                uses.append(port.request(port.duration(nbytes), job, COMMUNICATION))
                port.count(nbytes, read=True)
                ext = extent.setdefault(port, [-1, 0, 0, 0, f"chip{src}", f"chip{dst}"])
                ext[2] += nbytes
                ext[3] += 1
                if (ext[4], ext[5]) != (f"chip{src}", f"chip{dst}"):  # several pairs share this link
                    ext[4] = ext[5] = ""
            sent.append((uses, links.latency_ps(src, dst)))
        arrival = env.now
        for uses, latency in sent:
            end = env.now
            for use in uses:
                if use.callbacks is not None:
                    yield use
                ext = extent[use.resource]
                ext[0] = use.start if ext[0] < 0 else ext[0]
                ext[1] = max(ext[1], use.end)
                end = max(end, use.end)
            arrival = max(arrival, end + latency)
        if arrival > env.now:
            yield env.timeout(arrival - env.now)
    for port, (first, last, nbytes, n, src, dst) in extent.items():
        rows.append(Interval(first, last, job.chip, port.rid, "transfer", task.op, task.kind, task.layer,
                             bytes=nbytes, src=src, dst=dst, count=n, stream=job.stream,
                             energy_fj=nbytes * 8 * port.energy_fj_per_bit))

"""The links of a multi-chip system and collectives run over them.

Each direction of each topology edge is a port (a FIFO server with the interconnect's
bandwidth and latency). A transfer books every port on its route at once (cut-through) and
arrives when the slowest has finished plus one latency per hop. A collective runs its rounds
one after another; the chip that waits for it records the time as a ``link:NAME`` stall.
"""
from __future__ import annotations

import simpy

from memsim.engine.recorder import Recorder
from memsim.engine.resources import Port
from memsim.hardware import topologies
from memsim.hardware.spec import ChipSpec
from memsim.mapping.plan import OpTask


class SystemLinks:
    def __init__(self, chip: ChipSpec, chips: int) -> None:
        link = chip.interconnect
        self.topology = topologies.get(chip.system.topology)
        self.graph = self.topology.build(chips)
        self.ports = {(a, b): Port(f"link:{link.name}[{a}>{b}]", 1, link.bandwidth_bytes_per_s, link.latency_ps)
                      for a, b in self.graph.edges}
        self._routes: dict[tuple[int, int], list] = {}

    def route(self, src: int, dst: int) -> list[Port]:
        key = (src, dst)
        if key not in self._routes:
            self._routes[key] = [self.ports[e] for e in self.topology.route(self.graph, src, dst)]
        return self._routes[key]

    def send(self, now: int, src: int, dst: int, nbytes: int, rec: Recorder, task: OpTask, chip: str) -> int:
        """Book one transfer along its route; returns its arrival time."""
        end = now
        hops = self.route(src, dst)
        for port in hops:
            s, e, _ = port.transfer(now, nbytes)
            port.count(nbytes, read=True)
            rec.add(s, e, chip, port.name, "transfer", task.op, task.kind, task.layer, nbytes, 0, f"chip{src}",
                    f"chip{dst}", "", 1)
            end = max(end, e)
        return end + sum(p.latency_ps for p in hops)

    def idle_at(self, now: int) -> bool:
        return all(p.free_at <= now for p in self.ports.values())


def run_collective(env: simpy.Environment, links: SystemLinks, rec: Recorder, task: OpTask, chip: str):
    t0 = env.now
    for transfers in task.rounds:
        now = env.now
        arrival = max((links.send(now, src, dst, n, rec, task, chip) for src, dst, n in transfers), default=now)
        yield env.timeout(arrival - now)
    rec.add(t0, env.now, chip, "compute", "stall", task.op, task.kind, task.layer, 0, 0, "", "", task.bound, 1)

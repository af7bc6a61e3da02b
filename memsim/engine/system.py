"""The links of a multi-chip system and collectives run over them.

Each direction of each cable of the system as built (``memsim.mapping.fabric``) is a
``Server`` with the achievable bandwidth of the parallel links it bundles (their bandwidth
times their efficiency) and the link's latency. A transfer requests every link on its route at
once (cut-through) and arrives when the slowest has finished plus one latency per hop and,
between chips, the protocol's step latency (``system.step_latency``). A collective runs its
rounds one after another: a round starts when the slowest transfer of the previous one has
arrived. This is what ``memsim.mapping.fabric`` costs a collective's rounds at.

A collective whose links no other stream uses finds them idle at every round's start, so what
it does there is a pure function of its rounds (``Played``): its ranks' transfers are worked
out once per distinct round and collective, and each run of it is one timeout however many
ranks it has (``play``). Otherwise its transfers are requested one by one (``run_collective``).
"""
from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from simpy.events import Event

from memsim.engine.records import Interval
from memsim.engine.resources import COMMUNICATION, Job, Server, system_link
from memsim.engine.simpy_fast import Environment
from memsim.mapping.fabric import channel_floors
from memsim.mapping.plan import OpTask, Plan
from memsim.mapping.system import Direction, Routes, region_link


class SystemLinks:
    """The links between chips, and between the regions of a layer-pipelined chip: a server for
    each direction of the plan's routes (``Plan.routes``, ``mapping.system.Routes``). Transfers
    name units (``Plan.chip_of`` says which chip a unit is on)."""

    def __init__(self, env: Environment, plan: Plan) -> None:
        self.env, self.plan = env, plan
        self.routes = plan.routes if plan.routes is not None else Routes(plan.chip, plan.chips, plan.regions, plan.tp)
        self.fabric = self.routes.fabric
        self.ports: dict[Direction, Server] = {}
        if self.fabric is not None:
            link = self.fabric.link
            self.ports = {(False, a, b): system_link(env, link, (a, b), rate)
                          for (a, b), rate in self.fabric.rate.items()}
        self._routes: dict[tuple[int, int], list[Server]] = {}
        self._latency: dict[tuple[int, int, int], int] = {}
        self._played: dict[tuple[int, int, int], tuple[object, Played]] = {}  # by id of the rounds (kept alive here)
        self._rounds: dict[tuple[int, int, int], tuple[object, int, dict[Server, list]]] = {}

    def route(self, src: int, dst: int) -> list[Server]:
        key = (src, dst)
        if key not in self._routes:
            self._routes[key] = [self._port(d) for d in self.routes.directions(src, dst)]
        return self._routes[key]

    def _port(self, direction: Direction) -> Server:
        port = self.ports.get(direction)
        if port is None:  # a hop between neighbouring regions of a chip, over its fabric
            port = self.ports[direction] = system_link(self.env, region_link(self.plan.chip), direction[1:])
        return port

    def latency_ps(self, src: int, dst: int, step_ps: int = -1) -> int:
        """What a transfer pays besides its bytes: every hop's latency and, between chips, the
        protocol's step latency (regions of a chip hand over without a handshake; ``step_ps``: a
        library protocol's in place of the chip's)."""
        key = (src, dst, step_ps)
        if key not in self._latency:
            self._latency[key] = self.routes.step_latency_ps(src, dst, step_ps) + \
                sum(p.latency_ps for p in self.route(src, dst))
        return self._latency[key]

    def servers(self, task: OpTask) -> list[Server]:
        """Every link a collective's or send's transfers cross."""
        out: dict[int, Server] = {}
        for transfers in {id(r): r for r in task.rounds}.values():  # a round repeated as one tuple: once
            for src, dst, _ in transfers:
                for port in self.route(src, dst):
                    out[id(port)] = port
        return list(out.values())


    def played(self, rounds, step_ps: int = -1, channel_rate: int = 0) -> Played:
        """What ``rounds`` do on idle links (at a library protocol's ``step_ps`` a round, -1: the
        chip's; no transfer faster than its library's ``channel_rate``), worked out once per rounds
        tuple (a model's collectives of one size share theirs)."""
        key = (id(rounds), step_ps, channel_rate)
        memo = self._played.get(key)
        if memo is None:
            memo = self._played[key] = (rounds, self._play(rounds, step_ps, channel_rate))
        return memo[1]

    def _play(self, rounds, step_ps: int, channel_rate: int) -> Played:
        links: dict[Server, list] = {}  # port -> [first start, last end, bytes, transfers, src, dst, busy]
        t = 0
        for transfers in rounds:
            length, ports = self._round(transfers, step_ps, channel_rate)
            for port, (busy, nbytes, n, src, dst) in ports.items():
                e = links.get(port)
                if e is None:
                    links[port] = [t, t + busy, nbytes, n, src, dst, busy]
                    continue
                e[1] = t + busy
                e[2] += nbytes
                e[3] += n
                e[6] += busy
                if (e[4], e[5]) != (src, dst):
                    e[4] = e[5] = ""
            t += length
        return Played(t, tuple((port, *e) for port, e in links.items()))

    def _round(self, transfers, step_ps: int, channel_rate: int) -> tuple[int, dict[Server, list]]:
        """One round on idle links: each port serves its transfers back to back in the order
        asked, and the round lasts until the last transfer's last hop plus its latencies."""
        memo = self._rounds.get((id(transfers), step_ps, channel_rate))
        if memo is not None:
            return memo[1], memo[2]
        ports: dict[Server, list] = {}  # port -> [busy, bytes, transfers, src, dst] (-1: several pairs)
        took: dict[tuple[Server, int], int] = {}  # (port, bytes) -> ps
        floors = channel_floors(transfers, channel_rate)
        end = 0
        for src, dst, nbytes in transfers:
            done = floors.get(src, 0)
            for port in self.route(src, dst):
                ps = took.get((port, nbytes))
                if ps is None:
                    ps = took[port, nbytes] = port.duration(nbytes)
                e = ports.get(port)
                if e is None:
                    e = ports[port] = [0, 0, 0, src, dst]
                elif e[3] != src or e[4] != dst:  # several pairs share this link
                    e[3] = e[4] = -1
                e[0] += ps
                e[1] += nbytes
                e[2] += 1
                if e[0] > done:
                    done = e[0]
            if done + self.latency_ps(src, dst, step_ps) > end:
                end = done + self.latency_ps(src, dst, step_ps)
        labelled = {port: [*e[:3], *(("", "") if e[3] < 0 else (f"chip{e[3]}", f"chip{e[4]}"))]
                    for port, e in ports.items()}
        self._rounds[(id(transfers), step_ps, channel_rate)] = (transfers, end, labelled)
        return end, labelled


@dataclass(frozen=True, slots=True)
class Played:
    """A collective run on idle links: how long it takes, and per link its first start and
    last end (from the collective's start), bytes, transfers, the pair it carried ("" where
    several shared it) and the time it was held."""
    duration: int
    links: tuple[tuple[Server, int, int, int, int, str, str, int], ...]


def play(env: Environment, played: Played, task: OpTask, job: Job,
         rows: list[Interval]) -> Generator[Event, object, None]:
    """A collective whose links are idle and used by no other stream, as one timeout: the
    links' accounts and rows are what ``run_collective`` would leave."""
    now = env.now_ps
    for port, first, last, nbytes, n, src, dst, busy in played.links:
        port.busy_ps += busy
        port.bytes_read += nbytes
        if port.watch is not None:  # as its requests would have
            port.watch.request(job, COMMUNICATION)
        port.horizon = max(port.horizon, now + last)
        rows.append(Interval(start_ps=now + first, end_ps=now + last, chip=job.chip, resource=port.rid, kind="transfer",
                             op=task.op, op_kind=task.kind, layer=task.layer, bytes=nbytes, src=src, dst=dst, count=n,
                             stream=job.stream, energy_fj=nbytes * 8 * port.energy_fj_per_bit, busy_ps=busy))
    if played.duration:
        yield env.timeout(played.duration)


def run_collective(env: Environment, links: SystemLinks, task: OpTask, job: Job,
                   rows: list[Interval]) -> Generator[Event, object, None]:
    """Run a collective's rounds; its link transfers are aggregated into one row per link."""
    extent: dict[Server, list] = {}
    for transfers in task.rounds:
        sent = []
        start = env.now_ps
        floors = channel_floors(transfers, task.channel_rate)
        for src, dst, nbytes in transfers:
            hops = links.route(src, dst)
            uses = []
            for port in hops:
                hold = port.duration(nbytes)
                uses.append(port.request(hold, job, COMMUNICATION))
                port.count(nbytes, read=True)
                ext = extent.setdefault(port, [-1, 0, 0, 0, f"chip{src}", f"chip{dst}", 0])
                ext[2] += nbytes
                ext[3] += 1
                ext[6] += hold
                if (ext[4], ext[5]) != (f"chip{src}", f"chip{dst}"):  # several pairs share this link
                    ext[4] = ext[5] = ""
            floor = start + floors.get(src, 0)
            sent.append((uses, links.latency_ps(src, dst, task.step_ps), floor))
        arrival = env.now_ps
        for uses, latency, floor in sent:
            end = max(env.now_ps, floor)
            for use in uses:
                if use.callbacks is not None:
                    yield use
                ext = extent[use.resource]
                ext[0] = use.start if ext[0] < 0 else ext[0]
                ext[1] = max(ext[1], use.end)
                end = max(end, use.end)
            arrival = max(arrival, end + latency)
        if arrival > env.now_ps:
            yield env.timeout(arrival - env.now_ps)
    for port, (first, last, nbytes, n, src, dst, busy) in extent.items():
        rows.append(Interval(start_ps=first, end_ps=last, chip=job.chip, resource=port.rid, kind="transfer", op=task.op,
                             op_kind=task.kind, layer=task.layer, bytes=nbytes, src=src, dst=dst, count=n, stream=job.stream,
                             energy_fj=nbytes * 8 * port.energy_fj_per_bit, busy_ps=busy))

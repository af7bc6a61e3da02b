"""Frozen specs of a chip's links and of the system its chips are joined into by them.

A ``LinkSpec`` is one kind of physical link on a chip (NVLink, ICI, C2C, PCIe): the bandwidth of
one link, how many of them the chip has, their hop latency and achievable fraction. A
``SystemSpec`` says how chips are cabled into a system: the topology, the link that joins
them, how many links join each pair of neighbours and, for a dragonfly, the groups and the
links that leave them; and which all-reduce algorithm runs over them.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.core import units
from memsim.hardware.checks import check_fields, least_rate
from memsim.hardware.fields import spec_field
from memsim.hardware.topologies import TOPOLOGIES


@dataclass(frozen=True, slots=True)
class LinkSpec:
    name: str = spec_field("name", "name", "link name, e.g. `nvlink` or `pcie`")
    bandwidth_bytes_per_s: int = spec_field("bandwidth", "bandwidth", "bandwidth of one physical link, per direction")
    latency_ps: int = spec_field("latency", "time", "one-way latency of one hop")
    efficiency: float = spec_field(
        "efficiency", "ratio", "achievable fraction of the bandwidth for bulk transfers (calibrated on ring "
        "all-reduce bus bandwidth)", 1.0
    )
    energy_fj_per_bit: int = spec_field("energy", "bit_energy", "dynamic energy per bit sent, both ends included", 0)
    count: int = spec_field(
        "count", "count", "physical links of this kind on one chip: the chip's bandwidth over them is count x "
        "bandwidth per direction; between chips the system spreads them over its neighbours (`system.links_per_peer`)",
        1, least=1
    )

    def __post_init__(self) -> None:  # a spec built in Python is checked as the loader checks YAML
        check_fields(self, units.entry("links", self.name))
        least_rate(self.bandwidth_bytes_per_s * self.efficiency, units.entry("links", self.name) + ".bandwidth",
                   "bandwidth x efficiency")

    @property
    def peak_bandwidth(self) -> int:
        """Bytes per second each way over all of the chip's links of this kind."""
        return self.count * self.bandwidth_bytes_per_s

    def achievable(self, links: int) -> int:
        """Achievable bytes per second each way over ``links`` of these links in parallel."""
        return max(1, int(links * self.bandwidth_bytes_per_s * self.efficiency))

    @property
    def effective_bandwidth(self) -> int:
        """Achievable bytes per second each way over all of the chip's links of this kind."""
        return self.achievable(self.count)


@dataclass(frozen=True, slots=True)
class SystemSpec:
    topology: str = spec_field("topology", "choice", "how chips are joined: a topology registered in "
                               "memsim.hardware.topologies", "switch", choices=TOPOLOGIES.names)
    link: str = spec_field("link", "text", "the chip link that joins chips (default: the first link)", "")
    # Checked by the mapping, where the algorithms are registered (hardware does not import mapping).
    collective: str = spec_field("collective", "choice", "all-reduce algorithm registered in "
                                 "memsim.mapping.collectives, or auto (the one that costs least on the system for "
                                 "the message)", "auto")
    step_latency_ps: int = spec_field(
        "step_latency", "time", "protocol latency every step of a collective (and every send) between chips pays "
        "on top of the link latencies of its route: the handshake with its peer (calibrated on small all-reduces)", 0
    )
    links_per_peer: int = spec_field(
        "links_per_peer", "count", "physical links of `link` joining each pair of neighbouring chips (in a "
        "`dragonfly`, each pair within a group); 0: the chip's `count` of them spread evenly over its topology's "
        "neighbours, all of them into the switch on a `switch`", 0
    )
    group: int = spec_field(
        "group", "count", "chips in a group: fully connected within it in a `dragonfly`, and the node the "
        "`hierarchical` all-reduce works within (0: the whole system is one group)", 0
    )
    global_links: int = spec_field(
        "global_links", "count", "links of each chip that join its group to other groups in a `dragonfly`", 0
    )

    def __post_init__(self) -> None:
        check_fields(self, "system")

"""Multi-chip mapping: pipeline stages, stage-to-stage sends and collectives as link rounds.

The DAG describes one tensor-parallel rank. Ranks of a stage run identical shards, so the
plan runs each stage's ops on its first rank's chip; collectives are expanded into rounds
of point-to-point transfers among all ranks, which the engine routes over the topology.
"""
from __future__ import annotations

from memsim.errors import ConfigError
from memsim.hardware.resource import Ref
from memsim.hardware import topologies
from memsim.hardware.spec import ChipSpec
from memsim.mapping import collectives
from memsim.mapping.plan import COMM, OpTask
from memsim.units import PS_PER_S
from memsim.workload.graph import Op, OpGraph


def _link(chip: ChipSpec):
    link = chip.interconnect
    if link is None:
        raise ConfigError("a multi-chip run needs a link between chips", field="links")
    return link


def collective_task(op: Op, chip: ChipSpec, stage: int, tp: int, deps: tuple[str, ...], name: str) -> OpTask:
    link = _link(chip)
    group = [stage * tp + r for r in range(tp)]
    nbytes = op.dim("bytes")
    if op.kind == "allreduce":
        hops = topologies.get(chip.system.topology).transfer_hops
        rounds = collectives.allreduce(group, nbytes, link.bandwidth_bytes_per_s, hops * link.latency_ps / PS_PER_S,
                                       chip.system.collective)
    else:
        rounds = collectives.COLLECTIVES[op.kind](group, nbytes)
    return OpTask(name, op.kind, op.layer, op.flops, chip.execution.kernel_overhead_ps, (), deps,
                  Ref.link(link.name), chip=stage * tp, rounds=tuple(rounds), stream=COMM, graph_op=op.name)


def send_task(last: Op, graph: OpGraph, chip: ChipSpec, src: int, dst: int, tp: int, dep: str,
              suffix: str = "") -> OpTask:
    """Each rank of stage ``src`` sends the activation to its counterpart in stage ``dst``."""
    link = _link(chip)
    nbytes = graph.tensors[last.outputs[0]].bytes
    transfers = tuple((src * tp + r, dst * tp + r, nbytes) for r in range(tp))
    return OpTask(f"send.stage{src}-{dst}{suffix}", "sendrecv", last.layer, 0, 0, (), (dep,), Ref.link(link.name),
                  chip=src * tp, rounds=(transfers,), stream=COMM)


def link_bytes(tasks: list[OpTask], chip: ChipSpec, chips: int) -> dict[str, tuple[int, int]]:
    """Every link direction's traffic for the roofline: (bytes, bandwidth) per direction of each
    link between chips, and of each chip link a step moves bytes over (a wafer's fabric)."""
    out: dict[str, tuple[int, int]] = {}
    if chips > 1 and chip.interconnect is not None:
        topo = topologies.get(chip.system.topology)
        graph = topo.build(chips)
        bw = chip.interconnect.bandwidth_bytes_per_s
        edges: dict[tuple, int] = {}
        for t in tasks:
            for transfers in t.rounds:
                for src, dst, nbytes in transfers:
                    for edge in topo.route(graph, src, dst):
                        edges[edge] = edges.get(edge, 0) + nbytes
        for (a, b), nbytes in edges.items():
            out[f"link:{chip.interconnect.name}[{a}>{b}]"] = (nbytes, bw)
    per_chip: dict[tuple[int, str], int] = {}
    for t in tasks:
        for step in t.steps:
            for ref, nbytes in step.total_loads + step.total_stores:
                if ref.is_link:
                    per_chip[(t.chip, ref.name)] = per_chip.get((t.chip, ref.name), 0) + nbytes
    for (_, name), nbytes in per_chip.items():  # the busiest chip's share of each chip link
        if nbytes > out.get(f"link:{name}", (0, 0))[0]:
            out[f"link:{name}"] = (nbytes, chip.link(name).bandwidth_bytes_per_s)
    return out

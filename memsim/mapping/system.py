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


def stages(order: list[Op], pp: int) -> list[int]:
    """Pipeline stage of each op: layers split evenly; ops before the first layer go to the
    first stage and ops after the last layer to the last."""
    layers = 1 + max((op.layer for op in order), default=0)
    if pp > max(1, layers):
        raise ConfigError(f"{pp} pipeline stages for {layers} layers", field="--pp")
    out, seen_layer = [], False
    for op in order:
        if op.layer >= 0:
            seen_layer = True
            out.append(op.layer * pp // layers)
        else:
            out.append(pp - 1 if seen_layer else 0)
    return out


def _link(chip: ChipSpec):
    link = chip.interconnect
    if link is None:
        raise ConfigError("a multi-chip run needs a link between chips", field="links")
    return link


def collective_task(op: Op, chip: ChipSpec, stage: int, tp: int, deps: tuple[str, ...]) -> OpTask:
    link = _link(chip)
    group = [stage * tp + r for r in range(tp)]
    nbytes = op.dim("bytes")
    if op.kind == "allreduce":
        hops = topologies.get(chip.system.topology).transfer_hops
        rounds = collectives.allreduce(group, nbytes, link.bandwidth_bytes_per_s, hops * link.latency_ps / PS_PER_S,
                                       chip.system.collective)
    else:
        rounds = collectives.COLLECTIVES[op.kind](group, nbytes)
    return OpTask(op.name, op.kind, op.layer, op.flops, chip.execution.kernel_overhead_ps, (), deps,
                  Ref.link(link.name), chip=stage * tp, rounds=tuple(rounds), stream=COMM)


def send_task(last: Op, graph: OpGraph, chip: ChipSpec, src: int, dst: int, tp: int) -> OpTask:
    """Each rank of stage ``src`` sends the activation to its counterpart in stage ``dst``."""
    link = _link(chip)
    nbytes = graph.tensors[last.outputs[0]].bytes
    transfers = tuple((src * tp + r, dst * tp + r, nbytes) for r in range(tp))
    return OpTask(f"send.stage{src}-{dst}", "sendrecv", last.layer, 0, 0, (), (last.name,), Ref.link(link.name),
                  chip=src * tp, rounds=(transfers,), stream=COMM)

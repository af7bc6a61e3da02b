"""A finished step's timeline rows, built from the aggregates it kept while its chunks ran.

On the compute stream, the compute units' time from the step's start to its end is laid out as one compute row
(the busy time of all chunks) followed by one stall row per cause, so a chip's compute rows
still tile its whole timeline. Each level the step read or wrote gets one transfer row from
its first transfer's start to its last one's end, with the exact bytes moved, and so does the
link the level is reached over (PCIe, a wafer's I/O), which carries the same bytes. Each row
stands for the step's ``count`` chunks; its bytes and FLOPs are totals over them. Unpacking a
weight-only format is a ``dequant`` interval beside compute, not compute.
"""
from __future__ import annotations

from functools import partial

from memsim.engine.pipeline import StepRun
from memsim.engine.records import COMPUTE, DEQUANT, Interval, keep
from memsim.hardware.resource import ResourceId

TRANSFER = "transfer"


def step_rows(run: StepRun) -> list[Interval]:
    t, task, chip, step = run.started, run.task, run.res.index, run.step
    row = partial(Interval, chip=chip, op=task.op, op_kind=task.kind, layer=task.layer, stream=run.job.stream,
                  count=step.count)
    compute = run.res.compute.rid
    rows = []
    if run.step.compute_ps or run.job.stream == COMPUTE:  # a copy leaves compute to the others
        rows.append(row(start_ps=t, end_ps=t + run.busy_ps, resource=compute, kind="compute", flops=step.flops,
                        energy_fj=step.compute_fj))
        t += run.busy_ps
        for cause, ps in sorted(run.stalls.items(), key=lambda kv: kv[0].order):
            rows.append(row(start_ps=t, end_ps=t + ps, resource=compute, kind="stall", cause=cause))
            t += ps
    if run.unpack_ps:
        rows.append(row(start_ps=run.first_unpack, end_ps=run.first_unpack + run.unpack_ps,
                        resource=ResourceId.dequant(chip), kind=DEQUANT, energy_fj=step.unpack_fj))
    for load, ports, totals in ((True, run.loads, run.load_totals), (False, run.stores, run.store_totals)):
        for i, (port, total) in enumerate(zip(ports, totals)):
            src, dst = (port.name, run.load_dst) if load else (run.store_src, port.name)
            servers = (port.server,) if port.server.via is None else (port.server, port.server.via)
            for via, server in enumerate(servers):
                key = (i, load, bool(via))
                first, last = run.row_begins.get(key, run.started), run.row_ends.get(key, run.started)
                hold = port.via_hold if via else port.hold  # each of the step's chunks holds it this long
                rows.append(row(start_ps=first, end_ps=last, resource=server.rid, kind=TRANSFER, bytes=total, src=src,
                                dst=dst, energy_fj=total * 8 * server.energy_fj_per_bit, busy_ps=hold * run.count))
    return [r for r in rows if keep(r)]

"""Weight prefetch: the copy stream stages the next operators' weights into SRAM.

With ``execution.weight_prefetch = N``, each GEMM whose weights live in a slower level gets
a prefetch task on its chip's copy stream: a direct copy of the weights it reads from their
home into the SRAM staging area. The prefetch for a chip's j-th such GEMM may start once its
(j - N - 1)-th has finished, so up to N GEMMs' weights are staged ahead of the running one,
and it takes its bytes of the staging area (half the SRAM; tiles get the other half) before
it starts; the GEMM gives them back when it is done. The GEMM itself then reads its weights
from SRAM. Weights larger than the staging area stream as usual ("where capacity allows").

The copy is cut into few large transfers (a DMA engine moves big bursts) at the lowest
priority: demand traffic preempts it, so it uses the bandwidth the running operators leave
idle. Its writes land in the staging area's banks and are not charged to SRAM bandwidth.
"""
from __future__ import annotations

import dataclasses
import math

from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.lower import Context
from memsim.mapping.plan import COPY, OpTask, Step
from memsim.workload.graph import Op

COPY_CHUNKS = 16  # transfers a prefetch is cut into
STAGING = Ref.level("sram")


def staging_area(chip: ChipSpec, share: float = 1.0) -> int:
    """SRAM a chip (or a region with ``share`` of it) sets aside for prefetched weights (0 when
    prefetch is off)."""
    if not chip.execution.weight_prefetch:
        return 0
    return round(chip.chip_capacity(chip.sram) * share) // 2


def copy_step(label: str, loads: dict[Ref, int], into: Ref | None, depth: int) -> Step:
    """A direct (DMA) copy of ``loads`` into level ``into``, in few large transfers. Without
    ``into`` it lands in the SRAM staging area, whose writes are not charged."""
    nbytes = sum(loads.values())
    n = max(1, min(COPY_CHUNKS, math.ceil(nbytes / 4096)))
    per = tuple((ref, -(-b // n)) for ref, b in sorted(loads.items(), key=lambda kv: str(kv[0])))
    stores = ((into, -(-nbytes // n)),) if into is not None else ()
    return Step(label, n, per, stores, 0, 0, depth, 0, tuple(sorted(loads.items(), key=lambda kv: str(kv[0]))),
                ((into, nbytes),) if into is not None else (), direct=True)


class Prefetcher:
    """Prefetch tasks for the GEMMs of every chip, in each chip's stream order."""

    def __init__(self) -> None:
        self.users: dict[int, list[str]] = {}  # chip -> its GEMMs with prefetched weights, in order

    def stage(self, op: Op, cx: Context, chip: int, name: str) -> tuple[OpTask | None, Context]:
        """The prefetch for ``op`` (None when it gets none) and the context to lower it in."""
        budget = cx.staging_bytes
        if not budget or op.kind != "matmul":
            return None, cx
        weights = {r.tensor: r.bytes for r in op.inputs if cx.graph.tensors[r.tensor].klass == "weight"
                   and cx.homes[r.tensor] != STAGING.name}
        homes = {cx.homes[t] for t in weights}
        nbytes = sum(weights.values())
        if not weights or nbytes > budget or len(homes) != 1:
            return None, cx
        users = self.users.setdefault(chip, [])
        ahead = cx.chip.execution.weight_prefetch
        deps = (users[-ahead - 1],) if len(users) > ahead else ()
        users.append(name)
        source = Ref.level(homes.pop())
        task = OpTask(f"prefetch.{name}", "prefetch", op.layer, 0, 0, (copy_step("prefetch", {source: nbytes}, None,
                                                                                  cx.depth),), deps,
                      source, chip=chip, stream=COPY, graph_op="", acquires=nbytes)
        staged = dataclasses.replace(cx, homes={**cx.homes, **{t: STAGING.name for t in weights}})
        return task, staged

    def finished_by(self, chip: int, name: str, task: str) -> None:
        """The GEMM ``name`` gives its staged weights back when ``task`` ends (its last part)."""
        users = self.users.get(chip, [])
        if name in users:
            users[users.index(name)] = task

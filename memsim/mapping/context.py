"""What a lowering is given about an operator's surroundings: ``Context``.

The chip, the step's graph and where its tensors live, the share of the chip and of its SRAM the
operator's stage has, the runtime stack whose kernels run it and what each kernel costs to
dispatch, and the rates and energies that follow from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.hardware import rates
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec
from memsim.mapping.dispatch import NO_DISPATCH, Dispatch
from memsim.stack.spec import IDEAL, StackSpec
from memsim.workload.dtypes import BITS
from memsim.workload.graph import OpGraph


@dataclass(frozen=True, slots=True)
class Context:
    chip: ChipSpec
    graph: OpGraph
    homes: dict
    attention: str = "fused"  # the family may force unfused attention
    compute_share: rates.Share = rates.WHOLE  # of the chip's compute, SRAM and channels an op gets (a wafer region)
    microbatch: int = 0  # which micro-batch of the step the op belongs to
    staging_bytes: int = 0  # SRAM set aside for prefetched weights: tiles get the rest
    grid: bool = False  # a kernel launches one work item per unit (a GPU grid); else the compiler spreads an op
    stage: int = 0  # the pipeline stage (chip or region) the op runs on; lowering never depends on it
    staged: tuple[tuple[str, int], ...] = ()  # tensor -> bytes of its read that a prefetch put in SRAM
    room_bytes: int = -1  # SRAM of the op's stage that tiles and staging share (``layout.place_stage``); -1: its share
    stack: StackSpec = IDEAL  # the runtime stack: which kernels run, how they are dispatched
    dispatch: Dispatch = NO_DISPATCH  # what each kernel of the step costs to dispatch (``mapping.dispatch``)

    @property
    def room(self) -> int:
        """The SRAM of the op's stage (chip or region) that its tiles and the staging area share."""
        if self.room_bytes >= 0:
            return self.room_bytes
        return rates.shared(self.chip.chip_capacity(self.chip.scratchpad), self.compute_share)

    @property
    def sram_bytes(self) -> int:
        """The SRAM an op's tiles may use: its region's room, less the prefetch staging area."""
        return self.room - self.staging_bytes

    @property
    def depth(self) -> int:
        return self.chip.execution.prefetch_depth

    def matrix_rate(self, dtype: str) -> int:
        compute = self.chip.compute
        return rates.shared(compute.peak(dtype) * compute.matrix_efficiency(dtype), self.compute_share)

    def special_rate(self) -> int:
        """The special-function units' rate (exponentials a second) inside a model step; 0: none declared."""
        compute = self.chip.compute
        if not compute.special_flops_per_s:
            return 0
        return rates.shared(compute.special_flops_per_s * compute.kernel_efficiency, self.compute_share)

    def peak_rate(self, dtype: str) -> int:
        """The matrix units' peak for ``dtype`` inside a model step: no GEMM's ``dtype_efficiency``."""
        compute = self.chip.compute
        return rates.shared(compute.peak(dtype) * compute.kernel_efficiency, self.compute_share)

    def vector_rate(self) -> int:
        return rates.shared(self.chip.compute.vector_flops_per_s * self.chip.compute.efficiency, self.compute_share)

    def matrix_energy(self, flops: int, dtype: str) -> int:
        """Femtojoules ``flops`` of ``dtype`` cost on the matrix units."""
        return flops * self.chip.compute.flop_energy(dtype)

    def vector_energy(self, flops: int) -> int:
        return flops * self.chip.compute.vector_energy_fj_per_flop

    def bits(self, tensor: str) -> int:
        return BITS[self.graph.tensors[tensor].dtype]

    def home(self, tensor: str) -> Ref:
        return Ref.level(self.homes[tensor])

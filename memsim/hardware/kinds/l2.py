"""A chip-wide cache between device memory and the units' scratchpads (a GPU's L2)."""
from memsim.hardware.kinds import CHIP, CORE, LevelKind, register

register(LevelKind(
    name="l2", domain=CHIP, holds=("activation",), clock=CORE, cache=True, color="#9467bd",
    help="a chip-wide cache in front of device memory: keeps activations between operators, and its bandwidth "
         "shapes a GEMM library's tiles"))

"""The compute units' scratchpad: a GPU's shared memory, a dataflow chip's or a wafer core's SRAM."""
from memsim.hardware.kinds import CHIP, CORE, LevelKind, register

register(LevelKind(
    name="sram", domain=CHIP, scratchpad=True, holds=(), clock=CORE, color="#8c564b",
    help="the compute units' scratchpad, where every tile is staged; a home for nothing unless its family keeps "
         "weights there (docs/how-it-works.md, placement) or its holds: says so"))

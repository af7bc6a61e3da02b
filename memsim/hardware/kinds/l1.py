"""A core's private first-level data cache (a CPU's L1D)."""
from memsim.hardware.kinds import CHIP, CORE, LevelKind, register

register(LevelKind(
    name="l1", domain=CHIP, holds=(), clock=CORE,
    help="a core's private first-level data cache: register blocking lives in it; a home for nothing and not the "
         "tile budget (the scratchpad is)"))

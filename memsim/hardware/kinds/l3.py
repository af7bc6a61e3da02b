"""A CPU's last-level cache."""
from memsim.hardware.kinds import CHIP, CORE, LevelKind, register

register(LevelKind(
    name="l3", domain=CHIP, holds=("activation",), clock=CORE,
    help="a last-level cache on the chip: keeps activations between operators"))

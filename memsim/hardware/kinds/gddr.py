"""Graphics DRAM on the board."""
from memsim.hardware.kinds import DEVICE, MEMORY, LevelKind, register

register(LevelKind(
    name="gddr", domain=DEVICE, efficiency=MEMORY,
    help="graphics DRAM on the board: the device's memory"))

"""Low-power DRAM beside the chip (unified-memory parts)."""
from memsim.hardware.kinds import DEVICE, MEMORY, LevelKind, register

register(LevelKind(
    name="lpddr", domain=DEVICE, efficiency=MEMORY,
    help="low-power DRAM beside the chip: the device's memory"))

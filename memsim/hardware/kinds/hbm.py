"""High-bandwidth memory stacked beside the die."""
from memsim.hardware.kinds import DEVICE, MEMORY, LevelKind, register

register(LevelKind(
    name="hbm", domain=DEVICE, efficiency=MEMORY, color="#ff7f0e",
    help="high-bandwidth DRAM in the package: the device's memory"))

"""DDR DRAM: a host's memory, reached over a link, or a CPU's main memory."""
from memsim.hardware.kinds import HOST, MEMORY, LevelKind, register

register(LevelKind(
    name="ddr", domain=HOST, efficiency=MEMORY, color="#e377c2",
    help="DDR DRAM: the host's memory over a link (via:), or a CPU's main memory"))

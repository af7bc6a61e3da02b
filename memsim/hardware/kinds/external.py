"""An external parameter store streamed in over I/O links (a wafer's MemoryX)."""
from memsim.hardware.kinds import HOST, LevelKind, register

register(LevelKind(
    name="external", domain=HOST,
    help="an external store beyond the device, streamed in over I/O links (a wafer's MemoryX)"))

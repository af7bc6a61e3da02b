"""Memory kinds, registered by the name a level's ``kind`` gives in YAML.

What a kind of memory *is* is declared once, as a ``LevelKind``: where it sits (on the chip, on
the device beside it, on the host beyond a link), whether it is the compute units' scratchpad,
what a level of it is a home for when its YAML says nothing, which efficiency estimate applies to
its streaming bandwidth, which clock it runs at and how the figures draw it. Every place that
asks about a level's kind reads the level's ``LevelKind`` (``MemoryLevel.kind_of``), never a
list of names. Each kind lives in one module of this package and registers itself; adding a
memory kind means adding one file.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsim.core.registry import Registry

TENSOR_CLASSES = ("weight", "kv", "activation")
CHIP, DEVICE, HOST = "chip", "device", "host"  # where a level sits
DOMAINS = (CHIP, DEVICE, HOST)
IDEAL, MEMORY = "ideal", "memory"  # efficiency classes: 1.0 unless set, or the family's memory estimate
CORE = "core"  # a kind clocked with the compute units (a power cap that lowers their clock slows it)
OWN = "own"  # a kind with a clock of its own


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelKind:
    """A kind of memory level. ``domain``: on the ``chip``, on the ``device`` (the package's or
    board's memory) or on the ``host`` (reached over a link, or a CPU's main memory); ``scratchpad``:
    the compute units' own memory, where every tile is staged (a chip has exactly one level of such a
    kind); ``holds``: the tensor classes a level of this kind is a home for when its YAML gives no
    ``holds``; ``efficiency``: ``memory`` where a level left without an efficiency streams at its
    family's estimate (a DRAM not reached over a link), ``ideal`` where it streams at peak;
    ``clock``: ``core`` where it runs at the compute units' clock, ``own`` where its clock is its
    own; ``cache``: a chip-wide cache between device memory and the scratchpads, whose bandwidth
    shapes a GEMM library's tiles; ``color``: how figures draw its stalls (empty: a spare colour)."""
    name: str
    domain: str
    help: str
    scratchpad: bool = False
    holds: tuple[str, ...] = TENSOR_CLASSES
    efficiency: str = IDEAL
    clock: str = OWN
    cache: bool = False
    color: str = ""

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"memory kind {self.name!r}: domain must be one of {DOMAINS}, not {self.domain!r}")
        if self.efficiency not in (IDEAL, MEMORY) or self.clock not in (CORE, OWN):
            raise ValueError(f"memory kind {self.name!r}: efficiency is {IDEAL} or {MEMORY}, clock {CORE} or {OWN}")
        if not set(self.holds) <= set(TENSOR_CLASSES):
            raise ValueError(f"memory kind {self.name!r}: holds names only {TENSOR_CLASSES}")

    @property
    def on_chip(self) -> bool:
        return self.domain == CHIP


KINDS: Registry[LevelKind] = Registry("memory kind", field="kind", package=__name__)


def register(kind: LevelKind) -> LevelKind:
    """Register ``kind`` under its name (a kind's module calls this as it is imported)."""
    return KINDS.add(kind.name, kind)


def names() -> tuple[str, ...]:
    """Every kind's name, sorted: the choices of a level's ``kind``."""
    return KINDS.names()

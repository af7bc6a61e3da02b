"""Typed identities for the parts of a system that work flows through: compute units, memory
levels and links, and the chip they belong to.

A plan says where a step's bytes come from and go to with a ``Ref``: a level or link of the chip
the step runs on, never a string that has to be parsed. The engine places a ``Ref`` on a chip
(``Ref.on``) as a ``ResourceId``, which also names the compute units and the dequantisation
units of a chip, and the direction of a link between chips or regions. The same identity goes
from the engine's records to the writers, which alone turn it into text (``written_name``): a
level by its name (``hbm``), a link with a ``link:`` prefix (``link:pcie``, and a direction
``link:nvlink[0>sw]``). A level whose name reads as something else in the outputs (a stall cause
such as ``overhead``, the compute units, a prefixed name) is written ``level:NAME``, so its stalls
and bytes never merge with another's.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ResourceKind(enum.Enum):
    COMPUTE = "compute"  # a chip's compute units
    LEVEL = "level"  # a memory level
    LINK = "link"  # a link: of a chip (PCIe, its wafer fabric) or between chips
    DEQUANT = "dequant"  # the units that unpack quantised weights beside compute


COMPUTE, LEVEL, LINK, DEQUANT = ResourceKind.COMPUTE, ResourceKind.LEVEL, ResourceKind.LINK, ResourceKind.DEQUANT
SYSTEM = -1  # the chip of links between chips: they belong to the system
# What the outputs name besides levels and links: the compute units and every stall cause
# (``memsim.engine.records``; a test holds the two lists equal).
OTHER_NAMES = frozenset({"compute", "wait", "tile_buffer", "dequant", "overhead", "dependency", "bubble", "power",
                         "host", "collective_library"})


def written_name(kind: ResourceKind, name: str, direction: tuple = ()) -> str:
    """A resource's name in outputs: ``hbm``, ``link:pcie``, ``level:overhead``, a direction of a
    link between chips (or regions) ``link:nvlink[0>sw]``, and ``compute`` or ``dequant`` for a
    chip's units."""
    if kind is LINK:
        return f"link:{link_label(name, direction)}"
    if kind is LEVEL:
        return f"level:{name}" if name in OTHER_NAMES or ":" in name else name
    return kind.value


def link_label(name: str, direction: tuple = ()) -> str:
    """A link's name with the direction it stands for, if one: ``nvlink[0>sw]``."""
    return f"{name}[{direction[0]}>{direction[1]}]" if direction else name


@dataclass(frozen=True, slots=True)
class Ref:
    """A level or link of the chip a step runs on."""
    kind: ResourceKind  # LEVEL or LINK
    name: str
    # Refs key a plan's steps and every lowering cache: their hash is worked out once (an enum's
    # hash is a Python call).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in (LEVEL, LINK):
            raise ValueError(f"a Ref names a level or a link, not {self.kind!r}")
        object.__setattr__(self, "_hash", hash((self.kind, self.name)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # rebuilt where unpickled: a string's hash differs between processes
        return Ref, (self.kind, self.name)

    @classmethod
    def level(cls, name: str) -> Ref:
        return _interned(cls, LEVEL, name)

    @classmethod
    def link(cls, name: str) -> Ref:
        return _interned(cls, LINK, name)

    @property
    def is_link(self) -> bool:
        return self.kind is LINK

    def on(self, chip: int, direction: tuple = ()) -> ResourceId:
        """This level or link of ``chip`` (``SYSTEM`` with a ``direction``: a link between chips)."""
        return ResourceId(self.kind, chip, self.name, direction)

    def __str__(self) -> str:
        return written_name(self.kind, self.name)


# One ``Ref`` object for each level and link name (a chip's few): tuples of steps and traffic that name
# the same levels then compare equal by identity, without a field-by-field comparison each.
_REFS: dict[tuple[ResourceKind, str], Ref] = {}


def _interned(cls: type[Ref], kind: ResourceKind, name: str) -> Ref:
    ref = _REFS.get((kind, name))
    if ref is None:
        ref = _REFS[(kind, name)] = cls(kind, name)
    return ref


@dataclass(frozen=True, slots=True)
class ResourceId:
    """A resource of the simulated system: what it is, whose it is (a chip, a region of a
    layer-pipelined chip, or ``SYSTEM``), its name as the chip declares it, and for a link between
    chips or regions the direction it stands for: (from, to), a chip number or a switch's node."""
    kind: ResourceKind
    chip: int
    name: str
    direction: tuple = ()
    # Identities key the engine's per-chunk accounts: their hash is worked out once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.kind, self.chip, self.name, self.direction)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # rebuilt where unpickled: a string's hash differs between processes
        return ResourceId, (self.kind, self.chip, self.name, self.direction)

    @classmethod
    def compute(cls, chip: int) -> ResourceId:
        return cls(COMPUTE, chip, COMPUTE.value)

    @classmethod
    def dequant(cls, chip: int) -> ResourceId:
        return cls(DEQUANT, chip, DEQUANT.value)

    @property
    def ref(self) -> Ref:
        """The level or link as the plan names it, without its chip and direction."""
        return _interned(Ref, self.kind, self.name)

    def __str__(self) -> str:
        return written_name(self.kind, self.name, self.direction)

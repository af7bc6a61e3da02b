"""Typed names for the parts of a chip that work flows through: memory levels and links.

A plan says where a step's bytes come from and go to with a ``Ref`` (a level or a link of
the chip), never with a string that has to be parsed. ``str(ref)`` is the name used in
outputs (``written_name``): a level by its name (``hbm``), a link with a ``link:`` prefix
(``link:pcie``). A level whose name reads as something else in the outputs (a stall cause such
as ``overhead``, the compute units, a prefixed name) is written ``level:NAME``, so its stalls and
bytes never merge with another's.
"""
from __future__ import annotations

from dataclasses import dataclass

LEVEL = "level"
LINK = "link"
# What the outputs name besides levels and links: the compute units and every stall cause
# (``memsim.engine.records``; a test holds the two lists equal).
OTHER_NAMES = frozenset({"compute", "wait", "tile_buffer", "dequant", "overhead", "dependency", "bubble", "power"})


def written_name(kind: str, name: str, direction: tuple = ()) -> str:
    """A level's or link's name in outputs: ``hbm``, ``link:pcie``, ``level:overhead``, and a
    direction of a link between chips (or regions) ``link:nvlink[0>sw]``."""
    if kind == LINK:
        return f"link:{link_label(name, direction)}"
    return f"level:{name}" if name in OTHER_NAMES or ":" in name else name


def link_label(name: str, direction: tuple = ()) -> str:
    """A link's name with the direction it stands for, if one: ``nvlink[0>sw]``."""
    return f"{name}[{direction[0]}>{direction[1]}]" if direction else name


@dataclass(frozen=True, slots=True)
class Ref:
    kind: str  # LEVEL or LINK
    name: str

    def __post_init__(self) -> None:
        if self.kind not in (LEVEL, LINK):
            raise ValueError(f"unknown resource kind {self.kind!r}")

    @classmethod
    def level(cls, name: str) -> Ref:
        return cls(LEVEL, name)

    @classmethod
    def link(cls, name: str) -> Ref:
        return cls(LINK, name)

    @property
    def is_link(self) -> bool:
        return self.kind == LINK

    def __str__(self) -> str:
        return written_name(self.kind, self.name)

"""Typed names for the parts of a chip that work flows through: memory levels and links.

A plan says where a step's bytes come from and go to with a ``Ref`` (a level or a link of
the chip), never with a string that has to be parsed. ``str(ref)`` is the name used in
outputs: a level by its name (``hbm``), a link with a ``link:`` prefix (``link:pcie``).
"""
from __future__ import annotations

from dataclasses import dataclass

LEVEL = "level"
LINK = "link"


@dataclass(frozen=True, slots=True)
class Ref:
    kind: str  # LEVEL or LINK
    name: str

    def __post_init__(self) -> None:
        if self.kind not in (LEVEL, LINK):
            raise ValueError(f"unknown resource kind {self.kind!r}")

    @classmethod
    def level(cls, name: str) -> "Ref":
        return cls(LEVEL, name)

    @classmethod
    def link(cls, name: str) -> "Ref":
        return cls(LINK, name)

    @property
    def is_link(self) -> bool:
        return self.kind == LINK

    def __str__(self) -> str:
        return f"link:{self.name}" if self.kind == LINK else self.name

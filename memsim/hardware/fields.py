"""The declaration of a spec field: its YAML key, the kind of quantity it holds and its help.

The loader, the checks every spec constructor runs and docs/hardware-fields.md are driven by
this metadata, so a field cannot exist without a unit and a description.
"""
from __future__ import annotations

from dataclasses import MISSING, field
from typing import Any


def spec_field(key: str, unit: str, help: str, default: Any = MISSING, *, least: int | None = None,
               choices: Any = None, of: type | None = None) -> Any:
    """A dataclass field read from YAML key ``key`` as a quantity of kind ``unit``; ``least``,
    ``choices`` (a tuple, or a function returning one) and ``of`` (the class of a section or
    list entry) are what its constructor checks beyond the kind."""
    meta = {"key": key, "unit": unit, "help": help, "least": least, "choices": choices, "of": of}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)

"""The files a run reads: which ``RunSpec`` fields name one, and where each resolves.

A preset name resolves to its shipped file; a path is used as is. Writers use this to refuse an
output that would land on one of the run's own inputs; sweeps, to hash their contents.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from memsim.core.presets import resolve
from memsim.hardware import HW_SUFFIXES
from memsim.run.runspec import SELF_DRAFT
from memsim.stack.loader import AUTO
from memsim.stack.spec import IDEAL
from memsim.workload import MODEL_SUFFIXES

BUILT_IN = (AUTO, IDEAL.name)  # stacks that name no file: the family's default is resolved with the chip
# field -> (config kind its preset names resolve under, or None for a plain path; suffixes)
FILE_FIELDS = {"hw": ("hardware", HW_SUFFIXES), "model": ("models", MODEL_SUFFIXES),
               "draft": ("models", MODEL_SUFFIXES), "trace": (None, ()), "system": (None, ()),
               "stack": ("stacks", HW_SUFFIXES), "requests": (None, ())}  # requests: a serving run's trace


def path_of(field: str, value: str | None) -> Path | None:
    """The file the run field ``field`` = ``value`` names (None where it names none)."""
    if value is None or (field == "draft" and value == SELF_DRAFT) or (field == "stack" and value in BUILT_IN):
        return None
    kind, suffixes = FILE_FIELDS[field]
    return resolve(value, kind, suffixes) if kind else Path(value)


def files(spec: Any) -> tuple[Path, ...]:
    """Every file ``spec`` (a ``RunSpec``, or a ``ServeSpec`` with its request trace) reads."""
    values = asdict(spec)
    found = (path_of(name, values.get(name)) for name in FILE_FIELDS)
    return tuple(p for p in found if p is not None)


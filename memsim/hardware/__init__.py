"""Hardware: frozen chip specs, YAML loading with units, preset lookup."""
from __future__ import annotations

from memsim.core.presets import available, resolve
from memsim.hardware import templates  # noqa: F401  (a ``base:`` may name a family's template)
from memsim.hardware.dumps import dump_chip
from memsim.hardware.loader import SUFFIXES, load_chip
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel, PowerSpec

HW_SUFFIXES = SUFFIXES


def load(name_or_path: str, overrides: list[tuple[str, str]] | tuple = ()) -> ChipSpec:
    chip, _ = load_chip(resolve(name_or_path, "hardware", HW_SUFFIXES), overrides)
    return chip


def presets() -> list[str]:
    return available("hardware", HW_SUFFIXES)


__all__ = [
    "HW_SUFFIXES",
    "ChipSpec",
    "ComputeSpec",
    "ExecutionSpec",
    "LinkSpec",
    "MemoryLevel",
    "PowerSpec",
    "dump_chip",
    "load",
    "load_chip",
    "presets",
    "resolve",
]

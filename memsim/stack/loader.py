"""Loading a runtime stack's YAML into a frozen ``StackSpec``, as a chip's is loaded.

A stack file is read strictly, may start from a shipped stack (``base: NAME`` or a path), takes
``--set stack.PATH=VALUE`` overrides (``stack.dispatch.launch=5us``,
``stack.collectives.nccl-ll.call=8us``), writes a value nobody publishes as ``{estimate: VALUE,
range: [LOW, HIGH]}`` and names its file and field in every error: the hardware loader's machinery
(``memsim.hardware.loader``), driven by ``StackSpec``'s field declarations.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from memsim.core.errors import ConfigError, run_field
from memsim.core.presets import available, resolve
from memsim.hardware.dumps import dump, spec_estimates
from memsim.hardware.estimates import Estimate
from memsim.hardware.families import FAMILIES
from memsim.hardware.loader import SUFFIXES, apply_override, build, read_based
from memsim.stack.spec import IDEAL, StackSpec

KIND = "stacks"  # configs/stacks/NAME.yaml
PREFIX = "stack."  # a --set path that starts with it changes the stack, not the chip
AUTO = "auto"  # the chip family's stack (``Family.stack``; docs/stacks.md says why)


def presets() -> list[str]:
    return available(KIND, SUFFIXES)


def stack_path(name_or_path: str) -> Path | None:
    """The file of a stack (None for ``ideal``, which is built in)."""
    if name_or_path == IDEAL.name:
        return None
    return resolve(name_or_path, KIND, SUFFIXES)


def default_for(family: str, vendor: str = "") -> str:
    """The stack a run on a chip of ``family`` uses unless told otherwise: the one its vendor ships
    (the chip's ``stack``), else its family's."""
    return vendor or (FAMILIES[family].stack if family in FAMILIES else IDEAL.name)


def split_sets(sets: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``--set`` pairs as (the chip's, the stack's with the ``stack.`` prefix taken off)."""
    chip = tuple((k, v) for k, v in sets if not k.startswith(PREFIX))
    stack = tuple((k[len(PREFIX):], v) for k, v in sets if k.startswith(PREFIX))
    return chip, stack


def read_stack(path: Path) -> dict[str, Any]:
    """A stack file's raw mapping with what it inherits from its ``base:``."""
    return read_based(path, StackSpec, KIND)


def load_stack(name_or_path: str, overrides: tuple[tuple[str, str], ...] = ()) -> tuple[StackSpec, dict[str, Any], str]:
    """The stack, the raw mapping it was built from and its file (``ideal`` for the built-in one),
    with ``overrides`` (paths without the ``stack.`` prefix) applied."""
    path = stack_path(name_or_path)
    raw = copy.deepcopy(read_stack(path)) if path is not None else {"name": IDEAL.name,
                                                                     "description": IDEAL.description}
    for key, value in overrides:
        apply_override(raw, key, value, file=run_field("set"), cls=StackSpec)
    where = str(path) if path is not None else IDEAL.name
    file = f"{where} (with {run_field('set')})" if overrides else where
    try:
        return build(StackSpec, raw, file, ""), raw, where
    except ConfigError as exc:
        if overrides and exc.field and any(exc.field.startswith(k.split(".")[0]) for k, _ in overrides):
            exc.field = PREFIX + exc.field
        raise


def stack_estimates(stack: StackSpec) -> tuple[Estimate, ...]:
    """The estimated values of a stack, read from it, their paths as ``--set`` takes them (``stack.dispatch.launch``)."""
    return spec_estimates(stack, PREFIX.rstrip("."))


def dump_stack(stack: StackSpec) -> dict[str, Any]:
    """The resolved stack as YAML-ready data that loads back to an identical spec."""
    return dump(stack)

"""The chip and the runtime stack a run loads: the hardware file with a system YAML's and ``--set``
overrides, the stack (a name, a file, or the chip family's default) with its ``stack.`` overrides,
and the estimated values of both. One place reads them, so an error names the file and field it
is about, whichever command or call asked.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from memsim import hardware, mapping
from memsim.core.errors import CapacityError, ConfigError, is_run, run_field
from memsim.hardware.dumps import spec_estimates
from memsim.hardware.estimates import Estimate
from memsim.hardware.loader import build, read_yaml
from memsim.hardware.spec import SystemSpec
from memsim.run import runspec
from memsim.stack import loader as stack_mod
from memsim.stack.loader import stack_estimates
from memsim.stack.spec import StackSpec

__all__ = ["blamed", "estimates", "load_chip", "load_stack", "stack_estimates",
           "system_overrides"]


def system_overrides(path: Path) -> list[tuple[str, str]]:
    """A system YAML (any ``system`` field: ``topology``, ``link``, ``collective``, ...) overrides
    the preset's ``system``. Its fields are checked here, so that an error names this file."""
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of system fields", file=str(path))
    try:
        build(SystemSpec, raw, str(path), "")
        mapping.collectives.check_algorithm(raw.get("collective", "auto"))
    except ConfigError as exc:
        exc.file, exc.field = str(path), str(exc.field or "").removeprefix("system.") or None
        raise
    return [(f"system.{k}", str(v)) for k, v in raw.items()]


def load_chip(hw: str, sets: Iterable[str] | Iterable[tuple[str, str]] | dict[str, str],
              system: str | None = None) -> tuple[hardware.ChipSpec, str]:
    """The chip with a system YAML's and ``--set`` overrides applied (``stack.`` overrides are the
    stack's), and the file it came from."""
    overrides = list(stack_mod.split_sets(runspec.overrides(sets))[0])
    from_system = system_overrides(Path(system)) if system is not None else []
    hw_path = hardware.resolve(hw, "hardware", hardware.HW_SUFFIXES)
    try:
        chip, _ = hardware.load_chip(hw_path, from_system + overrides)
    except ConfigError as exc:  # a system field that names no link of this chip: the system file's fault
        if exc.field in {k for k, _ in from_system} - {k for k, _ in overrides}:
            exc.file, exc.field = system, exc.field.removeprefix("system.")
        raise
    return chip, str(hw_path)


def load_stack(name: str | None, chip: hardware.ChipSpec,
               sets: Iterable[str] | Iterable[tuple[str, str]] | dict[str, str] = ()) -> tuple[StackSpec, dict, str]:
    """The runtime stack ``name`` (``auto`` or None: the one ``chip``'s vendor ships, else its family's)
    with the ``stack.`` overrides among ``sets``, the raw mapping it was built from, and its file."""
    chosen = stack_mod.default_for(chip.family, chip.stack) if name in (None, stack_mod.AUTO) else str(name)
    return stack_mod.load_stack(chosen, stack_mod.split_sets(runspec.overrides(sets))[1])


def estimates(hw: str, sets: Iterable[str] | Iterable[tuple[str, str]] | dict[str, str] = (),
              system: str | None = None, stack: str | None = None) -> tuple[Estimate, ...]:
    """The estimated values of a chip and of the run's stack (with their overrides applied: a value
    set is no longer an estimate), each with its range; a stack's paths start with ``stack.``."""
    chip, _ = load_chip(hw, sets, system)
    return spec_estimates(chip) + stack_estimates(load_stack(stack, chip, sets)[0])


@contextlib.contextmanager
def blamed(hw_file: str, trace: str | None = None):
    """An error about the chip names the hardware file; one about the batch, a trace's ops."""
    try:
        yield
    except (CapacityError, ConfigError) as exc:
        field = exc.raw_field or ""
        if not is_run(field):  # about the chip (e.g. system.collective), not a run field
            exc.raw_file = exc.raw_file or hw_file
        elif trace is not None and field.startswith(run_field("batch")):  # a trace fixes its batch and context
            exc.file, exc.field = trace, "ops"
        raise

"""The names the fuzz harness draws valid values from, read from memsim's own registries and
declarations, never typed again: family names, topologies, all-reduce algorithms, lowerings,
importers, the hardware spec's fields with their units and choices, the commands and their
options, the run parameters, presets, model types, op kinds, dtypes.

Every read of memsim's registries is in this module, so that a registry that changes its type
or its home is rewired here alone. The invalid words the cases also draw (``bogus``, ``int3``)
are the harness's own and live beside the strategies that use them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class HardwareField:
    """One field of the hardware spec as a YAML file spells it: ``path`` (``levels.capacity``:
    ``levels`` is a list, ``capacity`` a key of its entries), its unit kind and its choices."""
    path: str
    unit: str
    choices: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def section(self) -> str:
        return self.path.rsplit(".", 1)[0] if "." in self.path else ""


@functools.cache
def families() -> tuple[str, ...]:
    """The families a chip may name (``family:``)."""
    from memsim.hardware.families import FAMILIES

    return FAMILIES.names()


@functools.cache
def topologies() -> tuple[str, ...]:
    """The registered topologies (``system.topology``)."""
    from memsim.hardware.topologies import TOPOLOGIES

    return tuple(TOPOLOGIES.names())


@functools.cache
def collectives() -> tuple[str, ...]:
    """The all-reduce algorithms ``system.collective`` accepts, ``auto`` first."""
    from memsim.mapping import collectives as registry

    return registry.algorithms()


@functools.cache
def op_kinds() -> tuple[str, ...]:
    """The op kinds of a trace: those with a lowering (``memsim.mapping.lower``), then the collectives."""
    from memsim.mapping.lower import LOWERINGS
    from memsim.workload.graph import COLLECTIVE_KINDS

    return (*LOWERINGS.names(), *COLLECTIVE_KINDS)


@functools.cache
def importers() -> tuple[str, ...]:
    """The formats ``memsim import`` reads."""
    from memsim.workload.importers import IMPORTERS

    return tuple(IMPORTERS.names())


def _commands() -> dict[str, Any]:
    """Each command by name, a subcommand as ``import onnx``."""
    from memsim.cli import main as cli
    from memsim.cli.commands import every

    found = {}
    for name, command in every(cli.main).items():
        subs = every(command)
        found.update({f"{name} {sub}": c for sub, c in subs.items()} if subs else {name: command})
    return found


@functools.cache
def commands() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each command (``run``, ``import onnx``) -> (the options that take a value, the flags)."""
    found = {}
    for name, command in _commands().items():
        options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
        found[name] = (tuple(o for p in options if not p.is_flag for o in p.opts),
                       tuple(o for p in options if p.is_flag for o in p.opts))
    return found


@functools.cache
def option_types() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each option that takes a value -> (its click type's name, its choices)."""
    return {opt: (p.type.name, tuple(getattr(p.type, "choices", ()))) for command in _commands().values()
            for p in command.params if p.param_type_name == "option" and not p.is_flag for opt in p.opts}


@functools.cache
def onnx_op_types() -> tuple[str, ...]:
    """The ONNX op types the importer maps to a kind or drops as no-ops."""
    from memsim.workload.importers import onnx_import as importer

    return ("MatMul", "Gemm", "Gather", *sorted(importer.ELEMENTWISE | importer.NORMS | importer.NO_OPS))


@functools.cache
def run_parameters() -> tuple[str, ...]:
    """The run parameters a sweep file may set (``memsim.run.runspec``)."""
    from memsim.run import runspec

    return tuple(runspec.sweepable())


@functools.cache
def phases() -> tuple[str, ...]:
    from memsim.run import runspec

    return runspec.PHASES


@functools.cache
def default_preset() -> str:
    from memsim.run.runspec import RunSpec

    return RunSpec.hw


@functools.cache
def presets() -> tuple[str, ...]:
    from memsim import hardware

    return tuple(hardware.presets())


@functools.cache
def models() -> tuple[str, ...]:
    from memsim import workload

    return tuple(workload.models())


@functools.cache
def model_types() -> tuple[str, ...]:
    """The ``model_type`` values a model config may have."""
    from memsim.workload.models import ARCH

    return tuple(ARCH)


@functools.cache
def dtypes() -> tuple[str, ...]:
    from memsim.core.dtypes import DTYPES

    return DTYPES


@functools.cache
def tensor_classes() -> tuple[str, ...]:
    from memsim.workload.graph import TENSOR_CLASSES

    return TENSOR_CLASSES


@functools.cache
def trace_schema() -> str:
    from memsim.workload.trace import SCHEMA

    return SCHEMA


@functools.cache
def run_outputs() -> tuple[str, ...]:
    """The files every ``memsim run --out`` writes (``memsim.report.output.write_outputs``)."""
    from memsim.report import output

    written = (output.MARKER, "ops.csv", "timeline.csv", "hardware.yaml")
    assert set(written) <= output.OWN, "memsim.report.output no longer writes these"
    return written


@functools.cache
def hardware_fields() -> tuple[HardwareField, ...]:
    """Every field of the hardware spec, from its declarations (``spec_field``), in declaration order."""
    from memsim.hardware.spec import ChipSpec

    found: list[HardwareField] = []

    def walk(cls: Any, prefix: str) -> None:
        for f in fields(cls):
            meta = f.metadata
            choices = meta["choices"]() if callable(meta["choices"]) else meta["choices"]
            path = prefix + meta["key"]
            found.append(HardwareField(path, meta["unit"], tuple(choices or ())))
            if meta["of"] is not None:
                walk(meta["of"], path + ".")

    walk(ChipSpec, "")
    if not any(f.path == "system.collective" and f.choices for f in found):  # checked by the mapping, not the spec
        found = [HardwareField(f.path, f.unit, collectives()) if f.path == "system.collective" else f for f in found]
    return tuple(found)


def hardware_unit(path: tuple) -> str:
    """The unit kind of the value at ``path`` in a hardware YAML tree (``("levels", 0,
    "latency", "estimate")`` -> ``time``); '' where no field is declared."""
    declared = _units()
    at = ""
    for part in path:
        if isinstance(part, int):
            continue
        at = f"{at}.{part}" if at else str(part)
        unit = declared.get(at, "")
        if unit not in ("section", "list"):
            return unit
    return ""


@functools.cache
def _units() -> dict[str, str]:
    return {f.path: f.unit for f in hardware_fields()}

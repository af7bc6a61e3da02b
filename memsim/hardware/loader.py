"""Loading hardware YAML into frozen specs: validation, ``--set`` overrides, resolved dumps.

Every error names the file and the dotted field it is about. Overrides are applied to the
raw YAML mapping before validation, so an override is validated exactly like the file.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from memsim import units
from memsim.errors import ConfigError
from memsim.hardware import topologies
from memsim.hardware.spec import (
    ATTENTION,
    DEQUANT_KERNELS,
    FAMILY_EXECUTION,
    MAX_COMM_OVERLAP,
    PIPELINES,
    STREAMS,
    FAMILIES,
    LAUNCH,
    LEVEL_KINDS,
    SCOPES,
    TENSOR_CLASSES,
    ChipSpec,
    ComputeSpec,
    ExecutionSpec,
    LinkSpec,
    MemoryLevel,
    SystemSpec,
    yaml_fields,
)

# Choices that a registry holds are looked up when a file is loaded, once its entries have registered.
# `system.collective` is checked by the mapping, which holds the all-reduce algorithms.
_CHOICES: dict[tuple[type, str], tuple[str, ...] | Callable[[], tuple[str, ...]]] = {
    (ChipSpec, "family"): FAMILIES,
    (MemoryLevel, "kind"): LEVEL_KINDS,
    (MemoryLevel, "scope"): SCOPES,
    (ExecutionSpec, "attention"): ATTENTION,
    (ExecutionSpec, "dequant_kernel"): DEQUANT_KERNELS,
    (ExecutionSpec, "launch"): LAUNCH,
    (ExecutionSpec, "pipeline"): PIPELINES,
    (SystemSpec, "topology"): topologies.names,
}
_SECTIONS = {"compute": ComputeSpec, "execution": ExecutionSpec, "system": SystemSpec}
_LISTS = {"levels": MemoryLevel, "links": LinkSpec}


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError("file not found", file=str(path))
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(f"invalid YAML: {getattr(exc, 'problem', exc)}", file=str(path), field=where) from None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping at the top level", file=str(path))
    return raw


def build(cls: type, raw: Any, file: str, where: str) -> Any:
    """Validate ``raw`` against dataclass ``cls`` and construct it."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping, got {raw!r}", file=file, field=where or None)
    known = yaml_fields(cls)
    for key in raw:
        if key not in known:
            raise ConfigError(f"unknown field (known: {', '.join(known)})", file=file, field=_join(where, key))
    kwargs: dict[str, Any] = {}
    for key, f in known.items():
        path = _join(where, key)
        if key not in raw:
            if f.default is dataclasses.MISSING:
                raise ConfigError("missing required field", file=file, field=path)
            continue
        kwargs[f.name] = _value(cls, key, f.metadata["unit"], raw[key], file, path)
    return cls(**kwargs)


def _value(cls: type, key: str, unit: str, raw: Any, file: str, path: str) -> Any:
    if unit == "section":
        return build(_SECTIONS[key], raw, file, path)
    if unit == "list":
        if not isinstance(raw, list):
            raise ConfigError("expected a list", file=file, field=path)
        items = tuple(build(_LISTS[key], item, file, f"{path}[{_label(item, i)}]") for i, item in enumerate(raw))
        names = [item.name for item in items]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ConfigError(f"duplicate name {sorted(dup)[0]!r}", file=file, field=path)
        return items
    if unit == "text":
        if not isinstance(raw, str):
            raise ConfigError(f"expected text, got {raw!r}", file=file, field=path)
        return raw
    if unit in ("name", "choice"):
        if not isinstance(raw, str) or not raw:
            raise ConfigError(f"expected text, got {raw!r}", file=file, field=path)
        choices = _CHOICES.get((cls, key), ())
        if callable(choices):
            choices = choices()
        if choices and raw not in choices:
            raise ConfigError(f"{raw!r} is not one of {', '.join(choices)}", file=file, field=path)
        return raw
    if unit == "names":
        # A list in YAML; on the command line (``--set``), names separated by commas.
        names = [n.strip() for n in raw.split(",") if n.strip()] if isinstance(raw, str) else raw
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"expected a list of names, got {raw!r}", file=file, field=path)
        return tuple(names)
    if unit == "classes":
        if not isinstance(raw, list) or any(c not in TENSOR_CLASSES for c in raw):
            raise ConfigError(f"expected a list drawn from {', '.join(TENSOR_CLASSES)}, got {raw!r}", file=file,
                              field=path)
        return tuple(raw)
    if unit == "ops":
        if not isinstance(raw, dict):
            raise ConfigError("expected a mapping of dtype to a number", file=file, field=path)
        out = []
        for k, v in raw.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"expected a non-negative number, got {v!r}", file=file, field=f"{path}.{k}")
            out.append((str(k), float(v)))
        return tuple(sorted(out))
    if unit == "ratios":
        if not isinstance(raw, dict):
            raise ConfigError("expected a mapping of dtype to a fraction", file=file, field=path)
        return tuple(sorted((str(k), _parse("ratio", v, file, f"{path}.{k}")) for k, v in raw.items()))
    if unit == "flops" and isinstance(raw, dict):
        return tuple(sorted((str(k), _parse("flops", v, file, f"{path}.{k}")) for k, v in raw.items()))
    return _parse(unit, raw, file, path)


def _parse(unit: str, raw: Any, file: str, path: str) -> Any:
    try:
        value = units.PARSERS[unit](raw)
    except units.UnitError as exc:
        raise ConfigError(str(exc), file=file, field=path) from None
    if unit in ("bandwidth", "flops") and value <= 0:
        raise ConfigError(f"{raw!r} must be positive", file=file, field=path)
    return value


def _label(item: Any, index: int) -> str:
    return str(item.get("name", index)) if isinstance(item, dict) else str(index)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def apply_override(raw: dict[str, Any], path: str, value: Any, file: str = "--set") -> None:
    """Set ``path`` (e.g. ``sram.capacity`` or ``compute.peak.bf16``) in the raw mapping.

    The first component may name a memory level or a link directly; list entries are
    addressed by their ``name``.
    """
    parts = path.split(".")
    node: Any = raw
    if parts[0] not in raw and parts[0] not in yaml_fields(ChipSpec):
        for list_key in ("levels", "links"):
            if any(isinstance(e, dict) and e.get("name") == parts[0] for e in raw.get(list_key, [])):
                parts = [list_key, *parts]
                break
        else:
            raise ConfigError(f"no field, level or link named {parts[0]!r}", file=file, field=path)
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):
            match = [e for e in node if isinstance(e, dict) and e.get("name") == part]
            if not match:
                raise ConfigError(f"no entry named {part!r}", file=file, field=path)
            node = match[0]
        elif isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            raise ConfigError(f"{'.'.join(parts[:i])} is not a section", file=file, field=path)
    if not isinstance(node, dict):
        raise ConfigError("cannot set a field here", file=file, field=path)
    node[parts[-1]] = value


def load_chip(path: Path, overrides: list[tuple[str, str]] | tuple = ()) -> tuple[ChipSpec, dict[str, Any]]:
    """Return the validated spec and the raw mapping it was built from (overrides applied)."""
    raw = copy.deepcopy(read_yaml(path))
    for key, value in overrides:
        apply_override(raw, key, value)
    file = f"{path} (with --set)" if overrides else str(path)
    family = raw.get("family")
    if isinstance(family, str) and family in FAMILY_EXECUTION and isinstance(raw.get("execution", {}), dict):
        raw.setdefault("execution", {})
        for key, value in FAMILY_EXECUTION[family].items():
            raw["execution"].setdefault(key, copy.deepcopy(value))
    chip = build(ChipSpec, raw, file, "")
    check_chip(chip, file)
    return chip, raw


def check_chip(chip: ChipSpec, file: str) -> None:
    names = [lvl.name for lvl in chip.levels]
    if "sram" not in names:
        raise ConfigError("every chip needs a scratchpad level named `sram`", file=file, field="levels")
    if chip.compute.units < 1:
        raise ConfigError("must be at least 1", file=file, field="compute.units")
    if chip.execution.prefetch_depth < 1:
        raise ConfigError("must be at least 1", file=file, field="execution.prefetch_depth")
    links = [lk.name for lk in chip.links]
    _check_named(chip.system.link, "link", links, file, "system.link")
    for lvl in chip.levels:
        _check_named(lvl.via, "link", links, file, f"levels[{lvl.name}].via")
        if lvl.channels < 1:
            raise ConfigError("must be at least 1", file=file, field=f"levels[{lvl.name}].channels")
        if lvl.capacity_bytes <= 0:
            raise ConfigError("must be positive", file=file, field=f"levels[{lvl.name}].capacity")
    if not chip.compute.peak_flops_per_s:
        raise ConfigError("needs at least one dtype", file=file, field="compute.peak")
    _check_execution(chip, file)


def _check_execution(chip: ChipSpec, file: str) -> None:
    """The links and levels that the execution fields name exist, and staging has a destination."""
    ex = chip.execution
    levels = [lvl.name for lvl in chip.levels]
    _check_named(ex.fabric, "link", [lk.name for lk in chip.links], file, "execution.fabric")
    for name in ex.stage_from:
        _check_named(name, "level", levels, file, "execution.stage_from")
    _check_named(ex.stage_into, "level", levels, file, "execution.stage_into")
    if ex.stage_from and not ex.stage_into:
        raise ConfigError("required when execution.stage_from is set", file=file, field="execution.stage_into")
    if ex.stage_into in ex.stage_from:
        raise ConfigError(f"{ex.stage_into!r} cannot be staged into itself", file=file, field="execution.stage_from")
    for name in ex.streams:
        if name not in STREAMS:
            raise ConfigError(f"{name!r} is not one of {', '.join(STREAMS)}", file=file, field="execution.streams")
    if "compute" not in ex.streams or len(set(ex.streams)) != len(ex.streams):
        raise ConfigError("must name `compute` once, and each stream once", file=file, field="execution.streams")
    if ex.pipeline_chunks < 1:
        raise ConfigError("must be at least 1", file=file, field="execution.pipeline_chunks")
    if ex.weight_prefetch < 0:
        raise ConfigError("must not be negative", file=file, field="execution.weight_prefetch")
    if not 1 <= ex.comm_overlap <= MAX_COMM_OVERLAP:
        raise ConfigError(f"must be from 1 (off) to {MAX_COMM_OVERLAP}", file=file, field="execution.comm_overlap")


def _check_named(name: str, what: str, known: list[str], file: str, field: str) -> None:
    """An empty name names nothing; any other must be one of ``known``."""
    if name and name not in known:
        raise ConfigError(f"no {what} named {name!r} ({what}s: {', '.join(known) or 'none'})", file=file, field=field)


def dump_chip(chip: ChipSpec) -> dict[str, Any]:
    """The resolved spec as YAML-ready data that loads back to an identical spec."""
    return _dump(chip)


def _dump(obj: Any) -> Any:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        unit = f.metadata["unit"]
        key = f.metadata["key"]
        if unit == "section":
            out[key] = _dump(value)
        elif unit == "list":
            out[key] = [_dump(v) for v in value]
        elif unit in ("ops", "ratios"):
            out[key] = dict(value)
        elif unit == "names":
            out[key] = list(value)
        elif unit == "classes":
            if value is not None:
                out[key] = list(value)
        elif unit == "flops" and isinstance(value, tuple):
            out[key] = {k: units.format_flops(v) for k, v in value}
        elif unit in units.FORMATTERS:
            out[key] = units.FORMATTERS[unit](value)
        else:
            out[key] = value
    return out

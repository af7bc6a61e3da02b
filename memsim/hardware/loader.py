"""Loading hardware YAML into frozen specs: validation, ``--set`` overrides, resolved dumps.

Every error names the file and the dotted field it is about. Overrides are applied to the
raw YAML mapping before validation, so an override is validated exactly like the file. The
loader turns YAML into typed values (quantities with units into base units, lists into tuples);
the spec constructors check them (``memsim.hardware.checks``), as they check specs built in Python.
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memsim.core import units
from memsim.core.errors import ConfigError, about_file, run_field
from memsim.core.files import load_yaml
from memsim.core.presets import resolve
from memsim.hardware import estimates
from memsim.hardware.dumps import TABLES
from memsim.hardware.spec import (
    ChipSpec,
    ComputeSpec,
    ExecutionSpec,
    LinkSpec,
    MemoryLevel,
    PowerSpec,
    SystemSpec,
    yaml_fields,
)

_SECTIONS = {"compute": ComputeSpec, "execution": ExecutionSpec, "system": SystemSpec, "power": PowerSpec}
_LISTS = {"levels": MemoryLevel, "links": LinkSpec}


BASE = "base"  # a chip file's preset (or path) whose fields it inherits
SUFFIXES = (".yaml", ".yml")


# The files read inside ``one_reading``: resolved path -> the mapping read (None outside one).
_READ: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar("memsim_read", default=None)


@contextlib.contextmanager
def one_reading() -> Iterator[None]:
    """Inside, each YAML file is read once and every later read gets what that one read: a run that
    loads its chip, then its estimates and its family's defaults, and reruns for its sensitivity,
    reads its chip file once and sees one version of it, even if the file is edited meanwhile."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping read strictly (UTF-8, no key twice); errors name the file (once a run, ``one_reading``)."""
    read = _READ.get()
    key = str(Path(path).resolve()) if read is not None else ""
    if read is not None and key in read:
        return copy.deepcopy(read[key])
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping at the top level", file=str(path))
    if read is not None:
        read[key] = copy.deepcopy(raw)
    return raw


def read_chip(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A chip file's raw mapping, with what it inherits: ``base: PRESET`` (or a path, relative to
    the file) supplies every field the file does not set. Sections merge field by field, levels
    and links by ``name`` (an entry of a new name is added), and a dotted key (``hbm.bandwidth:
    2 TB/s``) sets that one field as ``--set`` would."""
    return read_based(path, ChipSpec, "hardware", seen)


def read_based(path: Path, cls: type, kind: str, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A spec file's raw mapping (a chip's, ``cls`` ChipSpec and presets of ``kind`` hardware, or a
    runtime stack's) with what it inherits from its ``base:`` (``read_chip``)."""
    raw = read_yaml(path)
    if BASE not in raw:
        return raw
    bases = raw[BASE] if isinstance(raw[BASE], list) and cls is not ChipSpec else [raw[BASE]]
    if not bases:
        raise ConfigError("expected a preset name or a path, got an empty list", file=str(path), field=BASE)
    chain = (*seen, path.resolve())
    merged: dict[str, Any] = {}
    for base in bases:  # a stack may start from several (a serving stack and the libraries it calls), in order
        inherited = _read_base(path, base, cls, kind, chain)
        first = merged.get("name", inherited.get("name", base))  # the chip's base, by the name it gives itself
        for key, value in inherited.items():
            merged[key] = _merged(merged.get(key), value, key, cls)
    for key, value in raw.items():
        if key != BASE and "." not in key:
            merged[key] = _merged(merged.get(key), value, key, cls)
    for key, value in raw.items():
        if "." in key:
            apply_override(merged, key, value, file=str(path), cls=cls)
    if cls is ChipSpec:  # its identity is its own: named after its file, saying what it starts from
        if "name" not in raw:
            merged["name"] = path.stem
        merged[DERIVED] = derived_from(first, raw)
    return merged


DERIVED = "derived_from"  # a chip file with a base: what it starts from and how much it changes
# What a ``base:`` that is neither a preset nor a path may name: a family's template. Each entry gives
# the names it knows and the raw mapping of one (None: not one of them); ``memsim.hardware.templates``
# adds its own as it is imported.
TEMPLATES: list[tuple[Callable[[], tuple[str, ...]], Callable[[str], dict[str, Any] | None]]] = []


def derived_from(base: Any, raw: dict[str, Any]) -> str:
    """``h100-sxm + 3 changes``: the base (by the name its chip gives itself) and how many values the
    file sets over it (each field of a section, each field of a level or link entry, each dotted key)."""
    def count(node: Any, top: bool = False) -> int:
        if isinstance(node, dict):
            return sum(count(v) for k, v in node.items()
                       if not (top and k in (BASE, "name", "description", DERIVED)) and not (k == "name" and not top))
        if isinstance(node, list) and all(isinstance(v, dict) for v in node):
            return sum(count(v) for v in node)
        return 1
    n = count(raw, top=True)
    return f"{units.label({'name': base}, 'its base')} + {n} change{'s' * (n != 1)}"


def _read_base(path: Path, base: Any, cls: type, kind: str, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The raw mapping of one ``base:`` of the file at ``path`` (a preset name, or a path relative to it)."""
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"expected a preset name or a path, got {units.shown(base)}", file=str(path), field=BASE)
    looks_like_path = "/" in base or Path(base).suffix in SUFFIXES
    try:
        base_path = resolve(str(path.parent / base) if looks_like_path else base, kind, SUFFIXES)
    except ConfigError as exc:
        found = next((t for _, make in TEMPLATES if cls is ChipSpec and not looks_like_path
                      and (t := make(base)) is not None), None)
        if found is not None:  # a family's template
            return found
        also = [n for names, _ in TEMPLATES for n in names()] if cls is ChipSpec else []
        raise ConfigError(f"{base}: {exc.args[0]}" + (f"; or a family's template: {', '.join(also)}" if also else ""),
                          file=str(path), field=BASE) from None
    if base_path.resolve() in chain:
        raise ConfigError(f"{base} inherits, in the end, from this file", file=str(path), field=BASE)
    return read_based(base_path, cls, kind, chain)


def _merged(base: Any, own: Any, key: str, cls: type | None) -> Any:
    """``own`` over ``base``: mappings field by field, lists of named entries (levels, links)
    entry by entry by name."""
    f = yaml_fields(cls).get(key) if cls is not None else None
    if isinstance(base, dict) and isinstance(own, dict):
        of = f.metadata["of"] if f is not None and f.metadata["unit"] == "section" else None
        out = dict(base)
        for k, v in own.items():
            out[k] = _merged(base.get(k), v, k, of)
        return out
    if f is not None and f.metadata["unit"] == "list" and isinstance(base, list) and isinstance(own, list):
        out_list = list(base)
        for entry in own:
            name = entry.get("name") if isinstance(entry, dict) else None
            at = next((i for i, e in enumerate(out_list) if isinstance(e, dict) and name is not None
                       and e.get("name") == name), None)
            if at is None:
                out_list.append(entry)
            else:
                out_list[at] = _merged(out_list[at], entry, "", None)
        return out_list
    return own


def build(cls: type, raw: Any, file: str, where: str) -> Any:
    """Validate ``raw`` against dataclass ``cls`` and construct it."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping, got {units.shown(raw)}", file=file, field=where or None)
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
        kwargs[f.name] = _value(f, raw[key], file, path)
    with about_file(file):  # the constructor's checks know the field, not the file
        return cls(**kwargs)


def _value(f: dataclasses.Field, raw: Any, file: str, path: str) -> Any:
    unit, of = f.metadata["unit"], f.metadata["of"]
    if unit == "section":
        return build(of, raw, file, path)
    if unit == "list":
        if not isinstance(raw, list):
            raise ConfigError("expected a list", file=file, field=path)
        return tuple(build(of, item, file, f"{path}[{units.label(item, str(i))}]") for i, item in enumerate(raw))
    if unit in ("names", "classes") and isinstance(raw, str):  # on the command line (``--set``), separated by commas
        return tuple(n.strip() for n in raw.split(",") if n.strip())
    if unit in ("names", "classes"):
        return tuple(raw) if isinstance(raw, list) else raw
    if unit in TABLES:
        if not isinstance(raw, dict):
            raise ConfigError("expected a mapping of dtype to a value", file=file, field=path)
        kind = TABLES[unit]
        pairs = ((str(k), _parse(kind, v, file, f"{path}.{k}")) for k, v in raw.items())
        return tuple(sorted(pairs, key=lambda pair: pair[0]))
    if unit in units.PARSERS:  # a rate may be 0 only where its field allows none (``least=0``)
        return _parse(unit, raw, file, path, positive=f.metadata["least"] != 0)
    if estimates.is_estimate(raw):
        raise ConfigError("only a quantity can be an estimate", file=file, field=path)
    return raw  # names, choices and text: the spec checks them


def _parse(unit: str | None, raw: Any, file: str, path: str, positive: bool = True) -> Any:
    """A quantity of kind ``unit`` (None: a plain number), written plainly or as an estimate."""
    if estimates.is_estimate(raw):
        e = estimates.parse(raw, str(unit), _parser(unit), file, path)
        return estimates.estimated(e.value, e.low, e.high, e.written)
    if unit is None and not isinstance(raw, str):
        return raw  # a plain number: the spec checks it
    try:
        value = units.PARSERS[unit](raw) if unit is not None else _number(raw)  # text: from --set
    except units.UnitError as exc:
        raise ConfigError(str(exc), file=file, field=path) from None
    if unit in ("bandwidth", "flops") and (value <= 0 if positive else value < 0):
        raise ConfigError(f"{units.shown(raw)} must be positive", file=file, field=path)
    return value


def _parser(unit: str | None):
    return units.PARSERS[unit] if unit is not None else _number


def _number(raw: Any) -> Any:
    """A plain number, or text that reads as one (``--set execution.dequant.int4=4``)."""
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            raise units.UnitError(f"expected a number, got {units.shown(raw)}") from None
    return units.check_number(raw, 0, whole=False)




def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def apply_override(raw: dict[str, Any], path: str, value: Any, file: str = run_field("set"),
                   cls: type = ChipSpec) -> None:
    """Set ``path`` (e.g. ``sram.capacity`` or ``compute.peak.bf16``) in the raw mapping of a spec
    of class ``cls``.

    The first component may name an entry of one of its lists (a memory level or a link of a
    chip) directly; list entries are addressed by their ``name``.
    """
    parts = path.split(".")
    node: Any = raw
    known = yaml_fields(cls)
    if parts[0] not in raw and parts[0] not in known:
        for list_key in (k for k, f in known.items() if f.metadata["unit"] == "list"):
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
    """Return the validated spec and the raw mapping it was built from (its base's fields and
    the overrides applied)."""
    raw = copy.deepcopy(read_chip(path))
    for key, value in overrides:
        apply_override(raw, key, value)
    file = f"{path} (with {run_field('set')})" if overrides else str(path)
    return build(ChipSpec, raw, file, ""), raw  # ``ChipSpec`` fills in its family's values


# A number given for a quantity from Python (``simulate(set={"sram.capacity": 64 * 2**20})``) is in base units:
# bytes, B/s, seconds, FLOP/s, J per bit or FLOP, W, Hz. Written out with its unit, it is checked as any text.
BASE_UNITS = {"bytes": (1, "B"), "bandwidth": (1, "B/s"), "time": (1e12, "ps"), "flops": (1, "FLOP/s"),
              "bit_energy": (1e15, "fJ/bit"), "flop_energy": (1e15, "fJ/FLOP"), "power": (1, "W"),
              "frequency": (1, "Hz")}


def unit_at(path: str) -> str | None:
    """The kind of quantity the hardware field at ``path`` (as ``--set`` takes it) holds, or None."""
    parts = path.split(".")
    cls: type
    if parts[0] in _LISTS:
        cls, parts = _LISTS[parts[0]], parts[2:]
    elif parts[0] in _SECTIONS:
        cls, parts = _SECTIONS[parts[0]], parts[1:]
    elif parts[0] in yaml_fields(ChipSpec):
        cls = ChipSpec
    else:  # a level or a link, by its name
        parts = parts[1:]
        cls = MemoryLevel if parts and parts[0] in yaml_fields(MemoryLevel) else LinkSpec
    f = yaml_fields(cls).get(parts[0]) if parts else None
    if f is None:
        return None
    unit = f.metadata["unit"]
    if unit in TABLES:
        return TABLES[unit] if len(parts) == 2 else None
    return unit if len(parts) == 1 else None


def number_text(path: str, value: float) -> str:
    """A number set from Python for the field at ``path``, as text in its base unit (``"67108864 B"``)."""
    scale, suffix = BASE_UNITS.get(unit_at(path) or "", (1, ""))
    return f"{value * scale:.15g} {suffix}".strip()

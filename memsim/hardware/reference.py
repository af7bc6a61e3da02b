"""The hardware fields reference (``docs/hardware-fields.md``), generated from the field metadata
(``fields.spec_field``): every YAML key of a chip, its kind, default and meaning, so the page cannot
miss a field or keep one that is gone (``python scripts/reference.py --write``)."""
from __future__ import annotations

from dataclasses import MISSING, Field, fields
from typing import Any

from memsim.core import units
from memsim.hardware.families import BY_FAMILY, FAMILIES, Efficiency
from memsim.hardware.kinds import KINDS as MEMORY_KINDS
from memsim.hardware.spec import ChipSpec

KINDS = {"bytes": "size", "bandwidth": "bandwidth", "time": "time", "flops": "rate", "rates": "rates per dtype",
         "ratios": "fractions per dtype", "ratio": "fraction", "count": "count", "bit_energy": "energy per bit",
         "flop_energy": "energy per FLOP", "energies": "energies per dtype", "power": "power",
         "frequency": "frequency", "choice": "choice", "name": "name", "names": "names", "text": "text",
         "classes": "tensor classes", "ops": "op kinds"}


# Fields a chip leaves out that its family fills in (``families.fill_efficiencies``), however it was built.
FAMILY_FILLED = {"compute.efficiency": "family's estimate",
                 "compute.kernel_efficiency": "family's estimate, else `1`",
                 "levels[].efficiency": "a device memory's: family's estimate; else `1`"}


def _default(f: Field) -> str:
    if f.default is MISSING and f.default_factory is MISSING:
        return "required"
    factory: Any = f.default_factory
    value: Any = f.default if f.default is not MISSING else factory()
    unit = f.metadata["unit"]
    if value is None:
        return "family's"
    if isinstance(value, tuple):
        return "`[]`" if not value else f"`{dict(value) if isinstance(value[0], tuple) else list(value)}`"
    if unit in units.FORMATTERS and not isinstance(value, (str, bool)):
        return f"`{units.FORMATTERS[unit](value)}`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _meaning(f: Field) -> str:
    m = f.metadata
    text = m["help"].replace("|", "\\|").replace("\n", " ")
    choices = m["choices"]() if callable(m["choices"]) else m["choices"]
    if choices and m["unit"] in ("choice", "names", "classes"):
        text += " (one of: " + ", ".join(f"`{c}`" for c in choices) + ")"
    if m["least"] is not None:
        text += f"; at least {m['least']}"
    return text


def _rows(cls: type, prefix: str, sections: list[tuple[str, type]]) -> list[str]:
    rows = []
    for f in fields(cls):
        key = f.metadata["key"]
        if f.metadata["unit"] == "section":
            sections.append((f"{prefix}{key}.", f.metadata["of"]))
        elif f.metadata["unit"] == "list":
            sections.append((f"{prefix}{key}[].", f.metadata["of"]))
        else:
            default = FAMILY_FILLED.get(f"{prefix}{key}", _default(f))
            rows.append(f"| `{prefix}{key}` | {KINDS.get(f.metadata['unit'], f.metadata['unit'])} | {default} | "
                        f"{_meaning(f)} |")
    return rows


def reference() -> str:
    return fields_page(ChipSpec, "Hardware fields", [
        "Every field of a hardware YAML, generated from the field declarations in `memsim/hardware/spec.py` by "
        "`python scripts/reference.py --write`; `tests/hardware/test_reference.py` keeps it current. How to write "
        "a chip, start from a preset and override a field: [hardware.md](hardware.md). A default of *family's* "
        "is filled in by the chip's family (the families table below).", ""], "chip") + kinds_table() + families_table()


def families_table() -> str:
    """The families a chip's ``family`` names, from their declarations (``memsim/hardware/families/``)."""
    rows = ["", "## Families", "",
            "What a chip's `family` says about it, one file each in `memsim/hardware/families/` (adding a family is "
            "adding a file). *Execution*: the `execution` values a chip of it leaves out (over "
            f"{', '.join(f'`{k}`' for k in BY_FAMILY)} as every family shares them); *efficiencies*: what its "
            "compute (its GEMMs; *kernels*: a stack's kernels of that inside a model step, 1 where not given) and a "
            "device memory reach where the chip gives none, however it was built, estimates with their range; "
            "*weights on chip*: whether its scratchpad keeps weights; *stack*: what its chips run by default; "
            "*template*: what `base: FAMILY` starts from, the first preset's values as estimates whose ranges span the "
            "presets named (memsim/hardware/templates.py).", "",
            "| family | execution | compute efficiency | kernels | memory efficiency | weights on chip | stack | "
            "strategy | template | meaning |", "|---|---|---|---|---|---|---|---|---|---|"]
    for f in FAMILIES.values():
        own = ", ".join(f"`{k}: {list(v) if isinstance(v, tuple) else v}`" for k, v in f.execution
                        if BY_FAMILY[k] != (tuple(v) if isinstance(v, list) else v))
        kernels = _estimate(f.kernel_efficiency) if f.kernel_efficiency is not None else "1"
        rows.append(f"| `{f.name}` | {own or 'as every family'} | {_estimate(f.compute_efficiency)} | {kernels} | "
                    f"{_estimate(f.memory_efficiency)} | {f.weights_on_chip} | `{f.stack}` | `{f.strategy}` | "
                    f"{', '.join(f'`{n}`' for n in f.template) or 'none'} | {f.help} |")
    return "\n".join(rows) + "\n"


def _estimate(e: Efficiency) -> str:
    return f"{e.value:g} [{e.low:g} .. {e.high:g}]: {e.source}"


def kinds_table() -> str:
    """The memory kinds a level's ``kind`` names, from their declarations (``memsim/hardware/kinds/``)."""
    rows = ["", "## Memory kinds", "",
            "What a level's `kind` says about it, one file each in `memsim/hardware/kinds/` (adding a kind is "
            "adding a file). *Where*: on the chip, on the device beside it, or on the host (over a link, or a "
            "CPU's main memory); *holds*: what a level of the kind is a home for when its `holds` is left out; "
            "*efficiency*: `memory` where a level left without one streams at its family's estimate (unless "
            "reached over a link), `ideal` at peak; *clock*: `core` where a power cap that lowers the compute "
            "clock slows it too.", "",
            "| kind | where | scratchpad | holds | efficiency | clock | meaning |", "|---|---|---|---|---|---|---|"]
    for k in MEMORY_KINDS.values():
        rows.append(f"| `{k.name}` | {k.domain} | {'yes' if k.scratchpad else ''} | "
                    f"{', '.join(k.holds) or 'nothing'} | {k.efficiency} | {k.clock} | {k.help} |")
    return "\n".join(rows) + "\n"


def fields_page(root: type, title: str, intro: list[str], name: str) -> str:
    """A reference page of every field of ``root`` (a spec class whose fields carry ``spec_field``
    metadata) and of its sections and lists, one table each."""
    out = [f"# {title}", "", *intro]
    sections: list[tuple[str, type]] = [("", root)]
    while sections:
        prefix, cls = sections.pop(0)
        title = prefix.rstrip(".") or name
        doc = (cls.__doc__ or "").strip()
        doc = "" if doc.startswith(f"{cls.__name__}(") else doc.split("\n\n")[0].replace("\n", " ")
        out += [f"## `{title}`", "", *([doc, ""] if doc else []),
                "| field | kind | default | meaning |", "|---|---|---|---|", *_rows(cls, prefix, sections), ""]
    return "\n".join(out)

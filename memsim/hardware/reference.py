"""The hardware fields reference (``docs/hardware-fields.md``), generated from the field metadata
(``fields.spec_field``): every YAML key of a chip, its kind, default and meaning, so the page cannot
miss a field or keep one that is gone (``python scripts/reference.py --write``)."""
from __future__ import annotations

from dataclasses import MISSING, Field, fields
from typing import Any

from memsim.core import units
from memsim.hardware.spec import ChipSpec

KINDS = {"bytes": "size", "bandwidth": "bandwidth", "time": "time", "flops": "rate", "rates": "rates per dtype",
         "ratios": "fractions per dtype", "ratio": "fraction", "count": "count", "bit_energy": "energy per bit",
         "flop_energy": "energy per FLOP", "energies": "energies per dtype", "power": "power",
         "frequency": "frequency", "choice": "choice", "name": "name", "names": "names", "text": "text",
         "classes": "tensor classes", "ops": "op kinds"}


# Fields a hardware file leaves out that its family fills in as estimates (``families.efficiency_defaults``).
FAMILY_FILLED = {"compute.efficiency": "family's estimate (`1.0` in Python)",
                 "levels[].efficiency": "a device memory's: family's estimate; else `1.0`"}


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
        "is filled in by the chip's family (memsim/hardware/families.py).", ""], "chip")


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
